"""A submission folder: the run's records a verifier needs, each with its content hash in
SUBMISSION.json (with a root over them), and nothing that names a key, a token or a local path."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq

from emobench.board.hashing import file_sha256, record_hashes, record_sha256, root_hash
from emobench.errors import InputError
from emobench.rundir import RunDir

FORMAT = "emobench-submission/1"
RECORD = "SUBMISSION.json"
SUBMISSIONS = "submissions"  # where a board keeps the submissions it rests on
FILES = ("manifest.json", "episodes.jsonl", "judgements.jsonl", "scores.parquet")
# Where the run wrote them: its comparisons, the judges' calls they rest on, their table, and the
# run's own leaderboard rows (Bradley-Terry ratings among them); verify recomputes each.
OPTIONAL = ("pairwise.jsonl", "pairwise_calls.jsonl", "pairwise.parquet", "leaderboard.parquet")

# What must never travel: provider keys and tokens, and paths of the submitter's machine.
SECRET = re.compile(r"\b(sk-[A-Za-z0-9_-]{16,}|sk-ant-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}"
                    r"|AKIA[0-9A-Z]{16}|xox[abpr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{30,})|Bearer\s+[A-Za-z0-9._~+/-]{12,}")
LOCAL_PATH = re.compile(r"(?<![\w/.:-])(/home/|/Users/|/root/|/tmp/|/var/folders/|/private/|/mnt/|/work/|[A-Za-z]:\\"
                        r"|~/|file://)")


def leaks(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(field, what) for each string in a JSON value holding a key-like token or a local path."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaks(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from leaks(item, f"{path}[{i}]")
    elif isinstance(value, str):
        if SECRET.search(value):
            yield path, "a key or token"
        elif LOCAL_PATH.search(value):
            yield path, "a local path"


def file_leaks(path: Path) -> Iterator[tuple[str, str]]:
    """Leaks in one submission file, each with its line (JSON lines) or column (parquet)."""
    if path.suffix == ".parquet":
        table = pq.read_table(path)
        for key, value in (table.schema.metadata or {}).items():  # a run's leaderboard keeps its provenance there
            for field, what in leaks(value.decode(errors="replace")):
                yield f"schema metadata {key.decode(errors='replace')}{field}", what
        for name in table.column_names:
            for field, what in leaks(table.column(name).to_pylist()):
                yield f"{name}{field}", what
        return
    if path.suffix == ".jsonl":
        for number, line in enumerate(path.read_bytes().splitlines(), start=1):
            if _suspect(line):  # most lines are clean: only a suspect one is walked field by field
                for field, what in leaks(orjson.loads(line)):
                    yield f"line {number}: {field}", what
        return
    yield from leaks(orjson.loads(path.read_bytes()))


_SECRET_BYTES, _LOCAL_PATH_BYTES = re.compile(SECRET.pattern.encode()), re.compile(LOCAL_PATH.pattern.encode())


def _suspect(line: bytes) -> bool:
    """Whether a JSON line may hold a leak: a match in its raw text, or an escape that could hide one."""
    return b"\\u" in line or b"\\/" in line or bool(_SECRET_BYTES.search(line) or _LOCAL_PATH_BYTES.search(line))


def file_entries(folder: Path, names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Each file's sha256, size and its records' hashes in order."""
    return {name: {"sha256": file_sha256(folder / name), "bytes": (folder / name).stat().st_size,
                   "records": record_hashes(folder / name)} for name in names}


def seal(record: dict[str, Any], folder: Path, names: tuple[str, ...]) -> dict[str, Any]:
    """The record with its files' hashes, the root over their records and the digest of the whole."""
    record = {k: v for k, v in record.items() if k not in ("files", "root", "digest")}
    record["files"] = file_entries(folder, names)
    record["root"] = root_hash({name: entry["records"] for name, entry in record["files"].items()})
    record["digest"] = record_sha256(record)
    return record


def submit(run_dir: Path, out: Path, protocol_version: int, declaration: dict[str, str]) -> dict[str, Any]:
    """Copy a finished run's records to out and write SUBMISSION.json; refuse a run whose
    records (or the declaration) hold a key, a token or a local path, naming the file and field."""
    rd = RunDir(run_dir)
    manifest = rd.read_manifest()
    names = tuple(n for n in FILES + OPTIONAL if (rd.path / n).exists() or n in FILES)
    for name in names:
        if not (rd.path / name).exists():
            raise InputError(rd.path / name, "", "missing: submit a finished, scored run")
    # A merged run names its shards' folders: only their names travel.
    shards = manifest.get("merged_from")
    if isinstance(shards, list):
        manifest["merged_from"] = [Path(str(p)).name for p in shards]
    for name in names:
        try:
            leak = next(leaks(manifest) if name == "manifest.json" else file_leaks(rd.path / name), None)
        except (orjson.JSONDecodeError, OSError) as exc:
            raise InputError(rd.path / name, "", f"unreadable: {exc}") from None
        if leak is not None:
            raise InputError(rd.path / name, leak[0], f"holds {leak[1]}; a submission carries none (bind models by "
                                                      "hub id, keys from the environment)")
    leak = next(leaks(declaration), None)
    if leak is not None:
        raise InputError("declaration", leak[0], f"holds {leak[1]}")
    if out.exists() and any(out.iterdir()):
        raise InputError(out, "", "exists and is not empty")
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        if name == "manifest.json":
            (out / name).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
        else:
            shutil.copyfile(rd.path / name, out / name)
    config = manifest.get("config") or {}
    panel = config.get("panel") or {}
    record = seal({
        "format": FORMAT,
        "protocol_version": protocol_version,
        "run_id": manifest.get("run_id"),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "declaration": declaration,
        "provenance": {**{k: manifest.get(k) for k in ("config_hash", "registry_version", "prompt_versions", "split",
                                                       "emobench_version", "git_sha", "roles")},
                       "bindings": {"subjects": [s.get("binding") for s in config.get("subjects") or []],
                                    "user": (config.get("user") or {}).get("binding"),
                                    "judges": [j.get("binding") for j in panel.get("judges") or []]}},
    }, out, names)
    (out / RECORD).write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
    return record
