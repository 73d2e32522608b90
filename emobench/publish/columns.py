"""What every published view shares: slice families, displayed columns, version labels, and the
atomic file write. Kept apart so the table, terminal, plot and page modules import only down."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2

FAMILY_TITLES = {
    "overall": "Overall",
    "mechanism_stress": "Mechanism stress test",
    "persona_resilience": "Persona resilience",
    "category": "Category",
    "language": "Language",
    "valence": "Valence of the situation",
}
FAMILIES = tuple(FAMILY_TITLES)
# Case levels on the harder side of the two two-way slice families (docs/method.md §5.7).
CHALLENGING = ("hard", "very_hard")  # mechanism stress: difficulty
DEFENSIVE = ("high",)  # persona resilience: empathy threshold

# One line for the page and the terminal: how the two EPM-Q columns differ (docs/method.md §5.8).
PROFILES_NOTE = (
    "EPM-Q is scored under each subject's run profile (emobench by default); EPM-Q (EMPA) scores the same "
    "episodes with EMPA's definitions, which let indices exceed 100 and credit Tau for a straight path "
    "in any direction."
)

# Schema metadata key of an external bundle's parquet files (leaderboard/external/NAME/): the main
# page finds the bundles beside it by this key, without importing the package that writes them.
EXTERNAL_BUNDLE_KEY = b"emobench.external_bundle"
EXTERNAL_DIR = "external"

# (column, header, scale, digits) for the terminal and the page; scale 100 shows a percentage.
DISPLAY_COLUMNS = (
    ("epmq", "EPM-Q", 1.0, 1),
    ("epmq_empa", "EPM-Q (EMPA)", 1.0, 1),
    ("success_rate", "Success %", 100.0, 1),
    ("final_meter", "Meter", 1.0, 1),
    ("empathy", "Empathy", 1.0, 2),
    ("humanlikeness", "Humanlike", 1.0, 2),
    ("persona_adaptation", "Persona adapt.", 1.0, 2),
    ("coherence", "Coherence", 1.0, 2),
    ("bt_rating", "BT rating", 1.0, 0),
)


def short_version(value: Any) -> str:
    """Content hashes abbreviated to 12 characters; lists (a forced merge) joined."""
    values = value if isinstance(value, list) else [value]
    return ", ".join(v[:12] if isinstance(v, str) and len(v) > 16 else str(v) for v in values)


def atomic_write(target: Path, write: Callable[[Path], Any]) -> None:
    # A sibling temp file then a rename: readers never see half a file. Created by the writer,
    # not mkstemp, so it gets the usual umask permissions of a published file.
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def page_environment(package: str = "emobench.publish") -> jinja2.Environment:
    """A jinja2 environment for a package's page templates: autoescaped, strict. Each page adds its filters."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


# A longer subject label folds onto more lines in a terminal table rather than push out a key column.
SUBJECT_MIN = 20


def columns_to_drop(widths: dict[str, int], drop_order: tuple[str, ...], width: int) -> list[str]:
    """The columns a terminal table of ``width`` leaves out, least important first (the order of
    ``drop_order``, which holds no key column), until the others fit."""
    total = sum(widths.values())
    dropped = []
    for name in drop_order:
        if total <= width:
            break
        if name in widths:
            total -= widths[name]
            dropped.append(name)
    return dropped


def not_shown(headers: list[str], width: int) -> str:
    """The one line a terminal table prints under itself when it left columns out."""
    return f"not shown at {width} columns: {', '.join(headers)} (COLUMNS=200 shows them)"
