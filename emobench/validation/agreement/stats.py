"""Agreement of a judge panel with human levels on one scale (docs/judges.md): Spearman's rho,
ordinal Krippendorff's alpha, exact agreement and the confusion matrix, each with a bootstrap CI
over the rated pairs, beside what a majority-class and a chance rater would get."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from emobench.scoring.reliability import krippendorff_alpha, spearman_rho
from emobench.scoring.stats import wilson_interval

CI = 0.95


def _round(x: float) -> float | None:
    return None if math.isnan(x) else round(float(x), 4)


def _rho(h: np.ndarray, p: np.ndarray) -> float:
    return spearman_rho(h, p)


def _alpha(h: np.ndarray, p: np.ndarray) -> float:
    return krippendorff_alpha(np.vstack([h, p]), level="ordinal") if h.size else math.nan


def _exact(h: np.ndarray, p: np.ndarray) -> float:
    return float(np.mean(h == p)) if h.size else math.nan


def bootstrap_ci(
    stat: Callable[[np.ndarray, np.ndarray], float], h: np.ndarray, p: np.ndarray, n_boot: int, seed: int
) -> tuple[float | None, float | None]:
    """Percentile CI of stat over pairs resampled with replacement; resamples where it is undefined are skipped."""
    if h.size < 2:
        return None, None
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, h.size, size=(n_boot, h.size))
    values = np.array([stat(h[i], p[i]) for i in draws])
    values = values[~np.isnan(values)]
    if not values.size:
        return None, None
    lo, hi = np.quantile(values, [(1 - CI) / 2, (1 + CI) / 2])
    return _round(lo), _round(hi)


def _with_ci(stat: Callable[[np.ndarray, np.ndarray], float], h: np.ndarray, p: np.ndarray,
             n_boot: int, seed: int) -> dict[str, float | None]:
    lo, hi = bootstrap_ci(stat, h, p, n_boot, seed)
    return {"value": _round(stat(h, p)), "lo": lo, "hi": hi}


def invalid_share(n_invalid: int, n: int) -> dict[str, float | None]:
    if n == 0:
        return {"value": None, "lo": None, "hi": None}
    lo, hi = wilson_interval(n_invalid / n, n, CI)
    return {"value": round(n_invalid / n, 4), "lo": _round(float(lo)), "hi": _round(float(hi))}


def baselines(human: np.ndarray, levels: Sequence[int], n_boot: int, seed: int) -> dict[str, Any]:
    """What raters that ignore the reply would score on these pairs.

    Majority class: always the commonest human level; its exact agreement is that level's
    share, its rho is undefined (a constant rater), and its alpha is negative whenever the
    humans use more than one level. Chance: a rater drawing
    levels at random with the human levels' own frequencies; its expected exact agreement is
    the sum of squared shares, and rho and alpha are given as the mean and 95% range over
    n_boot such raters.
    """
    if not human.size:
        return {"majority": None, "chance": None}
    shares = np.array([np.mean(human == lv) for lv in levels])
    majority = int(levels[int(np.argmax(shares))])
    rng = np.random.default_rng(seed)
    draws = rng.choice(np.asarray(levels), size=(n_boot, human.size), p=shares)
    sims = {name: np.array([f(human, d) for d in draws]) for name, f in (("spearman", _rho), ("alpha", _alpha))}

    def summary(values: np.ndarray) -> dict[str, float | None]:
        values = values[~np.isnan(values)]
        if not values.size:
            return {"mean": None, "lo": None, "hi": None}
        lo, hi = np.quantile(values, [(1 - CI) / 2, (1 + CI) / 2])
        return {"mean": _round(float(values.mean())), "lo": _round(lo), "hi": _round(hi)}

    return {
        "majority": {"level": majority, "exact_agreement": _round(float(shares.max())), "spearman": None,
                     "alpha": _round(_alpha(human, np.full(human.size, float(majority))))},
        "chance": {"exact_agreement": _round(float(np.sum(shares**2))), **{k: summary(v) for k, v in sims.items()}},
    }


def level_agreement(
    human: Sequence[int], panel: Sequence[int | None], levels: Sequence[int], *, n_boot: int, seed: int
) -> dict[str, Any]:
    """Panel levels (None: no valid verdict) against human levels on one mechanism.

    The statistics use the pairs with a valid verdict; an invalid verdict is never read as a
    level. confusion[i][j] counts pairs the humans rated levels[i] and the panel levels[j].
    """
    if len(human) != len(panel):
        raise ValueError(f"human and panel differ in length: {len(human)} and {len(panel)}")
    valid = [i for i, p in enumerate(panel) if p is not None]
    h = np.array([human[i] for i in valid], dtype=float)
    p = np.array([panel[i] for i in valid], dtype=float)
    index = {lv: k for k, lv in enumerate(levels)}
    confusion = [[0] * len(levels) for _ in levels]
    for a, b in zip(h, p, strict=True):
        confusion[index[int(a)]][index[int(b)]] += 1
    return {
        "n": len(human),
        "n_valid": len(valid),
        "invalid_share": invalid_share(len(human) - len(valid), len(human)),
        "spearman": _with_ci(_rho, h, p, n_boot, seed),
        "alpha_ordinal": _with_ci(_alpha, h, p, n_boot, seed),
        "exact_agreement": _with_ci(_exact, h, p, n_boot, seed),
        "levels": list(levels),
        "confusion": confusion,
        "human_level_counts": [int(np.sum(h == lv)) for lv in levels],
        "baselines": baselines(h, levels, n_boot, seed),
    }


def score_agreement(human: Sequence[float], panel: Sequence[float | None], *, n_boot: int, seed: int) -> dict[str, Any]:
    """Spearman's rho of a panel score (None: invalid) against a human score on another scale."""
    valid = [i for i, p in enumerate(panel) if p is not None]
    h = np.array([human[i] for i in valid], dtype=float)
    p = np.array([panel[i] for i in valid], dtype=float)
    return {
        "n": len(human),
        "n_valid": len(valid),
        "invalid_share": invalid_share(len(human) - len(valid), len(human)),
        "spearman": _with_ci(_rho, h, p, n_boot, seed),
        "baselines": {"chance": {"spearman": 0.0}},
    }
