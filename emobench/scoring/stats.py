"""Aggregate statistics (docs/method.md §5.7): bootstrap by case, Wilson intervals, paired gate statistics.

Everything here is pure numpy over per-case values; callers reduce episodes to per-case
means over seeds first. Missing values are NaN and drop out of every mean.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

# scipy.special, not scipy.stats: the latter costs seconds of import in every CLI call.
from scipy.special import ndtr, ndtri, stdtr, stdtrit

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

try:
    from threadpoolctl import threadpool_limits
except ImportError:  # only a speed-up (see bootstrap_case_means); results are identical
    threadpool_limits = None

# Cells of the (resamples x cases) count matrix built per chunk: bounds memory at ~16 MB each.
_CHUNK_CELLS = 2_000_000


@dataclass(frozen=True)
class StratumEstimates:
    """Point estimate and bootstrap CI per (stratum, column): arrays of shape (n_strata, K)."""

    point: FloatArray
    lo: FloatArray
    hi: FloatArray


def bootstrap_case_means(
    values: FloatArray,
    partitions: Sequence[IntArray],
    *,
    n_boot: int,
    seed: int,
    ci: float = 0.95,
) -> list[StratumEstimates]:
    """Mean over cases of each column, with an expanded-percentile bootstrap CI by case.

    values: (n_cases, K) per-case values, NaN where a column has no value for a case.
    partitions: each an array of stratum codes 0..n-1, one per case (a slice family). Cases are
    resampled with replacement *within* each stratum, so every resample keeps the stratum size.

    One (n_boot, n_cases) matrix of uniforms, drawn chunk by chunk, drives every partition and
    every column; each resample is a row of case counts, and the means are matrix products.
    The products' sums are exact (exact_split), so the bounds are the same bits on every CPU
    and BLAS, and a published bundle rebuilds byte for byte.
    """
    if values.ndim != 2:
        raise ValueError("values must be (n_cases, K)")
    n_cases, k = values.shape
    present = ~np.isnan(values)
    filled = np.where(present, values, 0.0)
    # Columns share few distinct missingness patterns; count each pattern's cases once.
    masks, mask_of = np.unique(present, axis=1, return_inverse=True)
    mask_of = mask_of.reshape(-1)
    chunk = max(1, min(n_boot, _CHUNK_CELLS // max(n_cases, 1)))
    layouts = [_Layout(codes, chunk) for codes in partitions]
    # Resamples on the last axis, so the quantiles read contiguous memory.
    boots = [np.empty((lay.n_strata, k, n_boot)) for lay in layouts]
    # Per stratum one matrix [parts of the values, largest first | missingness masks]: one
    # product per chunk gives every part's sums and every pattern's case count.
    weights = [[_stacked(filled[lay.order][blk], masks[lay.order][blk]) for blk in lay.blocks]
               for lay in layouts]

    rng = np.random.default_rng(seed)
    pos = np.empty((chunk, n_cases))  # scratch buffers reused by every chunk and partition
    flat = np.empty((chunk, n_cases), dtype=np.intp)
    # The products are small and many: BLAS threads cost more than they give, and spin
    # uselessly when the machine is busy (measured ~10x slower under load).
    one_thread = threadpool_limits(1, "blas") if threadpool_limits else contextlib.nullcontext()
    with one_thread, np.errstate(invalid="ignore", divide="ignore"):
        for b0 in range(0, n_boot, chunk):
            nb = min(chunk, n_boot - b0)
            u = rng.random((nb, n_cases), dtype=np.float32)
            for lay, out, stacked in zip(layouts, boots, weights, strict=True):
                counts = lay.counts(u, pos[:nb], flat[:nb]).astype(np.float64)
                for s, (blk, w) in enumerate(zip(lay.blocks, stacked, strict=True)):
                    # Every sum is exact, whatever order BLAS adds in; the parts' sums are
                    # then added smallest first, in this fixed order.
                    sums = counts[:, blk] @ w
                    n_parts = (w.shape[1] - masks.shape[1]) // max(k, 1)
                    num = sums[:, (n_parts - 1) * k : n_parts * k].copy()
                    for i in range(n_parts - 2, -1, -1):
                        num += sums[:, i * k : (i + 1) * k]
                    den = sums[:, n_parts * k :]
                    out[s, :, b0 : b0 + nb] = (num / den[:, mask_of]).T

    results = []
    for lay, out in zip(layouts, boots, strict=True):
        ordered = values[lay.order]
        v_strata = [ordered[blk] for blk in lay.blocks]
        n_present = np.stack([(~np.isnan(v)).sum(axis=0) for v in v_strata]).reshape(-1, k)
        with np.errstate(invalid="ignore", divide="ignore"):
            point = np.stack([np.nansum(v, axis=0) for v in v_strata]).reshape(-1, k) / n_present
        lo, hi = _expanded_percentiles(out, n_present, ci)
        results.append(StratumEstimates(point=point, lo=lo, hi=hi))
    return results


def _stacked(values: FloatArray, masks: NDArray[np.bool_]) -> FloatArray:
    return np.hstack([*exact_split(values), masks.astype(np.float64)])


def exact_split(values: FloatArray) -> list[FloatArray]:
    """values (n, K) as parts that add up to it exactly, largest first, such that a product
    counts @ part, for any non-negative integer counts whose rows sum to at most n, is exact.

    Each part holds, per column, integer multiples of one power of two (its unit), none above
    2**(52 - ceil(log2 n)) units, so every product and partial sum is an integer number of units
    of at most 2**52: exact in float64 in any order of addition, with or without FMA. The bootstrap
    sums are therefore the same bits on every BLAS and CPU (Ozaki et al., 2012, "Error-free
    transformations of matrix multiplication"). Two parts cover typical scores; each further
    part covers 52 - ceil(log2 n) more bits of the columns' exponent range.
    """
    n = max(1, values.shape[0])
    bits = 52 - math.ceil(math.log2(n))
    parts: list[FloatArray] = []
    rest = np.asarray(values, dtype=np.float64)
    if not np.isfinite(rest).all():
        raise ValueError("values must be finite")
    while rest.size and rest.any():
        _, exponent = np.frexp(np.abs(rest).max(axis=0))  # every |value| < 2**exponent
        unit = np.ldexp(1.0, np.maximum(exponent - bits, -1074))  # 2**-1074: the smallest double
        part = np.rint(rest / unit) * unit
        parts.append(part)
        rest = rest - part
    return parts or [np.zeros_like(rest)]


class _Layout:
    """A partition's cases sorted by stratum, and how a uniform picks a case within its stratum."""

    def __init__(self, codes: IntArray, chunk: int) -> None:
        n_cases = codes.size
        self.n_strata = int(codes.max()) + 1 if n_cases else 0
        self.order = np.argsort(codes, kind="stable")
        sizes = np.bincount(codes, minlength=self.n_strata)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
        self.blocks = [slice(a, a + n) for a, n in zip(starts, sizes, strict=True)]
        self.n_cases = n_cases
        self.size = np.repeat(sizes, sizes).astype(np.float64)
        # Flat index of a resample's stratum start: row offset plus the position's stratum start.
        self.base = (np.arange(chunk)[:, None] * n_cases + np.repeat(starts, sizes)).astype(
            np.float64
        )

    def counts(
        self, u: NDArray[np.float32], pos: FloatArray, flat: NDArray[np.intp]
    ) -> NDArray[np.intp]:
        """(rows, n_cases) counts of each sorted case in each resample; pos, flat: scratch."""
        nb = u.shape[0]
        # u is a multiple of 2**-24 below 1 and every index here is far below 2**29, so
        # u * size + base is exact in float64 and its floor stays inside the stratum.
        np.multiply(u, self.size, out=pos)
        np.add(pos, self.base[:nb], out=pos)
        np.copyto(flat, pos, casting="unsafe")
        return np.bincount(flat.ravel(), minlength=nb * self.n_cases).reshape(nb, self.n_cases)


def expanded_tail(n: NDArray[np.int64] | int, ci: float) -> FloatArray:
    """Tail probability for an expanded percentile interval of a mean over n cases.

    The plain percentile interval is too narrow for small n (it uses z where t belongs, and the
    bootstrap variance lacks the n/(n-1) factor), so slices with ~15 cases covered ~92%.
    Hesterberg's expansion (2015, "What teachers should know about the bootstrap"): use the
    percentile at Phi(-sqrt(n/(n-1)) * t_{n-1, 1-a/2}). NaN for n < 2: no interval exists.
    """
    n_arr = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = stdtrit(n_arr - 1.0, 0.5 + ci / 2.0)
        tail = ndtr(-np.sqrt(n_arr / (n_arr - 1.0)) * t)
    return np.where(n_arr >= 2, tail, np.nan)


def _expanded_percentiles(
    boots: FloatArray, n_present: NDArray[np.int64], ci: float
) -> tuple[FloatArray, FloatArray]:
    """Bounds over the last axis of (strata, K, resamples), one tail level per case count."""
    lo = np.full(boots.shape[:-1], np.nan)
    hi = np.full(boots.shape[:-1], np.nan)
    if boots.shape[-1] == 0:
        return lo, hi
    for s in range(boots.shape[0]):
        # Columns with the same case count share a level: one quantile call per group.
        for n in np.unique(n_present[s]):
            tail = float(expanded_tail(int(n), ci))
            if not np.isfinite(tail):
                continue
            cols = np.flatnonzero(n_present[s] == n)
            block = boots[s, cols]
            if np.isnan(block).any():
                # A subject absent from a resample's cases yields NaN: skip those resamples.
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    q = np.nanquantile(block, [tail, 1.0 - tail], axis=-1)
            else:
                q = np.quantile(block, [tail, 1.0 - tail], axis=-1)
            lo[s, cols], hi[s, cols] = q[0], q[1]
    return lo, hi


def wilson_interval(
    p: FloatArray | float, n: FloatArray | float, ci: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Wilson score interval for a proportion p observed over n trials (n may be fractional)."""
    z = float(ndtri(0.5 + ci / 2.0))
    p_arr = np.asarray(p, dtype=np.float64)
    n_arr = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        denom = 1.0 + z * z / n_arr
        centre = (p_arr + z * z / (2.0 * n_arr)) / denom
        half = z / denom * np.sqrt(p_arr * (1.0 - p_arr) / n_arr + z * z / (4.0 * n_arr * n_arr))
        lo = np.clip(centre - half, 0.0, 1.0)
        hi = np.clip(centre + half, 0.0, 1.0)
    return lo, hi


def effective_trials(
    p: FloatArray, var_of_mean: FloatArray, n_cases: FloatArray, n_episodes: FloatArray
) -> FloatArray:
    """Trials for a Wilson interval on a mean of per-case success rates.

    Episodes of one case are correlated, so n_episodes overstates the information. The
    effective n matches the by-case variance, p(1-p)/var, bounded between n_cases (seeds fully
    correlated) and n_episodes (independent). When p is 0 or 1 the variance says nothing and
    the conservative bound, n_cases, is used.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        n_eff = p * (1.0 - p) / var_of_mean
    n_eff = np.where(np.isfinite(n_eff) & (var_of_mean > 0), n_eff, n_cases)
    return np.clip(n_eff, n_cases, n_episodes)


@dataclass(frozen=True)
class PairedDifference:
    """Bootstrap of the mean paired difference (candidate - baseline) over cases."""

    n: int
    mean: float
    lo: float
    hi: float
    sd: float  # sd of the per-case differences (ddof=1)
    mdd: float  # minimum detectable difference at the given alpha and power


def paired_difference(
    diffs: FloatArray,
    *,
    n_boot: int,
    seed: int,
    ci: float = 0.95,
    alpha: float = 0.05,
    power: float = 0.8,
) -> PairedDifference:
    """Mean difference with a by-case bootstrap CI and the minimum detectable difference."""
    d = np.asarray(diffs, dtype=np.float64)
    if d.ndim != 1 or d.size < 2 or np.isnan(d).any():
        raise ValueError("need at least two non-missing paired differences")
    est = bootstrap_case_means(
        d[:, None], [np.zeros(d.size, dtype=np.intp)], n_boot=n_boot, seed=seed, ci=ci
    )[0]
    sd = float(np.std(d, ddof=1))
    return PairedDifference(
        n=int(d.size),
        mean=float(est.point[0, 0]),
        lo=float(est.lo[0, 0]),
        hi=float(est.hi[0, 0]),
        sd=sd,
        mdd=minimum_detectable_difference(sd, int(d.size), alpha=alpha, power=power),
    )


def _z_sum(alpha: float, power: float) -> float:
    # Two-sided test at level alpha: z_{1-alpha/2} + z_{power}; 2.80 for 0.05 and 0.8.
    return float(ndtri(1.0 - alpha / 2.0) + ndtri(power))


def minimum_detectable_difference(
    sd: float, n: int, *, alpha: float = 0.05, power: float = 0.8
) -> float:
    """Smallest true mean difference a paired test over n cases detects with the given power."""
    return _z_sum(alpha, power) * sd / math.sqrt(n)


def cases_needed(delta: float, sd: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """Paired cases needed to detect a true mean difference of |delta| (normal approximation)."""
    if delta == 0:
        raise ValueError("delta must be non-zero")
    return max(2, math.ceil((_z_sum(alpha, power) * sd / abs(delta)) ** 2))


def paired_t_pvalue(diffs: FloatArray) -> float:
    """Two-sided p of the paired t-test that the mean difference is 0 (df = n - 1).

    The gate decides by its bootstrap CI; a p-value is needed where many pairs are tested at
    once and a multiple-comparison correction (holm_adjust) applies. 1.0 when every difference
    is 0, 0.0 when they are equal and non-zero."""
    d = np.asarray(diffs, dtype=np.float64)
    if d.ndim != 1 or d.size < 2 or np.isnan(d).any():
        raise ValueError("need at least two non-missing paired differences")
    mean, sd = float(d.mean()), float(np.std(d, ddof=1))
    if sd == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    t = abs(mean) / (sd / math.sqrt(d.size))
    return float(2.0 * stdtr(d.size - 1.0, -t))


def holm_adjust(p_values: Sequence[float] | FloatArray) -> FloatArray:
    """Holm's step-down adjusted p-values (Holm 1979), in the input's order.

    The k-th smallest p (k from 0) is multiplied by (m - k), the running maximum keeps the
    order, and 1 caps it; rejecting where the adjusted p < alpha controls the family-wise
    error rate at alpha for any dependence between the tests."""
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1 or np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("p-values must be a 1-d array in [0, 1]")
    m = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    adjusted = np.empty(m)
    adjusted[order] = stepped
    return adjusted
