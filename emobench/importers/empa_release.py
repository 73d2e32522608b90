"""Which EMPA release a copy of EMPA's files is: its git commit, else the known release whose
files it equals (git blob ids kept in empa_releases.yaml), so an import records where its cards
come from even from a copy without .git (a download, an unpacked archive)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

RELEASES = files("emobench.importers").joinpath("empa_releases.yaml")


@dataclass(frozen=True)
class Release:
    commit: str  # the full commit
    official_cases: int
    blobs: dict[str, str]  # path in the release -> git blob id


@cache
def known_releases() -> tuple[Release, ...]:
    data: dict[str, Any] = yaml.safe_load(RELEASES.read_text(encoding="utf-8"))
    return tuple(Release(**r) for r in data["releases"])


def blob_id(path: Path) -> str:
    """Git's id of a file's content: the same for a checkout, an archive or a copy."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def identify(checkout: Path, read: list[Path]) -> Release | None:
    """The known release every file read (paths relative to the checkout) is part of, unchanged."""
    for release in known_releases():
        if all(str(p) in release.blobs and blob_id(checkout / p) == release.blobs[str(p)] for p in read):
            return release
    return None


def release_of(commit: str | None) -> Release | None:
    """The known release a (possibly short) commit names."""
    return next((r for r in known_releases() if commit and len(commit) >= 7 and r.commit.startswith(commit)), None)
