"""What every request passes before it reaches a handler, and what every response carries.

- **Host**: the page is served only under a name that cannot be rebound to another address:
  localhost, an IP address, or a host of `play.allowed_origins`. A web page that points its
  own name at this machine (DNS rebinding) gets 421.
- **Origin**: a request that changes something (POST, DELETE) and carries an Origin header must
  come from the page's own origin or an allowed one; browsers send Origin with every such request,
  so another site's page cannot join, play or delete. A request without Origin is not from a
  page in a browser (curl, a script): it needs no check, since it holds no one else's cookies or
  rights, and the player's token in the path is what authorises it. A body must be JSON
  (`Content-Type: application/json`), which a cross-site form cannot send.
- **Limits** (docs/play.md): a request with a player's link (their page, a read, a start, turn or
  leave) counts against that player; a start, turn or leave that reaches a model also draws on the
  server's budget, shared max-min fairly among players (emobench.play.session). A request without
  one (a page, a static file, a join, an unknown link) counts against its client address, then
  against the anonymous budget, shared max-min fairly among networks (`limits.party`). So a
  player's reads wait on nobody, and a greedy party is refused before the others. Bodies of at
  most 64 KiB (413) that arrive within `play.body_timeout_s` (408), flat JSON objects of text,
  numbers and true/false only (400), valid Unicode (a lone surrogate is 400) without NUL
  characters (400). A body announced with `Expect: 100-continue` over 64 KiB is refused (413)
  before the client sends it.
- **Idempotency**: a start, turn or leave with an `Idempotency-Key` header returns the first
  successful response to that key; the request is not run again. An error is not kept (a
  corrected retry plays), and a delete forgets every kept response of the episode.
- Every response, errors included, carries the Content-Security-Policy and no `Server` version.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import HttpVersion11, hdrs, web
from aiohttp.web_protocol import RequestPayloadError
from yarl import URL

from emobench.config import PlayConfig
from emobench.play.limits import Clock, FairShare, Replays, Window, party
from emobench.play.store import PlayError, PlayStore

MAX_REQUEST = 64 * 1024  # bytes: a message is at most 4,000 characters
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    "Server": "emobench-play",
}
CHANGES = {"POST", "PUT", "PATCH", "DELETE"}
IDEMPOTENT = re.compile(r"/api/p/[^/]+/episodes(/[0-9a-f]{16}/(turn|leave))?")
KEY = re.compile(r"[\x21-\x7e]{1,128}")  # an Idempotency-Key: printable ASCII, no spaces
FIRST_VISIT = 8  # requests a person's first visit takes without a link: pages, their script and style, the join
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
log = logging.getLogger("emobench.play")


class Guard:
    def __init__(self, config: PlayConfig, store: PlayStore, clock: Clock = time.monotonic) -> None:
        self.config, self.store = config, store
        self.origins = {o.rstrip("/").lower() for o in config.allowed_origins}
        self.hosts = {URL(o).host for o in self.origins}
        self.per_player = Window(config.player_per_minute, clock=clock)
        self.per_address = Window(config.anonymous_per_minute, clock=clock)
        self.anonymous = FairShare(config.anonymous_total_per_minute, clock=clock, floor=FIRST_VISIT)
        self.replays = Replays()

    def host_allowed(self, host: str | None) -> bool:
        name = URL(f"http://{host}").host if host else None
        if not name:
            return False
        if name == "localhost" or name in self.hosts:
            return True
        try:
            ipaddress.ip_address(name.strip("[]"))
        except ValueError:
            return False
        return True

    def origin_allowed(self, request: web.Request) -> bool:
        origin = request.headers.get("Origin")
        if origin is None:
            return True
        origin = origin.rstrip("/").lower()
        return origin in self.origins or origin == f"{request.scheme}://{request.host}".lower()

    def check(self, request: web.Request) -> None:
        if not self.host_allowed(request.host):
            raise PlayError("this page is not served under that host name; the operator can add it to "
                            "play.allowed_origins (--allow-origin)", status=421)
        if request.method in CHANGES:
            if not self.origin_allowed(request):
                raise PlayError("requests from another site's page are refused; the operator can allow an origin "
                                "with --allow-origin", status=403)
            if request.body_exists and request.content_type != "application/json":
                raise PlayError("the request body must be application/json", status=415)
        self.admit(request.match_info.get("token"), request.remote or "")

    def admit(self, token: str | None, address: str) -> None:
        """The request limits, for a request with the player's link `token` (None: none) from `address`."""
        if token is not None and self.store.player(token) is not None:
            if not self.per_player.allow(token):
                raise PlayError(f"too many requests: at most {self.config.player_per_minute} a minute per player "
                                "(play.player_per_minute, --player-per-minute); wait a moment", status=429)
            return  # the server's budget is charged by what reaches a model (PlayHub.spend), never by a read
        if not self.per_address.allow(address):  # a page, a join, or a link nobody holds
            raise PlayError(f"too many requests without a player's link from this address: at most "
                            f"{self.config.anonymous_per_minute} a minute (play.anonymous_per_minute, "
                            "--anonymous-per-minute); wait a moment", status=429)
        # Charged last: what the address's own limit refuses costs the other networks nothing.
        if not self.anonymous.allow(party(address)):
            raise PlayError(f"the server is busy: at most {self.config.anonymous_total_per_minute} requests without "
                            "a player's link a minute, shared fairly among networks (play.anonymous_total_per_minute, "
                            "--anonymous-total-per-minute); try again in a minute", status=429)

    def replay_key(self, request: web.Request) -> str | None:
        key = request.headers.get("Idempotency-Key")
        if key is None or request.method != "POST" or not IDEMPOTENT.fullmatch(request.path):
            return None
        if not KEY.fullmatch(key):
            raise PlayError("Idempotency-Key: 1 to 128 printable characters without spaces")
        return f"{request.path}\0{key}"

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Checks, replays and one-line JSON errors; the headers on whatever goes out."""
        try:
            self.check(request)
            key = self.replay_key(request)
            response = await (handler(request) if key is None else self._once(key, request, handler))
        except Exception as exc:  # everything becomes one line: the page never sees a traceback
            response = _error_response(exc)
        response.headers.update(HEADERS)
        return response

    async def _once(self, key: str, request: web.Request, handler: Handler) -> web.StreamResponse:
        while True:
            claimed = self.replays.claim(key)
            if claimed is None:
                break
            if isinstance(claimed, tuple):
                return _replayed(*claimed)
            try:
                return _replayed(*await asyncio.shield(claimed))
            except asyncio.CancelledError:
                if not claimed.cancelled():  # this request was cancelled, not the first one
                    raise
        try:
            try:
                response = await handler(request)
            except Exception as exc:
                response = _error_response(exc)
        except BaseException:
            self.replays.drop(key)
            raise
        assert isinstance(response, web.Response)
        body = bytes(response.body or b"")  # type: ignore[arg-type]
        token, episode = request.match_info.get("token", ""), request.match_info.get("episode") or _episode_id(body)
        if response.status >= 400 or self.gone(token, episode):  # an error is not the answer a retry must get
            self.replays.drop(key)
        else:
            self.replays.settle(key, (response.status, body), (token, episode))
        return response

    def gone(self, token: str, episode: str | None) -> bool:
        """The player or the episode was deleted meanwhile: its response is not kept."""
        return self.store.player(token) is None or (episode is not None and episode in self.store.deleted)

    def forget(self, token: str, episode: str, player: bool) -> None:
        """A delete: every kept response of the episode, and of the player when they went with it."""
        self.replays.purge(episode, token if player else None)


def _episode_id(body: bytes) -> str | None:
    """The episode a start created, from its answer."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    found = data.get("id") if isinstance(data, dict) else None
    return found if isinstance(found, str) else None


def _replayed(status: int, body: bytes) -> web.Response:
    response = web.Response(status=status, body=body, content_type="application/json")
    response.headers["Idempotent-Replayed"] = "true"
    return response


def _error_response(exc: Exception) -> web.Response:
    if isinstance(exc, PlayError):
        return web.json_response({"error": str(exc)}, status=exc.status)
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return web.json_response({"error": f"the request is larger than {MAX_REQUEST // 1024} KiB"}, status=413)
    if isinstance(exc, web.HTTPException):
        return web.json_response({"error": exc.reason}, status=exc.status)
    log.exception("emobench play: an unexpected error", exc_info=exc)
    return web.json_response({"error": "the server failed on this request; it is logged, and nothing was saved "
                                       "from it"}, status=500)


async def continue_or_refuse(request: web.Request) -> web.StreamResponse | None:
    """The routes' `Expect` handler: 100 Continue only for a body the server would read; a larger one
    is 413 and the connection closed, so nothing of it is read. Runs before the middleware."""
    if request.version != HttpVersion11:
        return None  # HTTP/1.0 has no 100 Continue: the body just follows
    if request.headers.get(hdrs.EXPECT, "").lower() != "100-continue":
        return _closing(web.json_response({"error": "only Expect: 100-continue is understood"}, status=417))
    if (request.content_length or 0) > MAX_REQUEST:
        return _closing(_error_response(web.HTTPRequestEntityTooLarge(MAX_REQUEST, request.content_length or 0)))
    await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    request.writer.output_size = 0  # the response proper has not begun
    return None


def _closing(response: web.Response) -> web.Response:
    response.headers.update(HEADERS)
    response.force_close()  # no lingering read of the body, and none of it parsed as a next request
    return response


async def json_body(request: web.Request) -> dict[str, Any]:
    """The body, read within play.body_timeout_s: a body sent a byte at a time does not hold the server."""
    seconds = request.app[GUARD].config.body_timeout_s
    try:
        async with asyncio.timeout(seconds):
            raw = await request.read()
    except TimeoutError:
        raise PlayError(f"the request body did not arrive within {seconds:g} s", status=408) from None
    except (ConnectionError, RequestPayloadError):  # the client went away mid-body: nobody to answer, nothing to log
        raise PlayError("the connection closed before the request body arrived") from None
    return parse_body(raw)


def parse_body(raw: bytes) -> dict[str, Any]:
    """A request's JSON object: flat, valid Unicode, of text, numbers, true/false and null."""
    try:
        data = orjson.loads(raw)  # refuses lone surrogates and invalid UTF-8, unlike json.loads
    except orjson.JSONDecodeError as exc:
        raise PlayError(f"the request body is not valid JSON text ({str(exc).split(':')[0]})") from None
    if not isinstance(data, dict):
        raise PlayError("the request body is not a JSON object")
    if any(isinstance(value, dict | list) for value in data.values()):
        raise PlayError("the request body nests too deep: its values are text, numbers, true/false or null")
    for name, value in data.items():  # docs/play.md: why a NUL is refused, not stored
        if isinstance(value, str) and "\x00" in value:
            raise PlayError(f"{name[:40]}: contains a NUL character")
    return data


GUARD = web.AppKey("guard", Guard)
