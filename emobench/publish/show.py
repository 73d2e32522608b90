"""The leaderboard as a rich table in the terminal (`emobench leaderboard show`, end of a run)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from emobench.errors import InputError
from emobench.publish.columns import DISPLAY_COLUMNS, FAMILY_TITLES, short_version
from emobench.publish.provenance import read_metadata


@dataclass
class _Col:
    header: str
    cells: list[Text]
    numeric: bool = True
    dim: bool = False

    @property
    def width(self) -> int:
        return max(len(self.header), *(len(c) for c in self.cells)) + 3  # padding and rule


def _value(row: dict[str, Any], col: str, scale: float, digits: int, with_ci: bool) -> Text:
    mid = row[col]
    if mid is None:
        return Text("–")
    text = Text(f"{mid * scale:.{digits}f}")
    lo, hi = row[f"{col}_lo"], row[f"{col}_hi"]
    if with_ci and lo is not None and hi is not None:
        # CIs dim, so the point estimates stand out.
        text.append(f" [{lo * scale:.{digits}f}, {hi * scale:.{digits}f}]", style="dim")
    return text


def _columns(rows: list[dict[str, Any]], family: str, width: int) -> list[_Col]:
    """Columns that fit the console: on a narrow one, drop the least important first."""
    rank_in_slice: Counter[str] = Counter()
    ranks = []
    for r in rows:
        rank_in_slice[r["slice"]] += 1
        ranks.append(str(rank_in_slice[r["slice"]]))
    has_bt = any(r["bt_rating"] is not None for r in rows)
    short = {"empathy": "Emp.", "humanlikeness": "Human.", "persona_adaptation": "Persona",
             "coherence": "Coher.", "bt_rating": "BT", "final_meter": "Meter"}

    def metric(name: str, with_ci: bool) -> _Col:
        _, header, scale, digits = next(c for c in DISPLAY_COLUMNS if c[0] == name)
        return _Col(short.get(name, header), [_value(r, name, scale, digits, with_ci)
                                              for r in rows])

    cols: dict[str, _Col] = {
        "#": _Col("#", [Text(r) for r in ranks], dim=True),
        "subject": _Col("Subject", [Text(r["subject"] + (" (external)" if r["external"] else "")) for r in rows],
                        numeric=False),
    }
    if family != "overall":
        cols["slice"] = _Col("Slice", [Text(r["slice"]) for r in rows], numeric=False)
    cols["epmq"] = metric("epmq", True)
    cols["epmq_empa"] = metric("epmq_empa", False)
    cols["success_rate"] = metric("success_rate", True)
    for name in ("final_meter", "empathy", "humanlikeness", "persona_adaptation", "coherence"):
        cols[name] = metric(name, False)
    if has_bt:
        cols["bt_rating"] = metric("bt_rating", True)
    cols["n_cases"] = _Col("Cases", [Text(str(r["n_cases"])) for r in rows])
    cols["n_episodes"] = _Col("Eps.", [Text(str(r["n_episodes"])) for r in rows])

    drop_order = ["coherence", "persona_adaptation", "humanlikeness", "empathy", "n_episodes", "epmq_empa",
                  "final_meter", "#", "bt_rating"]
    while sum(c.width for c in cols.values()) > width and drop_order:
        cols.pop(drop_order.pop(0), None)
    for name in ("success_rate", "epmq"):  # last resort: point estimates only
        if sum(c.width for c in cols.values()) > width:
            cols[name] = metric(name, False)
    return list(cols.values())


def render_table(table: pa.Table, console: Console, slice_family: str = "overall") -> None:
    """Print one slice family of the leaderboard, with 95% CIs in brackets."""
    if slice_family not in FAMILY_TITLES:
        raise InputError("leaderboard", "slice_family",
                         f"unknown {slice_family!r}; expected one of {tuple(FAMILY_TITLES)}")
    rows = table.filter(pc.equal(table.column("slice_family"), slice_family)).to_pylist()
    meta = read_metadata(table.schema)
    boot = meta.get("bootstrap", {})
    caption = (
        f"95% CI in brackets: bootstrap by case ({boot.get('n', '?')} resamples, seed "
        f"{boot.get('seed', '?')}); Wilson for success. Registry {short_version(meta.get('registry_version'))}."
    )
    if meta.get("forced"):
        caption += " [bold red]Forced merge: runs not strictly comparable.[/]"
    out = Table(title=f"emobench leaderboard: {FAMILY_TITLES[slice_family]}", caption=caption,
                caption_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    cols = _columns(rows, slice_family, console.width)
    for col in cols:
        out.add_column(col.header, justify="right" if col.numeric else "left", no_wrap=True,
                       style="dim" if col.dim else None)
    sizes = Counter(r["slice"] for r in rows)
    seen: Counter[str] = Counter()
    for i, row in enumerate(rows):
        seen[row["slice"]] += 1
        last_of_slice = slice_family != "overall" and seen[row["slice"]] == sizes[row["slice"]]
        out.add_row(*(c.cells[i] for c in cols), end_section=last_of_slice)
    console.print(out)
