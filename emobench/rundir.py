"""The run directory (DESIGN 7): manifest, append-only episodes.jsonl, scores and reports.

episodes.jsonl is appended one whole line per finished episode with a single O_APPEND write
and an fsync, so a crash can at worst leave one torn tail line, which reading ignores and
``repair`` cuts off.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from emobench.errors import InputError
from emobench.records import Episode


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
        line = episode.model_dump_json().encode() + b"\n"
        fd = os.open(self.episodes, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _lines(self) -> Iterator[tuple[int, bytes]]:
        if not self.episodes.exists():
            return
        with open(self.episodes, "rb") as fh:
            for number, line in enumerate(fh, start=1):
                if line.endswith(b"\n"):  # a line without its newline is a torn tail
                    yield number, line

    def read_episodes(self) -> list[Episode]:
        episodes = []
        for number, line in self._lines():
            try:
                episodes.append(Episode.model_validate_json(line))
            except ValidationError as exc:
                err = exc.errors()[0]
                field = ".".join(str(p) for p in err["loc"])
                raise InputError(self.episodes, f"line {number}: {field}", err["msg"]) from None
        return episodes

    def done_keys(self) -> set[str]:
        keys = set()
        for number, line in self._lines():
            try:
                keys.add(orjson.loads(line)["key"])
            except (orjson.JSONDecodeError, KeyError, TypeError):
                raise InputError(self.episodes, f"line {number}", "corrupt episode record") from None
        return keys

    def repair(self) -> int:
        """Cut a torn tail line left by a crash; return the bytes removed."""
        if not self.episodes.exists():
            return 0
        data = self.episodes.read_bytes()
        keep = data.rfind(b"\n") + 1
        if keep == len(data):
            return 0
        with open(self.episodes, "r+b") as fh:
            fh.truncate(keep)
        return len(data) - keep
