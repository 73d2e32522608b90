"""The run report's one matplotlib figure: EPM-Q per subject, and the mean meter and mean distance
to the goal turn by turn. Per-episode plots are drawn in the browser, not here."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from emobench.publish.plots import _STYLE, _svg


def _mean_by_turn(series: list[list[float | None]]) -> tuple[np.ndarray, np.ndarray]:
    """Mean over episodes at each turn, over the episodes still running at that turn."""
    width = max((len(s) for s in series), default=0)
    grid = np.full((len(series), width), np.nan)
    for i, s in enumerate(series):
        grid[i, : len(s)] = [np.nan if v is None else v for v in s]
    counts = np.sum(~np.isnan(grid), axis=0)
    means = np.divide(np.nansum(grid, axis=0), counts, out=np.full(width, np.nan), where=counts > 0)
    return np.arange(width), means


def summary_plot(episodes: list[dict[str, Any]], colors: dict[str, str]) -> str:
    """episodes in the page's compact form (run_report.episode_json)."""
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for ep in episodes:
        by[ep["s"]].append(ep)
    subjects = [s for s in colors if s in by]
    with mpl.rc_context(_STYLE):
        fig = Figure(figsize=(11, 3.3), layout="constrained")
        box_ax, meter_ax, dist_ax = fig.subplots(1, 3)
        scores = [[e["q"] for e in by[s] if e["q"] is not None] for s in subjects]
        if any(scores):
            parts = box_ax.boxplot([v or [np.nan] for v in scores], orientation="horizontal", widths=0.5, patch_artist=True,
                                   showfliers=False)
            for patch, s in zip(parts["boxes"], subjects, strict=True):
                patch.set(facecolor=colors[s], alpha=0.35)
            rng = np.random.default_rng(0)  # fixed jitter: the same run renders the same page
            for i, v in enumerate(scores):
                box_ax.scatter(v, i + 1 + rng.uniform(-0.15, 0.15, len(v)), s=8, color=colors[subjects[i]], alpha=0.7)
        box_ax.set_yticks(np.arange(1, len(subjects) + 1), subjects)
        box_ax.set_xlim(0, 100)
        box_ax.set_xlabel("EPM-Q per episode")
        for s in subjects:
            x, m = _mean_by_turn([[t[5] for t in e["t"]] for e in by[s]])
            meter_ax.plot(x + 1, m, color=colors[s], lw=1.6, label=s)
            paths: list[list[float | None]] = [
                [float(np.linalg.norm(e["p0"])), *(None if t[11] is None else float(np.linalg.norm(t[11])) for t in e["t"])]
                for e in by[s]
            ]
            x, d = _mean_by_turn(paths)
            dist_ax.plot(x, d, color=colors[s], lw=1.6, label=s)
        meter_ax.set(xlabel="turn", ylabel="meter", ylim=(0, 100), title="mean meter")
        dist_ax.set(xlabel="turn (0: P0)", ylabel="‖P‖", title="mean distance to the goal")
        dist_ax.set_ylim(bottom=0)
        for ax in (meter_ax, dist_ax):
            ax.grid(alpha=0.3)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if len(subjects) > 1:
            dist_ax.legend(frameon=False, fontsize=8)
    return _svg(fig, "run-summary")
