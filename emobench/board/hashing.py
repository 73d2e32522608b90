"""Content hashes of a submission's files, and the canonical JSON the submission record is hashed in."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def canonical_json(value: Any) -> bytes:
    """One byte string per value: sorted keys, no spaces, UTF-8, finite numbers only; so the
    same record hashes the same whoever wrote it and in whatever key order."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def record_sha256(value: Any) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


def record_hashes(path: Path) -> list[str]:
    """One sha256 per record, in file order: a JSON line's raw bytes, a parquet row's sorted-key
    JSON (NaN as null), a JSON file's whole bytes. So a record missing, added, duplicated or
    moved shows as a change in this list, not only as a changed file."""
    if path.suffix == ".jsonl":
        with open(path, "rb") as fh:
            return [hashlib.sha256(line.rstrip(b"\n")).hexdigest() for line in fh]
    if path.suffix == ".parquet":
        import orjson
        import pyarrow.parquet as pq

        return [hashlib.sha256(orjson.dumps(row, option=orjson.OPT_SORT_KEYS)).hexdigest()
                for row in pq.read_table(path).to_pylist()]
    return [file_sha256(path)]


def root_hash(files: dict[str, list[str]]) -> str:
    """The root over every record's hash, file by file in name order (the record is written with
    sorted keys) and record by record in each."""
    digest = hashlib.sha256()
    for name, hashes in sorted(files.items()):
        for h in hashes:
            digest.update(f"{name}:{h}\n".encode())
    return digest.hexdigest()
