"""The page's HTTP server (aiohttp): two HTML pages, static files, a small JSON API.

Safety: requests are capped in size; every response forbids inline script and framing and
sends no referrer (the player's token is in the URL); pages are rendered by jinja2 with
autoescape and the script writes text with textContent only; errors reach the page as one line.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

from emobench.play import views
from emobench.play.session import PlayHub
from emobench.play.store import PlayError

HERE = Path(__file__).parent
TEMPLATES, STATIC = HERE / "templates", HERE / "static"
MAX_REQUEST = 64 * 1024  # bytes: a message is at most 4,000 characters
HUB = web.AppKey("hub", PlayHub)
PAGES = web.AppKey("pages", jinja2.Environment)
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Security headers on every response; a PlayError or a bad body becomes a one-line JSON error."""
    try:
        response = await handler(request)
    except PlayError as exc:
        response = web.json_response({"error": str(exc)}, status=exc.status)
    except web.HTTPRequestEntityTooLarge:
        response = web.json_response({"error": f"the request is larger than {MAX_REQUEST // 1024} KiB"}, status=413)
    except web.HTTPException as exc:
        response = web.json_response({"error": exc.reason}, status=exc.status)
    response.headers.update(HEADERS)
    return response


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        data = await request.json()
    except ValueError:
        raise PlayError("the request body is not JSON") from None
    if not isinstance(data, dict):
        raise PlayError("the request body is not a JSON object")
    return data


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
    html = request.app[PAGES].get_template(name).render(seat=request.app[HUB].seat, **context)
    return web.Response(text=html, content_type="text/html")


async def start_page(request: web.Request) -> web.Response:
    return _page(request, "start.html.j2")


async def player_page(request: web.Request) -> web.Response:
    hub = request.app[HUB]
    hub.player(request.match_info["token"])
    return _page(request, "player.html.j2", version=hub.store.page_version)


async def join(request: web.Request) -> web.Response:
    data = await _body(request)
    token = request.app[HUB].join(_text(data, "handle"), data.get("consent") is True)
    return web.json_response({"token": token})


async def player(request: web.Request) -> web.Response:
    return web.json_response(views.player_view(request.app[HUB], request.match_info["token"]))


async def start_episode(request: web.Request) -> web.Response:
    hub, data = request.app[HUB], await _body(request)
    case_id = data.get("case") or None
    letter = data.get("subject") or None
    if case_id is not None and not isinstance(case_id, str):
        raise PlayError("case: not text")
    label = next((lb for lb, ch in views.subject_letters(hub).items() if ch == letter), None)
    if letter is not None and label is None:
        raise PlayError("no such subject")
    live = await hub.start(request.match_info["token"], case_id, label)
    return web.json_response(views.episode_view(hub, live))


async def episode(request: web.Request) -> web.Response:
    hub = request.app[HUB]
    live = await hub.get(request.match_info["token"], request.match_info["episode"])
    return web.json_response(views.episode_view(hub, live))


async def turn(request: web.Request) -> web.Response:
    hub, data = request.app[HUB], await _body(request)
    live = await hub.turn(request.match_info["token"], request.match_info["episode"], _text(data, "message"), _meter(data))
    return web.json_response(views.episode_view(hub, live))


async def leave(request: web.Request) -> web.Response:
    hub, data = request.app[HUB], await _body(request)
    live = await hub.leave(request.match_info["token"], request.match_info["episode"], _text(data, "message"), _meter(data))
    return web.json_response(views.episode_view(hub, live))


async def delete(request: web.Request) -> web.Response:
    await request.app[HUB].delete(request.match_info["token"], request.match_info["episode"])
    return web.json_response({"deleted": request.match_info["episode"]})


def make_app(hub: PlayHub) -> web.Application:
    app = web.Application(client_max_size=MAX_REQUEST, middlewares=[guard])
    app[HUB] = hub
    app[PAGES] = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, undefined=jinja2.StrictUndefined
    )
    episode_path = "/api/p/{token}/episodes/{episode}"
    app.add_routes([
        web.get("/", start_page),
        web.get("/p/{token}", player_page),
        web.post("/api/join", join),
        web.get("/api/p/{token}", player),
        web.post("/api/p/{token}/episodes", start_episode),
        web.get(episode_path, episode),
        web.post(episode_path + "/turn", turn),
        web.post(episode_path + "/leave", leave),
        web.delete(episode_path, delete),
        web.static("/static", STATIC),
    ])

    async def settle(_: web.Application) -> None:
        await hub.store.settle()

    app.on_shutdown.append(settle)
    return app
