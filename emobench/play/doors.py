"""The connections of `emobench play`, below the requests: how many, how slow, and the HTTP layer's own errors.

aiohttp holds a connection for as long as its client likes: one that sends half a request line
(or nothing) is kept for an hour, and a few thousand such sockets (slowloris) use up the file
descriptors, so that nobody else gets in. Here every connection passes a `Doorman`:

- **A cap**: at most `play.max_connections` open (and never within `RESERVE` of the process's
  open-file limit), at most `play.connections_per_address` from one client address. A
  connection over an address's cap is closed at once. At the overall cap the oldest connection
  still waiting for a request's head makes room instead (a slow or idle one, many addresses'
  slowloris: a new client sends its request at once, so it is the youngest); only when none is
  waiting is the new one closed. The first of these, and then one a minute, is one line in the log.
- **A deadline for the headers**: a request's head must arrive within `play.header_timeout_s` of
  the connection opening or of the previous request, else the connection is closed; a keep-alive
  connection that sends nothing goes the same way. The body has its own deadline
  (`play.body_timeout_s`, emobench.play.guards.json_body).
- **A deadline for the answer**: a response that cannot leave the server's buffers (about 64 KiB
  in the process, and what the kernel holds for the socket) within `play.write_timeout_s`, because
  the client reads nothing, closes the connection at once, its queued bytes discarded. aiohttp
  handles a connection's pipelined requests one after another and reads no more than 32 ahead, so
  a client that does not read holds one stalled response. At the cap, a stalled connection makes
  room as a waiting one does. Any connection closed with answers still unread (by the header
  deadline, or to make room) is reset the same way: a plain close waits for the client to read
  them, holding its descriptor. Each kind of closing is one line a minute in the log.
- **Descriptors**: the static files are served from memory, so a connection holds one descriptor
  whatever it asked; the cap counts those the process already holds when it starts listening.
- **The HTTP layer's own errors** (a broken request line, a bad header) answer as every other
  error does: one JSON line, the security headers, no server version, and no traceback in the log.
- Accepting, and closing at once what the doorman cannot hold, is emobench.play.listener's.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import resource
import socket
import struct
import termios
import time
from collections import Counter
from typing import Any, cast

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from emobench.config import PlayConfig
from emobench.play.guards import HEADERS

# File descriptors kept for journals, run files, the model endpoints' connections, and the few accepted
# sockets on their way to the doorman (emobench.play.listener)
RESERVE = 256
# A connection's kernel send buffer (Linux doubles it), not grown by autotuning to 4 MiB: what a client
# that reads nothing can make the server queue is this, plus asyncio's 64 KiB, plus one response
SEND_BUFFER = 64 * 1024
LINGER_S = 1.0  # after an early answer (408, 413), how long the rest of a body is read before closing
SAY_EVERY_S = 60.0
log = logging.getLogger("emobench.play")


def descriptors_in_use() -> int:
    """The process's open file descriptors (Linux and macOS list them; elsewhere 0 is assumed)."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(folder))
        except OSError:
            continue
    return 0


def connection_cap(configured: int) -> int:
    """At most `configured`, and RESERVE below what the open-file limit (`ulimit -n`) leaves besides
    the descriptors already open (run files, the endpoints' clients). The soft limit is raised first,
    as far as the hard one allows, to what `configured` needs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return configured
    held = descriptors_in_use()
    want = configured + RESERVE + held
    if soft < want and (hard == resource.RLIM_INFINITY or hard > soft):
        soft = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return max(1, min(configured, soft - RESERVE - held))


class Quietly:
    """One log line per `every` seconds for a recurring event, with how often it happened meanwhile."""

    def __init__(self, every: float = SAY_EVERY_S) -> None:
        self.every, self.last, self.count = every, -every, 0

    def say(self, line: str) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.last >= self.every:
            more = f" ({self.count} times since the last note)" if self.count > 1 else ""
            log.warning("emobench play: %s%s", line, more)
            self.last, self.count = now, 0


class Door(RequestHandler):
    """One connection: admitted or refused by the doorman, closed when its next head is late."""

    def __init__(self, manager: Doorman, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self.doorman = manager
        self.address = ""
        self.admitted = self.refused = False
        self.deadline: asyncio.TimerHandle | None = None
        self.stall: asyncio.TimerHandle | None = None  # the write deadline, while the transport's buffer is full
        self.seen = 0  # requests whose head had arrived at the last check

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        self.address = str(peer[0]) if isinstance(peer, tuple) else ""
        if not self.doorman.admit(self):
            self.refused = True
            cast(asyncio.Transport, transport).abort()  # the descriptor is freed at once; no handler, no task
            return
        self.admitted = True
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.refused:
            return  # nothing was set up
        self.leave()
        for timer in (self.deadline, self.stall):
            if timer is not None:
                timer.cancel()
        self.deadline = self.stall = None
        super().connection_lost(exc)

    def leave(self) -> None:
        """Stop counting this connection (once: when evicted, or when lost)."""
        if self.admitted:
            self.admitted = False
            self.doorman.leave(self)

    @property
    def waiting(self) -> bool:
        """Open and waiting for a request's head (idle, or sending one slowly): no request is being
        handled or queued. (Also true before aiohttp's reading task first runs.)"""
        return self.transport is not None and not self._request_in_progress and not self._messages

    @property
    def stalled(self) -> bool:
        """A response waits for the client to read (the transport's buffer is over its high-water mark)."""
        return self.transport is not None and self.writing_paused

    def evict(self) -> None:
        """Close (stop counting it at once): at once when answers wait unread, since a plain close would
        wait for the client to read them, holding the descriptor uncounted, or the kernel's memory for
        them until its own timeout (the queue of a client that takes nothing never empties)."""
        if self.unsent():
            self.drop()
            return
        self.leave()
        self.force_close()

    def unsent(self) -> int:
        """Bytes of answers the client has not taken: in the transport's buffer and in the kernel's send queue."""
        transport = self.transport
        if transport is None:
            return 0
        queued = transport.get_write_buffer_size()
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):  # SIOCOUTQ: sent but not acknowledged, or not sent at all
                queued += struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
        return queued

    def drop(self) -> None:
        """Close now, discarding what is queued: a plain close waits for the client to read it all."""
        self.leave()
        transport = self.transport
        if transport is None:
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:  # a reset: the kernel frees the socket's queue too
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()

    def pause_writing(self) -> None:
        super().pause_writing()
        self.stall = self._loop.call_later(self.doorman.limits.write_timeout_s, self._unread)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.stall is not None:
            self.stall.cancel()
            self.stall = None

    def _unread(self) -> None:
        self.stall = None
        self.doorman.unread.say(f"closed a connection whose client read none of its response for "
                                f"{self.doorman.limits.write_timeout_s:g} s (play.write_timeout_s)")
        self.drop()

    def _arm(self) -> None:
        self.deadline = self._loop.call_later(self.doorman.limits.header_timeout_s, self._late)

    def _late(self) -> None:
        self.deadline = None
        if self.transport is None:
            return
        if self.waiting and self._request_count == self.seen:  # no head came since the last check: slow or idle
            self.evict()
            return
        self.seen = self._request_count
        self._arm()

    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        """A request the HTTP layer could not read: one JSON line with the usual headers; a debug line in the log."""
        log.debug("emobench play: %s from a client: %s", status, str(exc or message).splitlines()[0][:200])
        if request.writer.output_size > 0:
            raise ConnectionError("the response had begun; the connection is closed")
        text = "the request could not be read as HTTP" if status < 500 else "the server failed on this request"
        response = web.json_response({"error": text}, status=status, headers=HEADERS)
        response.force_close()
        return response


class Doorman(web.Server):
    """aiohttp's server, its connections counted per client address and in all."""

    def __init__(self, handler: Any, *, limits: PlayConfig, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self.limits = limits
        self.cap = connection_cap(limits.max_connections)
        self.open: Counter[str] = Counter()
        self.doors: dict[Door, None] = {}  # admitted, oldest first
        self.refused = self.evicted = 0
        self.note, self.unread = Quietly(), Quietly()

    def __call__(self) -> Door:
        return Door(self, loop=self._loop, **self._kwargs)

    def room_for(self, address: str, in_flight: int = 0) -> bool:
        """Whether a connection from `address` would be admitted, beside `in_flight` accepted ones not yet
        here; a refusal is counted and noted."""
        if self.open[address] >= self.limits.connections_per_address:
            self.refused += 1
            self.note.say(f"refused a connection: one client address holds {self.open[address]} connections, its cap "
                          "(play.connections_per_address)")
            return False
        if len(self.doors) + in_flight >= self.cap and not any(d.waiting or d.stalled for d in self.doors):
            self.refused += 1
            self.note.say(f"refused a connection: {len(self.doors)} connections are open, the cap "
                          "(play.max_connections, or the open-file limit), and none is idle or stalled")
            return False
        return True

    def admit(self, door: Door) -> bool:
        if not self.room_for(door.address):
            return False
        if len(self.doors) >= self.cap:
            oldest = next(d for d in self.doors if d.waiting or d.stalled)
            self.evicted += 1
            self.note.say(f"{len(self.doors)} connections are open, the cap (play.max_connections, or the open-file "
                          "limit): closed the oldest one still waiting for its request or for its client to "
                          "read, to make room")
            oldest.evict()
        self.doors[door] = None
        self.open[door.address] += 1
        return True

    def leave(self, door: Door) -> None:
        self.doors.pop(door, None)
        self.open[door.address] -= 1
        if self.open[door.address] <= 0:
            del self.open[door.address]


class PlayRunner(web.AppRunner):
    """An AppRunner whose connections pass a Doorman."""

    def __init__(self, app: web.Application, limits: PlayConfig) -> None:
        super().__init__(app, access_log=None, lingering_time=min(LINGER_S, limits.body_timeout_s))
        self.limits = limits

    async def _make_server(self) -> web.Server:
        plain = await super()._make_server()
        return Doorman(plain.request_handler, limits=self.limits, request_factory=plain.request_factory,
                       handler_cancellation=plain.handler_cancellation, loop=asyncio.get_running_loop(),
                       **plain._kwargs)
