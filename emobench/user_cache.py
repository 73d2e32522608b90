"""The user's emobench cache folder: converted models, response caches, card embeddings, test
durations. A leaf module, so every stage can name the folder without importing another stage."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """EMOBENCH_CACHE, else XDG's cache folder (or ~/.cache) / emobench."""
    if os.environ.get("EMOBENCH_CACHE"):
        return Path(os.environ["EMOBENCH_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "emobench"
