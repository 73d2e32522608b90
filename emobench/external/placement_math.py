"""The arithmetic of placing a model on EMPA's leaderboard through references played beside it.

All scores are means over the same 30 cases, on both sides: the placement is conditional on those
cases, so case sampling adds no term; what varies is run to run. A published score is one
unseeded run, so its run-to-run spread is that of a run of ours, estimated by the references'
own standard deviation s (pooled over the references). With k runs of a reference, mean m and
published score P:

- offset o = m - P, standard error s·sqrt(1 + 1/k) (our k runs, and the one published run);
- with two references, the difference of their offsets d = o1 - o2 tests the common-offset
  assumption: when its interval holds 0 the model is placed by the mean offset; otherwise by the
  line through both references, p = P2 + λ·(P1 - P2), λ = (m_u - m2)/(m1 - m2), with the delta
  method's variance b²(s_u²/k_u + λ²s1²/k1 + (1-λ)²s2²/k2) + λ²s1² + (1-λ)²s2², b = (P1-P2)/(m1-m2);
- the line needs the references apart in our runs: their difference's interval must exclude 0,
  and the difference must exceed 1e-9 of the scores (else the slope is noise or rounding);
- a published model j ranks above the placed model p for sure only when p - P_j's interval, with
  standard error sqrt(se_p² + s²), lies below 0; the rank range counts those, and those not surely
  below.

Intervals are 95%, Student's t with min(k) - 1 degrees of freedom over the runs involved.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from scipy import stats

CI = 0.95


def t_quantile(dof: int) -> float:
    return float(stats.t.ppf(0.5 + CI / 2, dof))


def interval(centre: float, se: float, dof: int) -> tuple[float, float]:
    half = t_quantile(dof) * se
    return centre - half, centre + half


def sd(xs: list[float]) -> float:
    return statistics.stdev(xs)  # exact arithmetic: no squares of tiny differences lost to underflow


@dataclass(frozen=True)
class Side:
    """k run scores of one model: their mean, standard deviation and count."""

    mean: float
    sd: float
    k: int

    @classmethod
    def of(cls, scores: list[float]) -> Side:
        return cls(sum(scores) / len(scores), sd(scores), len(scores))


@dataclass(frozen=True)
class Offset:
    value: float
    se: float
    dof: int


def offset(ref: Side, published: float) -> Offset:
    return Offset(ref.mean - published, ref.sd * math.sqrt(1 + 1 / ref.k), ref.k - 1)


@dataclass(frozen=True)
class Placed:
    score: float
    se: float
    dof: int


def by_offset(model: Side, offsets: list[Offset]) -> Placed:
    """Placed by the mean of the references' offsets (one reference: its own)."""
    n = len(offsets)
    o = sum(x.value for x in offsets) / n
    se = math.sqrt(model.sd**2 / model.k + sum(x.se**2 for x in offsets) / n**2)
    return Placed(model.mean - o, se, min(model.k - 1, *(x.dof for x in offsets)))


def by_line(model: Side, strong: Side, p_strong: float, weak: Side, p_weak: float) -> Placed:
    """Placed by the line through both references (ours -> published)."""
    lam = (model.mean - weak.mean) / (strong.mean - weak.mean)
    b = (p_strong - p_weak) / (strong.mean - weak.mean)
    ours = model.sd**2 / model.k + lam**2 * strong.sd**2 / strong.k + (1 - lam) ** 2 * weak.sd**2 / weak.k
    theirs = lam**2 * strong.sd**2 + (1 - lam) ** 2 * weak.sd**2
    return Placed(p_weak + lam * (p_strong - p_weak), math.sqrt(b**2 * ours + theirs), min(model.k, strong.k, weak.k) - 1)


def separated(strong: Side, weak: Side, dof: int) -> tuple[bool, tuple[float, float]]:
    """Whether the references' means are apart, and their difference's interval."""
    gap = strong.mean - weak.mean
    lo, hi = interval(gap, math.hypot(strong.sd / math.sqrt(strong.k), weak.sd / math.sqrt(weak.k)), dof)
    return not lo <= 0 <= hi and abs(gap) > 1e-9 * max(1.0, abs(strong.mean), abs(weak.mean)), (lo, hi)


def offset_difference(first: Offset, second: Offset) -> Offset:
    return Offset(first.value - second.value, math.sqrt(first.se**2 + second.se**2), min(first.dof, second.dof))


def rank_range(placed: Placed, published: list[float], published_sd: float) -> tuple[int, int]:
    """Best and worst rank among the published scores, each taken as one run with spread published_sd."""
    t = t_quantile(placed.dof)
    above = below = 0
    for score in published:
        se = math.sqrt(placed.se**2 + published_sd**2)
        diff = placed.score - score
        above += diff + t * se < 0
        below += diff - t * se > 0
    return 1 + above, len(published) + 1 - below
