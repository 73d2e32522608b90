"""How easily simulated user turns are told from people's (docs/validity.md, "Simulator fidelity").

A logistic regression on the tracker's sentence embeddings of each user turn, cross-validated
so that no group (a matched case and subject, else an episode) has turns in both the training
and the test folds; its out-of-fold scores give an AUC (0.5: indistinguishable, 1: every
simulated turn scores above every human one) with a bootstrap CI over episodes.

The classifier is an L2-penalised logistic regression fitted with scipy.optimize (L-BFGS)
rather than scikit-learn: that is all of scikit-learn this needs, and scikit-learn is not
installed with emobench (it would be a new dependency of some 40 MB for some 30 lines).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.optimize
import scipy.special
import scipy.stats

FloatArray = npt.NDArray[np.float64]
FOLDS = 5
L2 = 1.0  # penalty on the weights (not the intercept): sum of log losses + L2/2 * |w|^2


def auc(scores: Sequence[float] | FloatArray, labels: Sequence[int] | npt.NDArray[np.int_]) -> float:
    """P(score of a label-1 item > score of a label-0 item), ties counting half (Mann–Whitney)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        raise ValueError("auc needs both labels")
    ranks = scipy.stats.rankdata(s)
    return float((ranks[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def fit_logistic(x: FloatArray, y: npt.NDArray[np.int_], l2: float = L2) -> tuple[FloatArray, float]:
    """Weights and intercept of an L2-penalised logistic regression (labels 0/1)."""
    sign = 2.0 * np.asarray(y, dtype=np.float64) - 1.0

    def loss(theta: FloatArray) -> tuple[float, FloatArray]:
        w, b = theta[:-1], theta[-1]
        margin = sign * (x @ w + b)
        value = np.logaddexp(0.0, -margin).sum() + 0.5 * l2 * (w @ w)
        push = -sign * scipy.special.expit(-margin)  # d loss / d z per row
        grad = np.append(x.T @ push + l2 * w, push.sum())
        return float(value), grad

    start = np.zeros(x.shape[1] + 1)
    result = scipy.optimize.minimize(loss, start, jac=True, method="L-BFGS-B")
    return result.x[:-1], float(result.x[-1])


def assign_folds(groups: Sequence[str], labels: npt.NDArray[np.int_], k: int, seed: int) -> npt.NDArray[np.int_]:
    """A fold per row: whole groups go to one fold; the groups of each kind (human only,
    simulated only, both) are dealt out in one shuffled order, so every kind spreads over the
    folds. Nothing depends on which label is which: swapping labels leaves the folds as they are."""
    names = sorted(set(groups))
    rank = {names[j]: pos for pos, j in enumerate(np.random.default_rng(seed).permutation(len(names)))}
    kinds: dict[str, set[int]] = {}
    for g, label in zip(groups, labels, strict=True):
        kinds.setdefault(g, set()).add(int(label))
    fold_of: dict[str, int] = {}
    for kind in {frozenset(v) for v in kinds.values()}:
        mine = sorted((g for g in names if kinds[g] == kind), key=rank.__getitem__)
        fold_of |= {g: i % k for i, g in enumerate(mine)}
    return np.array([fold_of[g] for g in groups], dtype=np.int_)


def out_of_fold_scores(x: FloatArray, y: npt.NDArray[np.int_], folds: npt.NDArray[np.int_]) -> FloatArray:
    scores = np.empty(len(y))
    for fold in np.unique(folds):
        test = folds == fold
        w, b = fit_logistic(x[~test], y[~test])
        scores[test] = x[test] @ w + b
    return scores


def _bootstrap_auc(scores: FloatArray, y: npt.NDArray[np.int_], episodes: Sequence[str], n_boot: int, seed: int) -> FloatArray:
    """AUC over resamples of whole episodes, drawn with replacement within each label."""
    rows: dict[str, list[int]] = {}
    for i, e in enumerate(episodes):
        rows.setdefault(e, []).append(i)
    by_label = [[np.array(r) for e, r in rows.items() if y[r[0]] == label] for label in (0, 1)]
    rng = np.random.default_rng(seed)
    out = np.empty(n_boot)
    for b in range(n_boot):
        picked = np.concatenate([np.concatenate([side[i] for i in rng.integers(0, len(side), len(side))]) for side in by_label])
        out[b] = auc(scores[picked], y[picked])
    return out


def discriminate(
    x: FloatArray, y: npt.NDArray[np.int_], episodes: Sequence[str], groups: Sequence[str],
    *, folds: int = FOLDS, n_boot: int = 2000, seed: int = 0,
) -> dict[str, Any]:
    """The cross-validated AUC of telling label 1 (simulated) from label 0 (human) turns.

    `episodes`: each row's episode (the bootstrap's unit); `groups`: each row's CV group, a
    union of whole episodes in which both labels appear, or each row's episode."""
    y = np.asarray(y, dtype=np.int_)
    n = {"human": int((y == 0).sum()), "simulator": int((y == 1).sum())}
    base: dict[str, Any] = {"auc": None, "lo": None, "hi": None, "n_turns": n, "n_folds": 0}
    per_label = [len({g for g, v in zip(groups, y, strict=True) if v == label}) for label in (0, 1)]
    k = min(folds, *per_label)
    if k < 2:
        return base | {"note": "too few episodes to cross-validate (two or more per side needed)"}
    fold = assign_folds(groups, y, k, seed)
    scores = out_of_fold_scores(np.asarray(x, dtype=np.float64), y, fold)
    boot = _bootstrap_auc(scores, y, episodes, n_boot, seed)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return base | {"auc": round(auc(scores, y), 4), "lo": round(float(lo), 4), "hi": round(float(hi), 4), "n_folds": k}
