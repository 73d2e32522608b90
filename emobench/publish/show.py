"""The leaderboard as a rich table in the terminal (`emobench leaderboard show`, end of a run)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from emobench.errors import InputError
from emobench.publish.columns import (
    DISPLAY_COLUMNS,
    FAMILY_TITLES,
    SUBJECT_MIN,
    columns_to_drop,
    not_shown,
    short_version,
)
from emobench.publish.provenance import read_metadata


@dataclass
class _Col:
    header: str
    cells: list[Text]
    numeric: bool = True
    dim: bool = False

    @property
    def width(self) -> int:
        natural = max(len(self.header), *(len(c) for c in self.cells))
        return (natural if self.numeric else min(natural, SUBJECT_MIN)) + 3  # padding and rule; a label folds


def _value(row: dict[str, Any], col: str, scale: float, digits: int, with_ci: bool) -> Text:
    mid = row.get(col)
    if mid is None:
        return Text("–")
    text = Text(f"{mid * scale:.{digits}f}")
    lo, hi = row.get(f"{col}_lo"), row.get(f"{col}_hi")
    if with_ci and lo is not None and hi is not None:
        # CIs dim, so the point estimates stand out.
        text.append(f" [{lo * scale:.{digits}f}, {hi * scale:.{digits}f}]", style="dim")
    return text


def _sequence_cell(cs: dict[str, Any] | None) -> Text:
    if not cs:
        return Text("–")
    return Text(f"[{cs['lower']:.1f}, {cs['upper']:.1f}] {cs['n']}/{cs['population']}")


SHORT = {"empathy": "Emp.", "humanlikeness": "Human.", "persona_adaptation": "Persona",
         "coherence": "Coher.", "bt_rating": "BT", "final_meter": "Meter"}
# Least important first. The key columns (subject, EPM-Q with its CI, success) are never dropped;
# success's CI goes last, before anything of EPM-Q.
DROP_ORDER = ("coherence", "persona_adaptation", "humanlikeness", "empathy", "n_episodes", "epmq_empa",
              "final_meter", "#", "bt_rating_ci", "bt_rating", "n_cases", "success_rate_ci")


def _columns(rows: list[dict[str, Any]], names: list[str], family: str, width: int,
             sequences: dict[str, Any] | None = None) -> tuple[list[_Col], list[str]]:
    """Columns that fit the console, and the headers of those left out. A bundle without a
    column (an external one has no judges' rubrics and no BT) shows none for it."""
    rank_in_slice: Counter[str] = Counter()
    ranks = []
    for r in rows:
        rank_in_slice[r["slice"]] += 1
        ranks.append(str(rank_in_slice[r["slice"]]))

    def metric(name: str, with_ci: bool) -> _Col:
        _, header, scale, digits = next(c for c in DISPLAY_COLUMNS if c[0] == name)
        return _Col(SHORT.get(name, header), [_value(r, name, scale, digits, with_ci) for r in rows])

    cols: dict[str, _Col] = {
        "#": _Col("#", [Text(r) for r in ranks], dim=True),
        "subject": _Col("Subject", [Text(r["subject"] + (" (external)" if r["external"] else "")) for r in rows],
                        numeric=False),
    }
    if family != "overall":
        cols["slice"] = _Col("Slice", [Text(r["slice"]) for r in rows], numeric=False)
    for name in ("epmq", "epmq_empa", "success_rate", "final_meter", "empathy", "humanlikeness",
                 "persona_adaptation", "coherence", "bt_rating"):
        if name in names and (name != "bt_rating" or any(r.get(name) is not None for r in rows)):
            cols[name] = metric(name, name in ("epmq", "success_rate", "bt_rating"))
        if name == "epmq" and sequences:  # a run stopped early: the interval valid for it, never dropped
            cols["epmq_cs"] = _Col("EPM-Q CS", [_sequence_cell(sequences.get(r["subject"])) for r in rows])
    for name, header in (("n_cases", "Cases"), ("n_episodes", "Eps.")):
        if name in names:
            cols[name] = _Col(header, [Text(str(r[name])) for r in rows])
    # Dropping a CI narrows its column to the point estimate's width.
    widths = {name: col.width for name, col in cols.items()}
    for name in ("bt_rating", "success_rate"):
        if name in cols:
            point = metric(name, False).width
            widths[name], widths[f"{name}_ci"] = point, cols[name].width - point
    dropped = columns_to_drop(widths, DROP_ORDER, width)
    headers = []
    for name in dropped:
        if name.endswith("_ci"):
            cols[name[:-3]] = metric(name[:-3], False)
            if name[:-3] not in dropped:
                headers.append(f"{cols[name[:-3]].header} CI")
        elif name in cols:
            headers.append(cols.pop(name).header)
    return list(cols.values()), headers


def render_table(table: pa.Table, console: Console, slice_family: str = "overall") -> None:
    """Print one slice family of the leaderboard, with 95% CIs in brackets, and a line naming
    the columns a narrow console (or a pipe: 80 columns) left out."""
    rows = table.filter(pc.equal(table.column("slice_family"), slice_family)).to_pylist()
    if not rows:  # a family this leaderboard lacks (an EMPA bundle has its own), or none at all
        families = ", ".join(dict.fromkeys(table.column("slice_family").to_pylist())) or "none"
        raise InputError("--family", "", f"{slice_family!r} is not one of the families this leaderboard has: {families}")
    meta = read_metadata(table.schema)
    boot = meta.get("bootstrap")
    caption = "95% CI in brackets"
    caption += (f": bootstrap by case ({boot.get('n', '?')} resamples, seed {boot.get('seed', '?')}); Wilson for "
                "success." if isinstance(boot, dict) else ".")
    if meta.get("registry_version"):
        caption += f" Registry {short_version(meta['registry_version'])}."
    if meta.get("forced"):
        caption += " [bold red]Forced merge: runs not strictly comparable.[/]"
    languages = sorted({str(v) for v in (meta.get("languages") or {}).values()})
    if len(languages) > 1:
        caption += f" Languages pooled: {', '.join(languages)} (family 'language' keeps them apart)."
    if meta.get("trackers") not in (None, "run"):
        caption += f" {escape(str(meta['trackers']))}."
    title = FAMILY_TITLES.get(slice_family, slice_family.replace("_", " ").capitalize())  # an EMPA bundle's own
    sequences = meta.get("sequential") or {}
    if sequences:
        caption += (" [bold]Stopped early[/] (run --stop-when): EPM-Q CS, the confidence sequence after the cases "
                    "played (n/N), is the interval valid for it; the bootstrap CI assumes every case was to be played, "
                    "and is not.")
    out = Table(title=f"emobench leaderboard: {title}", caption=caption,
                caption_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    cols, dropped = _columns(rows, table.column_names, slice_family, console.width, sequences)
    for col in cols:
        out.add_column(col.header, justify="right" if col.numeric else "left", no_wrap=col.numeric,
                       overflow="fold", style="dim" if col.dim else None)
    sizes = Counter(r["slice"] for r in rows)
    seen: Counter[str] = Counter()
    for i, row in enumerate(rows):
        seen[row["slice"]] += 1
        last_of_slice = slice_family != "overall" and seen[row["slice"]] == sizes[row["slice"]]
        out.add_row(*(c.cells[i] for c in cols), end_section=last_of_slice)
    console.print(out)
    if dropped:
        console.print(not_shown(dropped, console.width), soft_wrap=True)
