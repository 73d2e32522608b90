"""The page's HTTP server (aiohttp): two HTML pages, static files, a small JSON API.

Safety (emobench.play.guards): host, origin, size, rate and shape of every request are checked;
every response forbids inline script and framing and sends no referrer (the player's token is in
the URL); pages are rendered by jinja2 with autoescape and the script writes text with
textContent only; errors reach the page as one line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jinja2
import yaml
from aiohttp import web

from emobench.play import views
from emobench.play.guards import GUARD, MAX_REQUEST, Guard, continue_or_refuse, json_body
from emobench.play.rating import parse_rating, rate
from emobench.play.recovery import expire_idle
from emobench.play.session import PlayHub
from emobench.play.store import PlayError
from emobench.prompts import cases_language

HERE = Path(__file__).parent
TEMPLATES, STATIC = HERE / "templates", HERE / "static"
UI = TEMPLATES / "ui"  # the page's words per language: ui/en.yaml, ui/zh.yaml
ASSETS = [TEMPLATES / "start.html.j2", TEMPLATES / "player.html.j2", STATIC / "play.js", STATIC / "play.css",
          UI / "en.yaml", UI / "zh.yaml"]
# The static files, read once: a response from memory holds no file descriptor while its client
# reads slowly (aiohttp's FileResponse keeps the file open for as long as that takes)
TYPES = {".js": "text/javascript", ".css": "text/css"}
HUB = web.AppKey("hub", PlayHub)
PAGES = web.AppKey("pages", jinja2.Environment)
WORDS = web.AppKey("words", dict)
FILES = web.AppKey("files", dict)


def ui_words(language: str) -> dict[str, Any]:
    """The page's words in a language; the files ship with the package (check_assets)."""
    words: dict[str, Any] = yaml.safe_load((UI / f"{language}.yaml").read_text(encoding="utf-8"))
    return words


def _text(data: dict[str, Any], name: str) -> str:
    value = data.get(name, "")
    if not isinstance(value, str):
        raise PlayError(f"{name}: not text")
    return value


def _meter(data: dict[str, Any]) -> int | None:
    value = data.get("meter")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlayError("meter: not a whole number")
    return value


def _page(request: web.Request, name: str, **context: Any) -> web.Response:
    html = request.app[PAGES].get_template(name).render(seat=request.app[HUB].seat, ui=request.app[WORDS], **context)
    return web.Response(text=html, content_type="text/html")


def static_files() -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(STATIC.iterdir()) if path.suffix in TYPES}


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    body = request.app[FILES].get(name)
    if body is None:
        raise web.HTTPNotFound()
    return web.Response(body=body, content_type=TYPES[Path(name).suffix], charset="utf-8")


async def start_page(request: web.Request) -> web.Response:
    return _page(request, "start.html.j2")


async def player_page(request: web.Request) -> web.Response:
    hub = request.app[HUB]
    hub.player(request.match_info["token"])
    return _page(request, "player.html.j2", version=hub.store.page_version)


async def join(request: web.Request) -> web.Response:
    data = await json_body(request)
    token = request.app[HUB].join(_text(data, "handle"), data.get("consent") is True, request.remote or "")
    return web.json_response({"token": token})


async def player(request: web.Request) -> web.Response:
    return web.json_response(views.player_view(request.app[HUB], request.match_info["token"]))


async def start_episode(request: web.Request) -> web.Response:
    hub, data = request.app[HUB], await json_body(request)
    case_id = data.get("case") or None
    letter = data.get("subject") or None
    if case_id is not None and not isinstance(case_id, str):
        raise PlayError("case: not text")
    label = next((lb for lb, ch in views.subject_letters(hub).items() if ch == letter), None)
    if letter is not None and label is None:
        raise PlayError("no such subject")
    live = await hub.start(request.match_info["token"], case_id, label, _request(request), request.remote or "")
    return web.json_response(views.episode_view(hub, live))


async def episode(request: web.Request) -> web.Response:
    hub = request.app[HUB]
    live = await hub.get(request.match_info["token"], request.match_info["episode"])
    return web.json_response(views.episode_view(hub, live))


async def turn(request: web.Request) -> web.Response:
    hub, data = request.app[HUB], await json_body(request)
    live = await hub.turn(request.match_info["token"], request.match_info["episode"], _text(data, "message"), _meter(data),
                          _request(request))
    return web.json_response(views.episode_view(hub, live))


async def leave(request: web.Request) -> web.Response:
    hub, data = request.app[HUB], await json_body(request)
    live = await hub.leave(request.match_info["token"], request.match_info["episode"], _text(data, "message"), _meter(data),
                           _request(request))
    return web.json_response(views.episode_view(hub, live))


async def delete(request: web.Request) -> web.Response:
    token, episode_id = request.match_info["token"], request.match_info["episode"]
    removed = await request.app[HUB].delete(token, episode_id)
    forgotten = "play/players.jsonl" in removed
    request.app[GUARD].forget(token, episode_id, forgotten)  # no replay serves the deleted words again
    return web.json_response({"deleted": episode_id, "player_forgotten": forgotten})


async def rate_episode(request: web.Request) -> web.Response:
    hub, data = request.app[HUB], await json_body(request)
    await rate(hub, request.match_info["token"], request.match_info["episode"], parse_rating(data))
    return web.json_response(views.episode_view(hub, await hub.get(request.match_info["token"], request.match_info["episode"])))


def _request(request: web.Request) -> str | None:
    """The request's Idempotency-Key (checked by the guard), kept in the journal with what it played."""
    return request.headers.get("Idempotency-Key")


def make_app(hub: PlayHub, guard: Guard) -> web.Application:
    app = web.Application(client_max_size=MAX_REQUEST, middlewares=[guard.middleware])
    app[HUB] = hub
    app[GUARD] = guard
    app[FILES] = static_files()
    app[WORDS] = ui_words(cases_language(hub.cases.values()))  # a Chinese run's page speaks Chinese
    app[PAGES] = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, undefined=jinja2.StrictUndefined
    )
    episode_path = "/api/p/{token}/episodes/{episode}"
    expect: dict[str, Any] = {"expect_handler": continue_or_refuse}  # every route: no 100 Continue over the limit
    app.add_routes([
        web.get("/", start_page, **expect),
        web.get("/p/{token}", player_page, **expect),
        web.post("/api/join", join, **expect),
        web.get("/api/p/{token}", player, **expect),
        web.post("/api/p/{token}/episodes", start_episode, **expect),
        web.get(episode_path, episode, **expect),
        web.post(episode_path + "/turn", turn, **expect),
        web.post(episode_path + "/leave", leave, **expect),
        web.post(episode_path + "/rating", rate_episode, **expect),
        web.delete(episode_path, delete, **expect),
        web.get("/static/{name}", static, **expect),
    ])

    async def settle(_: web.Application) -> None:
        await hub.store.settle()

    async def expiring(_: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(expire_idle(hub, logging.getLogger("emobench.play").warning))
        yield
        task.cancel()

    app.on_shutdown.append(settle)
    app.cleanup_ctx.append(expiring)
    return app
