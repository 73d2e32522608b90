"""Where the library lives: the case cards, editions, prompts, rubrics, panels and configs runs read.

In a checkout (an editable install, or PYTHONPATH) it is the repository's top level, where
these folders are edited and reviewed. A wheel carries a copy of them inside the package,
emobench/library/ (setup.py copies them at build time), and an installed emobench reads that.
This module imports nothing from emobench: setup.py reads LIBRARY_ITEMS from it at build time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

# Everything under the library root that emobench reads; setup.py ships exactly these.
LIBRARY_ITEMS: Final = ("library.yaml", "scenarios", "personas", "editions", "judges", "prompts", "configs")

_PACKAGE: Final = Path(__file__).resolve().parent
PACKAGED_LIBRARY: Final = _PACKAGE / "library"


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
