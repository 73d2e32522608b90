"""The run directory (docs/method.md §7): manifest, append-only episodes.jsonl, scores and reports.

episodes.jsonl is appended one whole line per finished episode with a single O_APPEND write
and an fsync, so a crash can at worst leave one torn tail line, which reading ignores and
``repair`` cuts off.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from emobench.errors import InputError
from emobench.records import Episode

R = TypeVar("R", bound=BaseModel)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.manifest = path / "manifest.json"
        self.episodes = path / "episodes.jsonl"
        self.scores = path / "scores.parquet"
        self.report = path / "report.json"
        self.leaderboard = path / "leaderboard.parquet"
        self.judgements = path / "judgements.jsonl"
        self.pairwise_log = path / "pairwise.jsonl"
        self.pairwise_calls = path / "pairwise_calls.jsonl"
        self.pairwise = path / "pairwise.parquet"
        self.logs = path / "logs"

    def create(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)

    def write_json(self, path: Path, data: dict[str, Any]) -> None:
        atomic_write_bytes(path, json.dumps(data, indent=2, sort_keys=True, default=str).encode() + b"\n")

    def read_manifest(self) -> dict[str, Any]:
        try:
            data = json.loads(self.manifest.read_text())
        except FileNotFoundError:
            raise InputError(self.manifest, "", "no manifest: not a run directory") from None
        except json.JSONDecodeError as exc:
            raise InputError(self.manifest, f"line {exc.lineno}", f"corrupt JSON: {exc.msg}") from None
        if not isinstance(data, dict):
            raise InputError(self.manifest, "", "manifest is not a JSON object")
        return data

    def read_report(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.report.read_text())
        except FileNotFoundError:
            return {}
        return data

    def append_episode(self, episode: Episode) -> None:
        append_line(self.episodes, episode.model_dump_json().encode())

    def read_episodes(self) -> list[Episode]:
        return read_records(self.episodes, Episode)

    def done_keys(self) -> set[str]:
        """Keys of the finished episodes."""
        return _keys(self.episodes)

    def judged_keys(self) -> set[str]:
        """Keys of the episodes whose post-episode judgement is written."""
        return _keys(self.judgements)

    def repair(self) -> int:
        """Cut torn tail lines left by a crash; return the bytes removed."""
        return sum(repair_tail(path) for path in (self.episodes, self.judgements, self.pairwise_log, self.pairwise_calls))


def append_line(path: Path, data: bytes) -> None:
    """Append one whole line with a single O_APPEND write, then fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)


def _keys(path: Path) -> set[str]:
    keys = set()
    for number, line in _lines(path):
        try:
            keys.add(orjson.loads(line)["key"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise InputError(path, f"line {number}", "corrupt record") from None
    return keys


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    if not path.exists():
        return
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            if line.endswith(b"\n"):  # a line without its newline is a torn tail
                yield number, line


def read_records(path: Path, model: type[R]) -> list[R]:
    records = []
    for number, line in _lines(path):
        try:
            records.append(model.model_validate_json(line))
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"])
            raise InputError(path, f"line {number}: {field}", err["msg"]) from None
    return records


def repair_tail(path: Path) -> int:
    if not path.exists():
        return 0
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1
    if keep == len(data):
        return 0
    with open(path, "r+b") as fh:
        fh.truncate(keep)
    return len(data) - keep
