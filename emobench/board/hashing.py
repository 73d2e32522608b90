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
