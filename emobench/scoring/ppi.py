"""Prediction-powered estimates of a mean (PPI++): a few human ratings, the panel's many, one interval.

n episodes carry a human rating Y and the panel's score f; N more carry the panel's score alone. The
estimate of what people would say of all of them is

    θ = mean(Y_L) + λ · (mean(f_U) − mean(f_L)),

which is the people-only mean when λ = 0 and plain PPI when λ = 1. Its variance is that of the
labelled residuals Y − λf over n plus λ² times that of f_U over N. λ is tuned as PPI++ tunes it, to
the value in [0, 1] that minimises that variance, from its plug-in estimate over the episodes (the
reference implementation, ppi_py's `ppi_mean_ci`, uses cov(Y, f) / ((1 + n/N) var(f)), its
large-sample form, which can leave the interval a hair wider than the people-only one in a small
sample; that rule is `weight="ppi_py"`). A useless or adversarial panel gets λ = 0: the people-only
interval.

Several seeds of one case are not independent. Every figure here is computed from each cluster's
(case's) contribution to the estimate, its influence ψ_c: the variance is Σ ψ_c², times G/(G−1)
when some cluster holds more than one episode (G clusters); with one episode a cluster it is
exactly the independent formula above. Two subjects played on the same cases share clusters, so a
difference of two estimates takes its variance from the difference of their influences.
docs/method.md ("Scores anchored to people") has the derivation.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import stats

Quantile = Literal["t", "normal"]


@dataclass(frozen=True)
class Estimate:
    """A mean and its normal interval, with each cluster's influence on it (for differences)."""

    mean: float
    se: float
    low: float
    high: float
    influence: pd.Series  # cluster -> ψ_c
    clustered: bool  # some cluster holds more than one episode
    named: bool  # the clusters were given (cases): another estimate's clusters of the same name are shared
    df: float  # of the t quantile the interval used (inf: the normal quantile)
    weight: float = 0.0  # λ: 0 for people-only, the tuned PPI++ weight for the anchored estimate


def tuned_weight(y: NDArray[np.float64], f_labelled: NDArray[np.float64], f_unlabelled: NDArray[np.float64]) -> float:
    """ppi_py's plug-in λ for a mean: cov(Y, f) / ((1 + n/N) var(f over all)), clipped to [0, 1]."""
    n, big_n = len(y), len(f_unlabelled)
    cov = float(np.mean((y - y.mean()) * (f_labelled - f_labelled.mean())))
    var = float(np.var(np.concatenate([f_labelled, f_unlabelled]), ddof=1))
    if var <= 0 or not np.isfinite(cov):
        return 0.0
    return float(np.clip(cov / ((1 + n / big_n) * var), 0.0, 1.0))


def least_variance_weight(y: NDArray[np.float64], f_labelled: NDArray[np.float64],
                          f_unlabelled: NDArray[np.float64]) -> float:
    """The λ in [0, 1] minimising the episode-level variance var(Y − λf_L)/n + λ² var(f_U)/N: estimated
    from every episode, not from the clusters (with a few cases, minimising a variance estimated from a
    few cluster sums drives it towards 0 and the interval with it)."""
    n, big_n = len(y), len(f_unlabelled)
    cov = float(np.mean((y - y.mean()) * (f_labelled - f_labelled.mean()))) / n
    var = float(np.var(f_labelled)) / n + float(np.var(f_unlabelled)) / big_n
    return float(np.clip(cov / var, 0.0, 1.0)) if var > 0 else 0.0


def _interval(mean: float, influence: pd.Series, clustered: bool, alpha: float, named: bool, df: float,
              weight: float = 0.0) -> Estimate:
    """`df`: the degrees of freedom of Student's t quantile; inf for the normal one."""
    groups = len(influence)
    var = float(np.sum(influence.to_numpy() ** 2)) * (groups / (groups - 1) if clustered and groups > 1 else 1.0)
    se = float(np.sqrt(var))
    q = float(stats.norm.ppf(1 - alpha / 2) if math.isinf(df) else stats.t.ppf(1 - alpha / 2, max(df, 1.0)))
    return Estimate(mean, se, mean - q * se, mean + q * se, influence, clustered, named, df, weight)


def _df(quantile: Quantile, rated: Sequence[Hashable]) -> float:
    """Student's t with one less than the rated clusters (episodes, or cases), or the normal quantile."""
    return math.inf if quantile == "normal" else float(pd.Index(rated).nunique() - 1)


def _influence(values: NDArray[np.float64], clusters: Sequence[Hashable]) -> pd.Series:
    """Each cluster's share of Σ (v − mean(v)) / len(v)."""
    centred = (values - values.mean()) / len(values)
    if isinstance(clusters, range):  # an episode a cluster
        return pd.Series(centred, index=pd.RangeIndex(clusters.start, clusters.stop))
    return pd.Series(centred).groupby(pd.Index(clusters), sort=False).sum()


def _clustered(*cluster_lists: Sequence[Hashable]) -> bool:
    """Whether some cluster holds more than one episode."""
    if all(isinstance(clusters, range) for clusters in cluster_lists):
        return False
    labels = pd.Index([c for clusters in cluster_lists for c in clusters])
    return not labels.is_unique


def people_mean(y: Sequence[float], clusters: Sequence[Hashable] | None = None, alpha: float = 0.05,
                quantile: Quantile = "t") -> Estimate:
    """The rated episodes alone: their mean and its (clustered) interval."""
    values = np.asarray(y, dtype=float)
    keys: Sequence[Hashable] = list(clusters) if clusters is not None else range(len(values))
    return _interval(float(values.mean()), _influence(values, keys), _clustered(keys), alpha, clusters is not None,
                     _df(quantile, keys))


def anchored_mean(
    y: Sequence[float], f_labelled: Sequence[float], f_unlabelled: Sequence[float],
    clusters_labelled: Sequence[Hashable] | None = None, clusters_unlabelled: Sequence[Hashable] | None = None,
    alpha: float = 0.05, weight: float | Literal["least-variance", "ppi_py"] = "least-variance",
    quantile: Quantile = "t",
) -> Estimate:
    """PPI++'s estimate of the human mean over labelled and unlabelled episodes, and its interval.

    `weight`: a fixed λ; "least-variance" (least_variance_weight: without clusters the interval is
    then never wider than the people-only one); or "ppi_py", the reference implementation's plug-in
    rule. Without clusters, a fixed or "ppi_py" weight gives exactly ppi_py's `ppi_mean_ci`."""
    yl, fl, fu = (np.asarray(v, dtype=float) for v in (y, f_labelled, f_unlabelled))
    if not (len(yl) == len(fl) >= 2 and len(fu) >= 1):
        raise ValueError("an anchored mean needs at least two rated episodes and one more the panel scored")
    if (clusters_labelled is None) != (clusters_unlabelled is None):
        raise ValueError("give the clusters of both the labelled and the unlabelled episodes, or of neither")
    named = clusters_labelled is not None and clusters_unlabelled is not None
    lab: Sequence[Hashable] = list(clusters_labelled) if named and clusters_labelled is not None else range(len(yl))
    unl: Sequence[Hashable] = (list(clusters_unlabelled) if named and clusters_unlabelled is not None
                               else range(len(yl), len(yl) + len(fu)))
    if weight == "ppi_py":
        lam = tuned_weight(yl, fl, fu)
    elif weight == "least-variance":
        lam = least_variance_weight(yl, fl, fu)
    else:
        lam = float(weight)
    # each cluster's influence ψ_c = a_c − λ·b_c: a from the ratings, b from the panel's scores on both sides
    a = _influence(yl, lab)
    b = _influence(fl, lab).sub(_influence(fu, unl), fill_value=0.0)
    influence = a.sub(lam * b, fill_value=0.0)
    mean = float(np.mean(yl - lam * fl) + lam * np.mean(fu))
    return _interval(mean, influence, _clustered(lab, unl), alpha, named, _df(quantile, lab), lam)


def panel_mean(f: Sequence[float], clusters: Sequence[Hashable] | None = None, alpha: float = 0.05,
               quantile: Quantile = "t") -> Estimate:
    """The panel's own mean over every episode: what it says, not what people would (it misses by its bias)."""
    return people_mean(f, clusters, alpha, quantile)


def difference(a: Estimate, b: Estimate, alpha: float = 0.05) -> Estimate:
    """a − b, its variance from the difference of the two estimates' influences per shared cluster
    (estimates without named clusters are independent: their variances add)."""
    if a.named and b.named:
        influence = a.influence.sub(b.influence, fill_value=0.0)
    else:
        influence = pd.Series(np.concatenate([a.influence.to_numpy(), -b.influence.to_numpy()]))
    return _interval(a.mean - b.mean, influence, a.clustered or b.clustered, alpha, a.named and b.named, min(a.df, b.df))


def effective_ratings(people: Estimate, anchored: Estimate, n: int) -> float:
    """How many human ratings the people-only mean would need to be as precise as the anchored one."""
    if anchored.se <= 0:
        return float("inf")
    return n * (people.se / anchored.se) ** 2
