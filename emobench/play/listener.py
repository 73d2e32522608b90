"""The listening socket of `emobench play`: connections the doorman cannot hold are closed as they are accepted.

aiohttp's site listens through asyncio's server, which accepts up to its backlog (128) connections each
time the socket is readable and wraps every one in a transport a few loop turns later; one the doorman
refuses is closed a turn after that. Under a flood of connections that kept hundreds of descriptors in
flight beyond the doorman's cap, so the process reached its open-file limit and a player's journal write
failed. Here the site accepts the sockets itself: a connection the doorman would refuse (its address at
its cap, or the server full with nothing to evict) is closed before the next accept, and at most
`IN_FLIGHT` accepted connections wait for their transport, so what the process holds beyond the cap is
bounded by a constant, not by the flood. Running out of descriptors in accept() pauses accepting for a
second, as asyncio's own server does, and is one line a minute.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from typing import Any

from aiohttp import web
from yarl import URL

from emobench.play.doors import Doorman, Quietly

BACKLOG = 128  # the kernel's listen queue: a burst of connects waits there rather than being refused
ACCEPTS_PER_TURN = 32  # accepted in one wake-up before other work gets the loop
IN_FLIGHT = 16  # accepted connections still waiting for their transport
RETRY_S = 1.0  # how long accepting pauses after the process ran out of descriptors
OUT_OF_FILES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


def bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for every address `host` names, as asyncio's create_server binds them."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class GuardedSite(web.BaseSite):
    """A TCP site whose accept() asks the doorman first."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int) -> None:
        super().__init__(runner, backlog=BACKLOG)
        self.host, self.port = host, port
        self.sockets: list[socket.socket] = []
        self.paused: set[socket.socket] = set()  # while IN_FLIGHT connections wait for their transport
        self.waiting: set[asyncio.Task[Any]] = set()
        self.out_of_files = Quietly()

    @property
    def doorman(self) -> Doorman:
        server = self._runner.server
        assert isinstance(server, Doorman), "a GuardedSite serves a PlayRunner"
        return server

    @property
    def name(self) -> str:
        host, port = self.sockets[0].getsockname()[:2] if self.sockets else (self.host, self.port)
        return str(URL.build(scheme="http", host=host, port=port))

    async def start(self) -> None:
        await super().start()
        self.sockets = bind(self.host, self.port)
        for sock in self.sockets:
            self._listen(sock)

    async def stop(self) -> None:
        for sock in self.sockets:
            if sock.fileno() >= 0:
                asyncio.get_running_loop().remove_reader(sock.fileno())
            sock.close()
        for task in list(self.waiting):
            task.cancel()
        await super().stop()

    def _listen(self, sock: socket.socket) -> None:
        self.paused.discard(sock)
        if sock.fileno() >= 0:
            asyncio.get_running_loop().add_reader(sock.fileno(), self._accept, sock)

    def _pause(self, sock: socket.socket) -> None:
        if sock.fileno() >= 0:
            asyncio.get_running_loop().remove_reader(sock.fileno())
            self.paused.add(sock)

    def _accept(self, sock: socket.socket) -> None:
        doorman = self.doorman
        for _ in range(ACCEPTS_PER_TURN):
            if len(self.waiting) >= IN_FLIGHT:
                self._pause(sock)  # listened to again as a transport is made
                return
            try:
                conn, peer = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                if exc.errno not in OUT_OF_FILES:
                    raise
                self.out_of_files.say(f"cannot accept connections ({exc.strerror}); new ones wait. Lower "
                                      "play.max_connections or raise the open-file limit (ulimit -n)")
                asyncio.get_running_loop().remove_reader(sock.fileno())
                asyncio.get_running_loop().call_later(RETRY_S, self._listen, sock)
                return
            if not doorman.room_for(str(peer[0]) if isinstance(peer, tuple) else "", len(self.waiting)):
                conn.close()  # now, not turns later: the descriptor is back before the next accept
                continue
            conn.setblocking(False)
            task = asyncio.get_running_loop().create_task(self._hand_over(conn))
            self.waiting.add(task)

    async def _hand_over(self, conn: socket.socket) -> None:
        """The connection wrapped in a transport and given to the doorman's protocol (a Door)."""
        try:
            await asyncio.get_running_loop().connect_accepted_socket(self.doorman, conn)
        except OSError:
            conn.close()
        finally:
            self.waiting.discard(asyncio.current_task())
            if len(self.waiting) < IN_FLIGHT:
                for sock in list(self.paused):
                    self._listen(sock)
