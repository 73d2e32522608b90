"""Where the library lives: the case cards, editions, prompts, rubrics, panels and configs runs read.

In a checkout (an editable install, or PYTHONPATH) it is the repository's top level, where
these folders are edited and reviewed. A wheel carries a copy of them inside the package,
emobench/library/ (setup.py copies them at build time), and an installed emobench reads that.
This module imports nothing from emobench: setup.py reads LIBRARY_ITEMS and checkout_sha from
it at build time, and writes the commit a wheel was built from into the library's BUILD_INFO.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Final

# Everything under the library root that emobench reads; setup.py ships exactly these.
LIBRARY_ITEMS: Final = ("library.yaml", "scenarios", "personas", "editions", "judges", "prompts", "configs")

_PACKAGE: Final = Path(__file__).resolve().parent
PACKAGED_LIBRARY: Final = _PACKAGE / "library"
# Written into the packaged library by setup.py: {"git_sha": the commit built from, or null}.
BUILD_INFO: Final = "build.json"


def library_root() -> Path:
    """The checkout's top level when emobench runs from one, else the copy inside the package."""
    checkout = _PACKAGE.parent
    if (checkout / "library.yaml").is_file() and (checkout / "pyproject.toml").is_file():
        return checkout
    return PACKAGED_LIBRARY


def library_file(path: Path) -> Path:
    """A path the user gave, e.g. ``--config configs/standard.yaml``: as given when it is absolute
    or exists from the current folder; otherwise the library's file at that relative path, when
    there is one. So the shipped configs and panels can be named from any folder, and a file of
    the same name in the current folder wins."""
    if path.is_absolute() or path.exists():
        return path
    shipped = library_root() / path
    return shipped if shipped.exists() else path


def checkout_sha(checkout: Path) -> str | None:
    """The commit of a git checkout; None outside one (a copy of the sources, an sdist)."""
    if not (checkout / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def git_sha(root: Path) -> str | None:
    """The commit a library root comes from: a checkout's HEAD, or for the copy inside an
    installed wheel the commit it was built from (None when built outside a git checkout).
    Only ``root/.git`` is asked, never a folder above: an installed package may lie inside some
    other repository, e.g. a project's .venv, whose commit says nothing about emobench."""
    info = root / BUILD_INFO
    if info.is_file():
        sha = json.loads(info.read_text(encoding="utf-8")).get("git_sha")
        return sha if isinstance(sha, str) and sha else None
    return checkout_sha(root)
