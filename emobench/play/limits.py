"""Request limits and idempotent replays of `emobench play`, kept in memory.

`Window` counts requests per key over the last minute; `Replays` remembers the first response
to each `Idempotency-Key`, so that a double-sent message, a retried request or a second tab
plays nothing twice. Replays of requests whose first try was lost with a killed server are
recognised from the episode journals instead (emobench.play.session).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable

Clock = Callable[[], float]


class Window:
    """At most `limit` events per key in any `span` seconds."""

    def __init__(self, limit: int, span: float = 60.0, clock: Clock = time.monotonic) -> None:
        self.limit, self.span, self.clock = limit, span, clock
        self._seen: dict[str, deque[float]] = {}

    def allow(self, key: str) -> bool:
        """Count one event for key; False (and not counted) when the window is full."""
        at = self.clock()
        seen = self._seen.setdefault(key, deque())
        while seen and seen[0] <= at - self.span:
            seen.popleft()
        if len(seen) >= self.limit:
            return False
        seen.append(at)
        if len(self._seen) > 10_000:  # forget keys that went quiet, so the map stays small
            self._seen = {k: v for k, v in self._seen.items() if v and v[-1] > at - self.span}
        return True


Response = tuple[int, bytes]


class Replays:
    """The first response to each idempotency key; a second request with the key waits for it."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._done: OrderedDict[str, Response] = OrderedDict()
        self._running: dict[str, asyncio.Future[Response]] = {}

    def claim(self, key: str) -> Response | asyncio.Future[Response] | None:
        """The stored response, a future for the one in progress, or None: the caller runs it
        and must call `settle` (or `drop`, when it produced no response)."""
        if key in self._done:
            return self._done[key]
        if key in self._running:
            return self._running[key]
        self._running[key] = asyncio.get_running_loop().create_future()
        return None

    def settle(self, key: str, response: Response) -> None:
        self._done[key] = response
        self._done.move_to_end(key)
        while len(self._done) > self.size:
            self._done.popitem(last=False)
        future = self._running.pop(key, None)
        if future is not None and not future.done():
            future.set_result(response)

    def drop(self, key: str) -> None:
        """The first request ended without a response (the client went away): a replay runs anew."""
        future = self._running.pop(key, None)
        if future is not None and not future.done():
            future.cancel()
