"""Judge reliability statistics reported with every run (docs/method.md §5.7)."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from typing import Final, Literal, cast, get_args

import krippendorff
import numpy as np
import pandas as pd
from scipy import stats

AlphaLevel = Literal["nominal", "ordinal", "interval", "ratio"]
ALPHA_LEVELS: Final = get_args(AlphaLevel)
FLIP_COLUMNS: Final = ("case_id", "seed", "judge", "dimension", "subject_a", "subject_b", "order", "winner")
ORDERS: Final = ("ab", "ba")


def krippendorff_alpha(ratings: np.ndarray, level: str = "ordinal") -> float:
    """Krippendorff's alpha for a judges x units matrix; np.nan marks a missing rating.

    Returns nan where alpha is undefined (0/0): fewer than two judges, no unit rated by two or
    more judges, or a single distinct value among the pairable ratings (no disagreement is
    possible, so the expected disagreement is 0). A panel that agrees on varied values gets 1.
    """
    if level not in ALPHA_LEVELS:
        raise ValueError(f"level must be one of {ALPHA_LEVELS}, got {level!r}")
    data = np.asarray(ratings, dtype=float)
    if data.ndim != 2:
        raise ValueError(f"ratings must be a judges x units matrix, got shape {data.shape}")
    if data.shape[0] < 2:
        return math.nan
    pairable = data[:, (~np.isnan(data)).sum(axis=0) >= 2]
    values = pairable[~np.isnan(pairable)]
    if np.unique(values).size < 2:
        return math.nan
    # Only pairable units enter the coincidence matrix, so dropping the rest changes nothing.
    return float(krippendorff.alpha(reliability_data=pairable, level_of_measurement=cast(AlphaLevel, level)))


# Up to 8 pairs the p-value enumerates all n! pairings (40,320 at 8, a few ms); above, scipy's
# t approximation, which reads a perfect rank order as p = 0 at any n and is loose at small n.
EXACT_MAX: Final = 8


def _complete(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The complete pairs' values, or None with fewer than 3 of them or a constant side."""
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"x and y must be 1-D and the same length, got {a.shape} and {b.shape}")
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    return a, b


def spearman_rho(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman's rho alone (no p-value: the cheap one for bootstraps); nan as in spearman."""
    pairs = _complete(x, y)
    return math.nan if pairs is None else float(stats.spearmanr(*pairs).statistic)


@functools.cache
def _pairings(n: int) -> np.ndarray:
    """Every permutation of range(n), one a row."""
    flat = itertools.chain.from_iterable(itertools.permutations(range(n)))
    return np.fromiter(flat, dtype=np.int8, count=math.factorial(n) * n).reshape(-1, n)


def _exact_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided exact p: the share of the n! pairings of the ranks whose |rho| reaches the
    observed one (ties keep their mid-ranks, so it is exact with ties too)."""
    ra, rb = stats.rankdata(a), stats.rankdata(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    covs = np.abs(rb[_pairings(a.size)] @ ra)  # rho is cov / a constant the pairing does not change
    observed = abs(float(rb @ ra))
    return float(np.mean(covs >= observed - 1e-9 * max(observed, 1.0)))


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Spearman's rho and its two-sided p-value over the pairs where both values are present.

    The p is exact (all pairings) up to EXACT_MAX pairs; above, scipy's t approximation, never
    below 1/n!, the least p an exact test can give (the observed pairing itself counts).
    (nan, nan) with fewer than 3 complete pairs or when either side is constant.
    """
    pairs = _complete(x, y)
    if pairs is None:
        return (math.nan, math.nan)
    a, b = pairs
    result = stats.spearmanr(a, b)
    if a.size <= EXACT_MAX:
        return (float(result.statistic), _exact_p(a, b))
    return (float(result.statistic), max(float(result.pvalue), 1 / math.factorial(a.size)))


def position_flip_rate(df: pd.DataFrame) -> float:
    """Share of complete verdict pairs whose winner changes when the order is swapped.

    A verdict pair is one (case_id, seed, judge, dimension, {subject_a, subject_b}) judged in
    both orders. Rows without a winner (invalid judgements) are left out, and a pair seen in
    only one order does not count. nan when there is no complete pair.
    """
    missing = [c for c in FLIP_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"position_flip_rate: missing columns {missing}")
    rows = df.loc[df["winner"].notna(), list(FLIP_COLUMNS)].copy()
    if rows[list(FLIP_COLUMNS[:-1])].isna().any(axis=None):
        raise ValueError(f"position_flip_rate: only winner may be missing; check {list(FLIP_COLUMNS[:-1])}")
    bad_order = ~rows["order"].isin(ORDERS)
    if bad_order.any():
        raise ValueError(f"order must be 'ab' or 'ba', got {sorted(set(rows.loc[bad_order, 'order']))}")
    a, b = rows["subject_a"].astype(str), rows["subject_b"].astype(str)
    stray = (rows["winner"] != rows["subject_a"]) & (rows["winner"] != rows["subject_b"])
    if stray.any():
        raise ValueError(f"winner is neither subject in {int(stray.sum())} row(s)")
    # The unordered pair, so that (x, y) shown 'ab' and (y, x) shown 'ba' meet.
    rows["first"] = np.where(a <= b, a, b)
    rows["second"] = np.where(a <= b, b, a)
    key = ["case_id", "seed", "judge", "dimension", "first", "second"]
    if rows.duplicated([*key, "order"]).any():
        raise ValueError("position_flip_rate: more than one verdict for the same pair and order")
    winners = rows.pivot(index=key, columns="order", values="winner")
    complete = winners.reindex(columns=list(ORDERS)).dropna()
    if complete.empty:
        return math.nan
    return float((complete["ab"] != complete["ba"]).mean())
