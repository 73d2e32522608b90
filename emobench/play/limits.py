"""Request limits and idempotent replays of `emobench play`, kept in memory.

`Window` counts requests per key over the last minute; `Replays` remembers the first successful
response to each `Idempotency-Key`, so that a double-sent message, a retried request or a second
tab plays nothing twice. Replays of requests whose first try was lost with a killed server are
recognised from the episode journals instead (emobench.play.session). `Addresses` counts the
handles and unfinished episodes of each client address and network (`party`). `FairShare` shares a
budget max-min fairly among the parties asking. None of it is written: a client's
address is nobody's business once the server stops.
(The limits' values are `play:` settings, emobench.config.PlayConfig; connections are counted
in emobench.play.doors.)
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from emobench.play.store import PlayError, PlayStore

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


class FairShare:
    """About `limit` events in any `span` seconds, shared max-min fairly among the parties asking.

    While fewer than `limit` events are in the window anyone is admitted; from then on only a party
    with fewer than its fair share (`limit` / the parties with an event in the window) is, so a party
    over its share is refused before one under it, and a party's first `floor` events in a span never
    are (a newcomer gets in however many others ask). So the window holds at most about 2 x `limit`
    events plus `floor` per party.
    """

    def __init__(self, limit: int, span: float = 60.0, clock: Clock = time.monotonic, floor: int = 1) -> None:
        self.limit, self.span, self.clock, self.floor = limit, span, clock, floor
        self._events: deque[tuple[float, str]] = deque()
        self._counts: dict[str, int] = {}

    def allow(self, party: str) -> bool:
        """Count one event for party; False (and not counted) when the budget refuses it."""
        at = self.clock()
        while self._events and self._events[0][0] <= at - self.span:
            _, old = self._events.popleft()
            self._counts[old] -= 1
            if not self._counts[old]:
                del self._counts[old]
        used, mine = len(self._events), self._counts.get(party, 0)
        parties = len(self._counts) + (mine == 0)
        if used >= self.limit and mine >= self.floor and mine * parties >= self.limit:
            return False
        self._events.append((at, party))
        self._counts[party] = mine + 1
        return True


class ModelBudget(FairShare):
    """play.server_per_minute: the starts, turns and leaves that reach a model, shared fairly among players.
    Charged only for a start the quota admits and a turn or leave of an open episode, so its parties are
    players with room to play, however many handles ask (reads and refused requests never draw on it)."""

    def spend(self, player: str) -> None:
        if not self.allow(player):
            raise PlayError(f"the server is busy: at most {self.limit} starts, turns and leaves a minute, "
                            "shared fairly among players (play.server_per_minute, --server-per-minute); "
                            "try again in a minute", status=429)


def party(address: str) -> str:
    """The network a client address belongs to (/24 of IPv4, /64 of IPv6): one machine, or one site,
    can hold many addresses of it, so what is shared fairly is shared per network."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ipaddress.ip_network(f"{ip}/{24 if ip.version == 4 else 64}", strict=False))


Response = tuple[int, bytes]
Tags = tuple[str, str | None]  # the player's token and the episode a response belongs to


class Replays:
    """The first response to each idempotency key; a second request with the key waits for it."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._done: OrderedDict[str, tuple[Response, Tags]] = OrderedDict()
        self._running: dict[str, asyncio.Future[Response]] = {}

    def claim(self, key: str) -> Response | asyncio.Future[Response] | None:
        """The stored response, a future for the one in progress, or None: the caller runs it
        and must call `settle` (or `drop`, when it produced no response)."""
        if key in self._done:
            return self._done[key][0]
        if key in self._running:
            return self._running[key]
        self._running[key] = asyncio.get_running_loop().create_future()
        return None

    def settle(self, key: str, response: Response, tags: Tags = ("", None)) -> None:
        self._done[key] = (response, tags)
        self._done.move_to_end(key)
        while len(self._done) > self.size:
            self._done.popitem(last=False)
        future = self._running.pop(key, None)
        if future is not None and not future.done():
            future.set_result(response)

    def drop(self, key: str) -> None:
        """The first request ended without a response to keep (the client went away, or an error):
        a replay, and every request waiting for this one, runs anew."""
        future = self._running.pop(key, None)
        if future is not None and not future.done():
            future.cancel()

    def purge(self, episode: str, token: str | None = None) -> int:
        """Forget every response of the episode, and every response of the player when token is given."""
        gone = [key for key, (_, (owner, of)) in self._done.items() if of == episode or (token is not None and owner == token)]
        for key in gone:
            del self._done[key]
        return len(gone)


class Addresses:
    """The handles joined and the episodes started from each client address and network, while the server runs."""

    def __init__(self) -> None:
        self._players: dict[str, set[str]] = {}  # address -> token hashes
        self._episodes: dict[str, set[str]] = {}  # address, and party(address) -> episode ids
        self._networks: dict[str, str] = {}  # episode id -> party(address) it was started from

    def joined(self, address: str, token_sha256: str) -> None:
        self._players.setdefault(address, set()).add(token_sha256)

    def started(self, address: str, episode_id: str) -> None:
        self._episodes.setdefault(address, set()).add(episode_id)
        self._episodes.setdefault(party(address), set()).add(episode_id)
        self._networks[episode_id] = party(address)

    def holders(self, unfinished: list[str]) -> dict[str, list[str]]:
        """The unfinished episodes per network; those started before this server's start (addresses are
        not kept) under "", as one party."""
        self._networks = {e: n for e, n in self._networks.items() if e in set(unfinished)}
        held: dict[str, list[str]] = {}
        for episode_id in unfinished:
            held.setdefault(self._networks.get(episode_id, ""), []).append(episode_id)
        return held

    def handles(self, address: str, alive: Callable[[str], bool]) -> int:
        """Handles of this address that still exist (a player whose last episode was deleted is gone)."""
        held = {h for h in self._players.get(address, set()) if alive(h)}
        self._players[address] = held
        return len(held)

    def open(self, address: str, unfinished: Callable[[str], bool]) -> int:
        held = {e for e in self._episodes.get(address, set()) if unfinished(e)}
        self._episodes[address] = held
        return len(held)


@dataclass(frozen=True)
class Quota:
    """Unfinished episodes and handles: per player, per client address, on the server (play.* settings).
    The last tenth of open_total is a reserve for networks holding no unfinished episode, so a
    newcomer can start while others fill the rest; idle_expire_s frees what nobody plays."""

    open_per_player: int
    open_total: int
    handles_per_address: int = 5
    open_per_address: int = 10
    idle_expire_s: float = 900.0
    evict_idle_s: float = 120.0

    @property
    def reserve(self) -> int:
        return self.open_total // 10

    def victims(self, addresses: Addresses, store: PlayStore, address: str) -> list[str]:
        """When the server is full for a start from `address`: the episodes idle at least evict_idle_s of
        the network holding the most unfinished episodes, longest idle first, if it holds more than this
        one's (by two or more); ending one makes room. So open episodes are shared max-min fairly among networks."""
        held = addresses.holders([e for e in store.heads if store.unfinished(e) and e not in store.deleted])
        mine = len(held.get(party(address), []))
        most = max(held, key=lambda network: len(held[network]), default=None)
        if most is None or len(held[most]) <= mine + 1:
            return []
        idle = {e: time.time() - store.journal_path(e).stat().st_mtime for e in held[most]
                if store.journal_path(e).exists()}
        return sorted((e for e in idle if idle[e] >= self.evict_idle_s), key=idle.__getitem__, reverse=True)

    def admit_join(self, addresses: Addresses, store: PlayStore, address: str) -> None:
        if addresses.handles(address, store.has_player) >= self.handles_per_address:
            raise PlayError(f"this address holds {self.handles_per_address} handles, its limit "
                            "(play.handles_per_address, --handles-per-address); play with one of them", status=429)

    def admit_start(self, addresses: Addresses, store: PlayStore, token_sha256: str, address: str) -> None:
        if store.open_episodes(token_sha256) >= self.open_per_player:
            raise PlayError(f"you have {self.open_per_player} unfinished episodes: finish, leave or delete one "
                            "first (play.open_per_player, --open-per-player)", status=429)
        if addresses.open(address, store.unfinished) >= self.open_per_address:
            raise PlayError(f"this address holds {self.open_per_address} unfinished episodes, its limit "
                            "(play.open_per_address, --open-per-address); finish, leave or delete one first", status=429)
        held = store.open_episodes()
        if held >= self.open_total:
            raise ServerFull(f"the server holds {self.open_total} unfinished episodes, its limit "
                             "(play.open_total, --open-total); try again later", status=429)
        if held >= self.open_total - self.reserve and addresses.open(party(address), store.unfinished):
            raise ServerFull(f"the server's last {self.reserve} unfinished episodes are kept for networks holding none "
                             "(play.open_total, --open-total); finish, leave or delete one first", status=429)


class ServerFull(PlayError):
    """A start refused because the server holds all the unfinished episodes it may (not this party's own limit)."""
