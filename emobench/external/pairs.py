"""Every pair of models, paired by case, with the regression gate's statistics.

Per pair and metric: the mean difference (the higher-scoring model first) with the gate's
by-case bootstrap CI and minimum detectable difference (emobench.gate.compare: alpha 0.05,
power 0.8), the paired t-test's p and its Holm adjustment over the metric's pairs. A pair is
separated when its Holm-adjusted p is below alpha. The t-test decides because its p has no
resampling floor, so Holm's strictest step (alpha / m) is resolved; on skewed, two-humped
per-case differences it is conservative, so beside it stands a sign-flip permutation test of
the mean difference (`p_perm`, with its own Holm adjustment), which assumes only that each
case's difference is symmetric about 0 under the null. `cases_needed` sizes a study to
separate the observed difference at the family-wise level (Bonferroni's alpha / m, the
strictest Holm step), assuming the observed difference is the true one and the paired SD
carries over to new cases; an observed difference near 0 makes it unstable.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pyarrow as pa
from scipy.stats import permutation_test

from emobench.gate.compare import ALPHA, POWER
from emobench.scoring.stats import (
    cases_needed,
    holm_adjust,
    minimum_detectable_difference,
    paired_difference,
    paired_t_pvalue,
)

CORRECTION = "holm"

PAIRS_SCHEMA = pa.schema(
    [
        pa.field("metric", pa.string(), nullable=False),
        pa.field("subject_a", pa.string(), nullable=False),  # the higher mean of the pair
        pa.field("subject_b", pa.string(), nullable=False),
        pa.field("n_cases", pa.int64(), nullable=False),
        pa.field("diff", pa.float64(), nullable=False),  # mean over cases of a - b
        pa.field("diff_lo", pa.float64(), nullable=False),  # the gate's 95% bootstrap CI
        pa.field("diff_hi", pa.float64(), nullable=False),
        pa.field("sd", pa.float64(), nullable=False),  # of the per-case differences
        pa.field("p", pa.float64(), nullable=False),  # paired t-test, two-sided
        pa.field("p_holm", pa.float64(), nullable=False),
        pa.field("p_perm", pa.float64(), nullable=False),  # sign-flip permutation test, two-sided
        pa.field("p_perm_holm", pa.float64(), nullable=False),
        pa.field("separated", pa.bool_(), nullable=False),  # p_holm < alpha
        pa.field("ci_excludes_0", pa.bool_(), nullable=False),  # the gate's own verdict, uncorrected
        pa.field("mdd", pa.float64(), nullable=False),  # alpha, power: one comparison
        pa.field("mdd_family", pa.float64(), nullable=False),  # alpha / m, power: among all pairs
        pa.field("cases_needed", pa.int64()),  # at alpha / m to separate |diff|; null when diff is 0
    ]
)


def pair_table(
    per_case: dict[str, np.ndarray], subjects: Sequence[str], *, n_boot: int, seed: int
) -> pa.Table:
    """per_case: metric -> (n_subjects, n_cases) values, every subject on the same cases."""
    columns: dict[str, list[Any]] = {f.name: [] for f in PAIRS_SCHEMA}
    for metric, values in per_case.items():
        n_subjects, n_cases = values.shape
        pairs = list(combinations(range(n_subjects), 2))
        family_alpha = ALPHA / max(1, len(pairs))
        stats = []
        for i, j in pairs:
            a, b = (i, j) if values[i].mean() >= values[j].mean() else (j, i)
            d = values[a] - values[b]
            stats.append((a, b, d, paired_difference(d, n_boot=n_boot, seed=seed, alpha=ALPHA, power=POWER)))
        p = [paired_t_pvalue(d) for _, _, d, _ in stats]
        p_perm = [sign_flip_pvalue(d, n_resamples=n_boot, seed=seed) for _, _, d, _ in stats]
        for (a, b, _, diff), p_raw, p_holm, perm, perm_holm in zip(
            stats, p, holm_adjust(p), p_perm, holm_adjust(p_perm), strict=True
        ):
            columns["metric"].append(metric)
            columns["subject_a"].append(subjects[a])
            columns["subject_b"].append(subjects[b])
            columns["n_cases"].append(n_cases)
            columns["diff"].append(diff.mean)
            columns["diff_lo"].append(diff.lo)
            columns["diff_hi"].append(diff.hi)
            columns["sd"].append(diff.sd)
            columns["p"].append(p_raw)
            columns["p_holm"].append(float(p_holm))
            columns["p_perm"].append(perm)
            columns["p_perm_holm"].append(float(perm_holm))
            columns["separated"].append(bool(p_holm < ALPHA))
            columns["ci_excludes_0"].append(bool(diff.lo > 0 or diff.hi < 0))
            columns["mdd"].append(diff.mdd)
            columns["mdd_family"].append(
                minimum_detectable_difference(diff.sd, n_cases, alpha=family_alpha, power=POWER))
            columns["cases_needed"].append(
                cases_needed(diff.mean, diff.sd, alpha=family_alpha, power=POWER) if diff.mean else None)
    return pa.Table.from_pydict(columns, schema=PAIRS_SCHEMA)


def sign_flip_pvalue(diffs: np.ndarray, *, n_resamples: int, seed: int) -> float:
    """Two-sided p of the paired permutation test of the mean difference: each case's sign
    flipped at random. Exact over all 2**n sign patterns when they number at most n_resamples,
    else Monte Carlo over n_resamples seeded patterns (p counts the observed one: >= 1/(n+1))."""
    result = permutation_test((np.asarray(diffs, dtype=np.float64),), np.mean, permutation_type="samples",
                              n_resamples=n_resamples, vectorized=True, rng=np.random.default_rng(seed))
    return float(result.pvalue)


def pair_summary(pairs: pa.Table, metric: str) -> dict[str, Any]:
    """What the page and docs state about one metric's pairs."""
    rows = [r for r in pairs.to_pylist() if r["metric"] == metric]
    unresolved = [r for r in rows if not r["separated"]]
    needed = sorted(r["cases_needed"] for r in unresolved if r["cases_needed"] is not None)
    return {
        "metric": metric,
        "n_pairs": len(rows),
        "separated": sum(r["separated"] for r in rows),
        "p_below_alpha": sum(r["p"] < ALPHA for r in rows),  # the same t-test, uncorrected
        "separated_perm": sum(r["p_perm_holm"] < ALPHA for r in rows),
        "ci_excludes_0": sum(r["ci_excludes_0"] for r in rows),
        "median_mdd": float(np.median([r["mdd"] for r in rows])) if rows else None,
        "median_mdd_family": float(np.median([r["mdd_family"] for r in rows])) if rows else None,
        "smallest_separated_diff": min((r["diff"] for r in rows if r["separated"]), default=None),
        "largest_unresolved_diff": max((r["diff"] for r in unresolved), default=None),
        "unresolved_cases_needed_median": float(np.median(needed)) if needed else None,
        "unresolved_cases_needed_max": needed[-1] if needed else None,
        "alpha": ALPHA,
        "power": POWER,
        "correction": CORRECTION,
    }
