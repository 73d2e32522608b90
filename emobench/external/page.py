"""An external bundle's index.html (self-contained, like the leaderboard's page) and its NOTICE.

Both come from templates in emobench/external/templates and from the bundle's tables and
metadata alone; the plots and page helpers are the leaderboard's (emobench.publish).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from markupsafe import Markup

from emobench.publish import plots
from emobench.publish.columns import atomic_write, page_environment

FAMILY_TITLES = {"dominant_axis": "Dominant axis", "difficulty": "Difficulty", "category": "Category"}
_env = page_environment("emobench.external")


def _fmt(x: Any, digits: int = 2, scale: float = 1.0) -> str:
    return "–" if x is None else f"{float(x) * scale:.{digits}f}"


def _p(x: Any) -> str:
    """p-values: small ones in scientific notation, so 1e-12 does not read as 0."""
    if x is None:
        return "–"
    return f"{x:.1e}" if x < 1e-3 else f"{x:.3f}"


_env.filters["fmt"] = _fmt
_env.filters["p"] = _p


def render_page(board: pa.Table, pairs: pa.Table, meta: dict[str, Any]) -> str:
    rows = board.to_pylist()
    overall = [r for r in rows if r["slice_family"] == "overall"]
    colors = plots.subject_colors([r["subject"] for r in overall])
    # The leaderboard's CI plot draws `epmq`; here the headline is EMPA's EPM-Q.
    plotted = [{**r, "epmq": r["epmq_empa"], "epmq_lo": r["epmq_empa_lo"], "epmq_hi": r["epmq_empa_hi"]} for r in overall]
    slices = [
        {"name": family, "title": title, "rows": sorted((r for r in rows if r["slice_family"] == family),
                                                        key=lambda r: (r["subject"], r["slice"]))}
        for family, title in FAMILY_TITLES.items()
    ]
    return _env.get_template("empa.html.j2").render(
        meta=meta,
        overall=overall,
        colors=colors,
        ci_plot=Markup(plots.ci_bars(plotted, colors)) if overall else None,
        slices=slices,
        pairs=sorted(pairs.to_pylist(), key=lambda r: (r["metric"] != "epmq_empa", r["p"])),
        summary=meta["pairs"],
        top_empa=max((r["epmq_empa"] for r in overall), default=0.0),
    )


def write_page(board: pa.Table, pairs: pa.Table, meta: dict[str, Any], out_dir: Path) -> None:
    page = render_page(board, pairs, meta)
    atomic_write(Path(out_dir) / "index.html", lambda p: p.write_text(page, encoding="utf-8"))


def write_notice(meta: dict[str, Any], out_dir: Path) -> None:
    text = _env.get_template("NOTICE.j2").render(meta=meta) + "\n"
    atomic_write(Path(out_dir) / "NOTICE", lambda p: p.write_text(text, encoding="utf-8"))
