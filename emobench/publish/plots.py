"""Leaderboard plots as inline SVG strings: CI bars, radars, EPM trajectories.

Figures are built with matplotlib's Figure API, not pyplot: no GUI backend to pick and no
global figure registry to leak from.
"""

from __future__ import annotations

import io
import math
import re
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib import font_manager
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from emobench.publish.columns import FAMILY_TITLES

# Chinese labels (a Chinese run's subjects, slices) measured and named with a CJK font where one
# is installed; the page's browser draws SVG text with its own fallback either way.
_CJK = [name for name in ("Noto Sans CJK SC", "Source Han Sans SC")
        if name in {font.name for font in font_manager.fontManager.ttflist}]

_STYLE: dict[Any, Any] = {
    "svg.fonttype": "none",  # keep text as text: smaller, selectable, crisp
    "font.family": ["DejaVu Sans", *_CJK],
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def subject_colors(subjects: list[str]) -> dict[str, str]:
    """A stable colour per subject, shared by every plot on the page."""
    cmap = mpl.colormaps["tab10" if len(subjects) <= 10 else "tab20"]
    return {s: mpl.colors.to_hex(cmap(i % cmap.N)) for i, s in enumerate(subjects)}


def _svg(fig: Figure, name: str) -> str:
    """Serialise without the XML prolog; a per-figure hash salt keeps ids unique on the page."""
    buf = io.StringIO()
    style: dict[Any, Any] = {**_STYLE, "svg.hashsalt": name}
    with mpl.rc_context(style):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return re.sub(r"^.*?(?=<svg)", "", text, count=1, flags=re.S)


def ci_bars(rows: list[dict[str, Any]], colors: dict[str, str]) -> str:
    """EPM-Q and success rate per subject (overall slice), each with its 95% CI."""
    rows = sorted(rows, key=lambda r: (r["epmq"] is None, -(r["epmq"] or 0.0)))
    names = [r["subject"] for r in rows]
    with mpl.rc_context(_STYLE):
        fig = Figure(figsize=(9, 0.45 * len(rows) + 1.2), layout="constrained")
        axes = fig.subplots(1, 2, sharey=True)
        for ax, (metric, scale, label) in zip(
            axes, (("epmq", 1.0, "EPM-Q"), ("success_rate", 100.0, "success rate (%)")),
            strict=True,
        ):
            y = np.arange(len(rows))[::-1]
            mid = np.array([_num(r[metric]) for r in rows]) * scale
            lo = np.array([_num(r[f"{metric}_lo"]) for r in rows]) * scale
            hi = np.array([_num(r[f"{metric}_hi"]) for r in rows]) * scale
            # Clipped at 0: a point a rounding error outside its interval must not stop the page.
            xerr = [np.clip(mid - lo, 0.0, None), np.clip(hi - mid, 0.0, None)]
            ax.errorbar(mid, y, xerr=xerr, fmt="none", ecolor="#555", capsize=3)
            ax.scatter(mid, y, c=[colors[n] for n in names], zorder=3, s=36)
            ax.set_yticks(y, names)
            ax.set_xlabel(f"{label}, 95% CI")
            ax.grid(axis="x", alpha=0.3)
    return _svg(fig, "ci-bars")


def radar(rows: list[dict[str, Any]], family: str, colors: dict[str, str]) -> str:
    """EPM-Q per slice of one family, one polygon per subject."""
    slices = list(dict.fromkeys(r["slice"] for r in rows))
    subjects = list(dict.fromkeys(r["subject"] for r in rows))
    value = {(r["subject"], r["slice"]): _num(r["epmq"]) for r in rows}
    angles = np.linspace(0, 2 * math.pi, len(slices), endpoint=False)
    with mpl.rc_context(_STYLE):
        fig = Figure(figsize=(4.6, 4.2), layout="constrained")
        ax = fig.add_subplot(projection="polar")
        for s in subjects:
            v = np.array([value.get((s, sl), np.nan) for sl in slices])
            ax.plot(np.r_[angles, angles[:1]], np.r_[v, v[:1]], color=colors[s], lw=1.5, label=s)
            ax.fill(np.r_[angles, angles[:1]], np.r_[v, v[:1]], color=colors[s], alpha=0.08)
        ax.set_xticks(angles, slices)
        ax.tick_params(axis="x", pad=12)
        ax.set_ylim(0, 100)
        ax.set_yticks([25, 50, 75], ["25", "50", "75"], color="#777")
        ax.set_title(f"{FAMILY_TITLES.get(family, family)}: EPM-Q", pad=14)
        ax.legend(loc="upper left", bbox_to_anchor=(1.05, 1.0), frameon=False, fontsize=8)
    return _svg(fig, f"radar-{family}")


def trajectories(examples: dict[str, Any], colors: dict[str, str]) -> str:
    """One example EPM path per subject in C/A/P space; the goal is the origin."""
    subjects = [s for s in colors if examples.get(s, {}).get("path")]
    ncols = min(3, max(1, len(subjects)))
    nrows = max(1, math.ceil(len(subjects) / ncols))
    with mpl.rc_context(_STYLE):
        fig = Figure(figsize=(3.4 * ncols, 3.2 * nrows + 0.4), layout="constrained")
        for i, s in enumerate(subjects):
            ex = examples[s]
            pts = np.asarray(ex["path"], dtype=float)
            ax = fig.add_subplot(nrows, ncols, i + 1, projection="3d")
            ax.plot(pts[:, 0], pts[:, 1], pts[:, 2], color=colors[s], lw=1.6, marker="o", ms=2.5)
            ax.scatter(*pts[0], color="#444", s=22, marker="s", label="start P0")
            ax.scatter(*pts[-1], color=colors[s], s=36, marker="^", label="end")
            ax.scatter(0, 0, 0, color="#2a9d8f", s=50, marker="*", label="goal")
            for axis, name in zip((ax.xaxis, ax.yaxis, ax.zaxis), "CAP", strict=True):
                axis.set_major_locator(MaxNLocator(4))
                axis.set_label_text(name)
            ax.tick_params(labelsize=7)
            ax.set_title(f"{s}\n{ex['case_id']} seed {ex['seed']}, EPM-Q {_num(ex['epmq']):.1f}",
                         fontsize=8)
        if subjects:
            handles, labels = fig.axes[0].get_legend_handles_labels()
            fig.legend(handles, labels, loc="outside lower center", ncols=3, frameon=False,
                       fontsize=8)
    return _svg(fig, "trajectories")


def _num(x: Any) -> float:
    return float("nan") if x is None else float(x)
