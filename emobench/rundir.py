"""The run directory (docs/method.md §7): manifest, append-only episodes.jsonl, scores and reports.

episodes.jsonl is appended one whole line per finished episode with a single O_APPEND write
and an fsync, so a crash can at worst leave one torn tail line, which reading ignores and
``repair`` cuts off.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from emobench.errors import InputError
from emobench.records import Episode

R = TypeVar("R", bound=BaseModel)
LATEST = "latest"  # the link to the newest run started in a folder of runs


def atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        # Held until the file is closed or its writer dies: how a reader tells a rewrite in progress from one a
        # kill left behind (a PID in the name is no proof, PIDs are reused; emobench.play.recovery).
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
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
        self.faults = path / "faults.jsonl"
        self.ratings = path / "ratings.jsonl"  # people's ratings of episodes (emobench play; emobench anchor reads them)
        self.logs = path / "logs"

    def create(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)

    def mark_latest(self) -> None:
        """Point the link ``latest`` beside this run at it (``runs/latest``), so that the next
        command can name the run without its timestamp. A file or folder the user called
        ``latest`` is left alone; so is a filesystem without symbolic links."""
        link = self.path.parent / LATEST
        if self.path.name == LATEST or (link.exists() and not link.is_symlink()):
            return
        tmp = link.with_name(f".{LATEST}.tmp-{os.getpid()}")
        try:
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(self.path.name, target_is_directory=True)
            os.replace(tmp, link)  # atomic: a reader sees the old run or the new one
        except OSError:
            tmp.unlink(missing_ok=True)

    def write_json(self, path: Path, data: dict[str, Any]) -> None:
        atomic_write_bytes(path, json.dumps(data, indent=2, sort_keys=True, default=str).encode() + b"\n")

    def read_manifest(self) -> dict[str, Any]:
        try:
            return _json_object(self.manifest)
        except FileNotFoundError:
            raise InputError(self.manifest, "", "no manifest: not a run directory") from None

    def read_config(self) -> dict[str, Any]:
        """The run config the manifest records."""
        config = self.read_manifest().get("config")
        if not isinstance(config, dict):
            raise InputError(self.manifest, "config", "missing or not a JSON object")
        return config

    def read_report(self) -> dict[str, Any]:
        try:
            return _json_object(self.report)
        except FileNotFoundError:
            return {}

    def append_episode(self, episode: Episode) -> None:
        append_line(self.episodes, episode.model_dump_json().encode())

    def read_episodes(self) -> list[Episode]:
        return read_records(self.episodes, Episode)

    def iter_episodes(self) -> Iterator[Episode]:
        return iter_records(self.episodes, Episode)

    def done_keys(self) -> set[str]:
        """Keys of the finished episodes."""
        return _keys(self.episodes)

    def judged_keys(self) -> set[str]:
        """Keys of the episodes whose post-episode judgement is written."""
        return _keys(self.judgements)

    def log_fault(self, endpoint: str, kind: str) -> None:
        """One line per fault as it happens, so that a killed process's faults still count.
        No fsync: the line survives the process in the page cache, and faults are frequent."""
        fd = os.open(self.faults, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, orjson.dumps({"endpoint": endpoint, "kind": kind}) + b"\n")
        finally:
            os.close(fd)

    def fault_counts(self) -> dict[str, int]:
        """Faults per kind over every process that worked on this run."""
        counts: Counter[str] = Counter()
        for number, line in whole_lines(self.faults):
            try:
                counts[str(orjson.loads(line)["kind"])] += 1
            except (orjson.JSONDecodeError, KeyError, TypeError):
                raise InputError(self.faults, f"line {number}", "corrupt record") from None
        return dict(counts)

    def repair(self) -> int:
        """Cut torn tail lines left by a crash; return the bytes removed."""
        logs = (self.episodes, self.judgements, self.pairwise_log, self.pairwise_calls, self.faults)
        return sum(repair_tail(path) for path in logs)


def _json_object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except json.JSONDecodeError as exc:
        raise InputError(path, f"line {exc.lineno}", f"corrupt JSON: {exc.msg}") from None
    except (UnicodeDecodeError, RecursionError):
        raise InputError(path, "", "corrupt JSON: not UTF-8 text or nested too deep") from None
    if not isinstance(data, dict):
        raise InputError(path, "", "not a JSON object")
    return data


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
    for number, line in whole_lines(path):
        try:
            keys.add(orjson.loads(line)["key"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise InputError(path, f"line {number}", "corrupt record") from None
    return keys


def whole_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    if not path.exists():
        return
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            if line.endswith(b"\n"):  # a line without its newline is a torn tail
                yield number, line


def read_records(path: Path, model: type[R]) -> list[R]:
    return list(iter_records(path, model))


def iter_records(path: Path, model: type[R]) -> Iterator[R]:
    """The records one at a time: a run's episodes take tens of KB each in memory, and a process
    that held them all (a resume checking 5,000 of them) kept that memory to its end."""
    for number, line in whole_lines(path):
        try:
            yield model.model_validate_json(line)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"])
            raise InputError(path, f"line {number}: {field}" if field else f"line {number}", err["msg"]) from None


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
