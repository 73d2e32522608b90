"""A content-addressed response cache on disk, safe across processes (SQLite in WAL mode).

The key covers everything that determines a completion: the endpoint's identity (its binding,
not a launched server's port), model, messages, sampling, seed and response format. A rerun
of a finished run is then answered from disk without a model call.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import threading
from pathlib import Path
from typing import Any

import orjson

from emobench.endpoints.client import ChatEndpoint, Completion, EndpointStats
from emobench.records import Sampling

_SCHEMA = "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value BLOB NOT NULL)"


def cache_key(
    identity: str, model: str, messages: list[dict[str, str]], sampling: Sampling, seed: int, response_format: Any
) -> str:
    # exclude_none: penalties left unset keep the keys responses were cached under before they existed.
    sent = sampling.model_dump(exclude_none=True)
    canonical = orjson.dumps([identity, model, messages, sent, seed, response_format], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()


class ResponseCache:
    """One SQLite file; each thread gets its own connection, writers wait on a busy timeout. The file
    is made at the first lookup, not before: a cache handed to a command that then goes without it
    (`emobench judge` on a play run) leaves nothing behind."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)  # an unusable folder fails here, before any call
        self.path = path
        self._local = threading.local()

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(_SCHEMA)
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get(self, key: str) -> Completion | None:
        row = self._conn().execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        data = orjson.loads(row[0])
        return Completion(**{**data, "cached": True, "latency_s": 0.0, "attempts": 0})

    def put(self, key: str, done: Completion) -> None:
        value = orjson.dumps({k: getattr(done, k) for k in ("text", "finish_reason", "prompt_tokens", "completion_tokens",
                                                     "cached_prompt_tokens", "cache_write_tokens", "batched")})
        self._conn().execute("INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)", (key, value))

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT count(*) FROM responses").fetchone()[0])


class CachedEndpoint:
    """Wraps an endpoint: answers from the cache when it can, stores what the model says."""

    def __init__(self, inner: ChatEndpoint, cache: ResponseCache, identity: str) -> None:
        self.inner = inner
        self.cache = cache
        self.identity = identity
        self.name = inner.name
        self.model = inner.model
        self.hits = 0

    @property
    def stats(self) -> EndpointStats:
        return self.inner.stats

    async def complete(
        self, messages: list[dict[str, str]], sampling: Sampling, seed: int, response_format: dict[str, Any] | None = None
    ) -> Completion:
        key = cache_key(self.identity, self.model, messages, sampling, seed, response_format)
        # SQLite calls are short; running them inline keeps the hot path free of thread hops.
        hit = self.cache.get(key)
        if hit is not None:
            self.hits += 1
            await asyncio.sleep(0)  # stay a cooperative await point, as a real call would be
            return hit
        done = await self.inner.complete(messages, sampling, seed, response_format)
        self.cache.put(key, done)
        return done

    async def aclose(self) -> None:
        await self.inner.aclose()
