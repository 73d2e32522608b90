"""Training never reads the held-out test split: a training config names its split (a run
config's default is test, which a training config may not fall back on), never a test split
nor a test case, and no environment resets on a test case. Each refusal is one InputError.

The library's own check (emobench/registry/checks/training_pages.py) holds the shipped configs and
the training pages of docs/ to the same rule before anything runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emobench.errors import InputError
from emobench.registry.checks.training_pages import TEST, is_test_split

_ADVICE = "train on dev or demo; the test split is held out for `emobench run`"


def refuse_test_config(data: dict[str, Any], source: str | Path) -> None:
    """A training config's split: named, and not a test split."""
    if "split" not in data and not data.get("cases") and not data.get("local_split"):
        raise InputError(source, "split", f"missing: a run config's default split is {TEST}; {_ADVICE}")
    split = data.get("split")
    if isinstance(split, str) and is_test_split(split):
        raise InputError(source, "split", f"{split!r} is a held-out test split: {_ADVICE}")


def refuse_test_case(case_id: str, split: str) -> None:
    """A case an environment is about to play: never one of a test split."""
    if is_test_split(split):
        raise InputError(case_id, "split", f"case {case_id} is in the held-out split {split!r}: {_ADVICE}")
