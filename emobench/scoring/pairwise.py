"""Bradley-Terry ratings from pairwise verdicts, with case-resampled bootstrap CIs (docs/method.md §5.5).

Model: P(i beats j) = s_i / (s_i + s_j), fitted by maximum likelihood on theta = ln s.
Regulariser: every subject also plays PRIOR_GAMES virtual games, half won and half lost,
against a fixed reference of strength 1. It is the same for every subject (symmetric), keeps
a subject that wins or loses everything finite, and makes the log-posterior strictly concave,
so Newton's method with a backtracking line search converges to the unique maximum.
"""

from __future__ import annotations

import math
import warnings
from typing import Final

import numpy as np
import pandas as pd

PRIOR_GAMES: Final = 1.0
ELO_SCALE: Final = 400.0 / math.log(10.0)  # rating = 400 log10(s) = ELO_SCALE * theta
ELO_MEAN: Final = 1000.0
COLUMNS: Final = ("case_id", "subject_a", "subject_b", "winner")
_TOL: Final = 1e-9  # on the Newton step in theta; 1e-9 theta is ~2e-7 rating points
_MAX_ITER: Final = 100


def _prepare(df: pd.DataFrame) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Subjects (sorted), case codes per verdict, and (winner, loser) subject indices per verdict."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"bradley_terry: missing columns {missing}")
    rows = df.loc[df["winner"].notna(), list(COLUMNS)]
    if rows[list(COLUMNS[:3])].isna().any(axis=None):
        raise ValueError("bradley_terry: case_id, subject_a and subject_b must all be present")
    if rows.empty:
        raise ValueError("bradley_terry: no valid comparisons")
    a, b, w = (rows[c].astype(str).to_numpy() for c in ("subject_a", "subject_b", "winner"))
    if np.any(a == b):
        raise ValueError("bradley_terry: a subject compared with itself")
    stray = (w != a) & (w != b)
    if stray.any():
        raise ValueError(f"bradley_terry: winner is neither subject in {int(stray.sum())} row(s)")
    subjects = sorted(set(a) | set(b))
    index = {s: i for i, s in enumerate(subjects)}
    loser = np.where(w == a, b, a)
    pairs = np.array([[index[x], index[y]] for x, y in zip(w, loser, strict=True)], dtype=np.intp)
    cases = pd.factorize(rows["case_id"])[0]
    return subjects, cases, pairs


def _win_counts(pairs: np.ndarray, k: int) -> np.ndarray:
    """W[i, j] = number of times i beat j."""
    wins = np.zeros((k, k))
    np.add.at(wins, (pairs[:, 0], pairs[:, 1]), 1.0)
    return wins


def _log_posterior(theta: np.ndarray, wins: np.ndarray) -> np.ndarray:
    """Log-posterior per fit; theta is (..., k) and wins (..., k, k)."""
    diff = theta[..., :, None] - theta[..., None, :]
    data = -np.sum(wins * np.logaddexp(0.0, -diff), axis=(-2, -1))  # sum W_ij ln sigma(theta_i - theta_j)
    prior = -PRIOR_GAMES / 2.0 * np.sum(np.logaddexp(0.0, -theta) + np.logaddexp(0.0, theta), axis=-1)
    return np.asarray(data + prior)


def _fit_theta(wins: np.ndarray) -> np.ndarray:
    """Maximum a posteriori log-strengths for one (k, k) or a stack (b, k, k) of win-count matrices.

    A subject without games in a fit is pinned at theta = 0 by the prior and does not affect
    the others, which lets bootstrap replicates share one stacked solve.
    """
    games = wins + np.swapaxes(wins, -1, -2)
    diagonal = np.arange(wins.shape[-1])
    theta = np.zeros(wins.shape[:-1])
    current = _log_posterior(theta, wins)
    for _ in range(_MAX_ITER):
        p = 1.0 / (1.0 + np.exp(theta[..., None, :] - theta[..., :, None]))  # P(i beats j)
        p_ref = 1.0 / (1.0 + np.exp(-theta))  # P(i beats the reference)
        grad = wins.sum(axis=-1) - (games * p).sum(axis=-1) + PRIOR_GAMES * (0.5 - p_ref)
        info = games * p * np.swapaxes(p, -1, -2)
        neg_hess = -info
        neg_hess[..., diagonal, diagonal] = info.sum(axis=-1) + PRIOR_GAMES * p_ref * (1.0 - p_ref)
        step = np.linalg.solve(neg_hess, grad[..., None])[..., 0]
        # Backtracking keeps every fit ascending; a full Newton step is nearly always accepted.
        # The slack stops converged fits from halving forever over rounding noise.
        slack = 1e-12 * (1.0 + np.abs(current))
        scale = np.ones(current.shape)
        for _ in range(30):
            candidate = theta + scale[..., None] * step
            value = _log_posterior(candidate, wins)
            worse = value < current - slack
            if not worse.any():
                break
            scale = np.where(worse, scale / 2.0, scale)
        theta, current = candidate, value
        if np.max(np.abs(scale[..., None] * step)) < _TOL:
            break
    return theta


def _ratings(theta: np.ndarray, present: np.ndarray | None = None) -> np.ndarray:
    """Elo-like ratings with mean 1000 over the subjects present in each fit (nan for the rest)."""
    rating = ELO_SCALE * theta
    if present is not None:
        rating = np.where(present, rating, np.nan)
    return rating - np.nanmean(rating, axis=-1, keepdims=True) + ELO_MEAN


def bradley_terry(df: pd.DataFrame) -> pd.Series:
    """Bradley-Terry ratings on an Elo-like scale (400 log10 strength), mean 1000, by subject.

    Rows without a winner (invalid verdicts) are left out; there are no ties by design.
    Sorted by rating, best first.
    """
    subjects, _, pairs = _prepare(df)
    theta = _fit_theta(_win_counts(pairs, len(subjects)))
    ratings = pd.Series(_ratings(theta), index=pd.Index(subjects, name="subject"), name="rating")
    return ratings.sort_values(ascending=False, kind="stable")


def bradley_terry_ci(df: pd.DataFrame, n_boot: int = 1000, seed: int = 0, ci: float = 0.95) -> pd.DataFrame:
    """Ratings with percentile-bootstrap intervals, resampling whole cases.

    All comparisons of a case move together. A subject absent from a resample has no rating
    there: that replicate is normalised to mean 1000 over the subjects it contains and skipped
    for the absent one. Columns: subject, rating, lo, hi; best first.
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if not 0.0 < ci < 1.0:
        raise ValueError(f"ci must be in (0, 1), got {ci}")
    subjects, cases, pairs = _prepare(df)
    k, n_cases = len(subjects), int(cases.max()) + 1
    point = _ratings(_fit_theta(_win_counts(pairs, k)))
    # Per-case win matrices, so a replicate is a weighted sum of them.
    per_case = np.zeros((n_cases, k, k))
    np.add.at(per_case, (cases, pairs[:, 0], pairs[:, 1]), 1.0)
    rng = np.random.default_rng(seed)
    counts = np.stack([np.bincount(rng.integers(0, n_cases, size=n_cases), minlength=n_cases) for _ in range(n_boot)])
    wins = np.tensordot(counts.astype(float), per_case, axes=1)  # (n_boot, k, k)
    present = (wins + np.swapaxes(wins, -1, -2)).sum(axis=-1) > 0
    draws = _ratings(_fit_theta(wins), present)
    tail = (1.0 - ci) / 2.0 * 100.0
    with warnings.catch_warnings():
        # A subject missing from every replicate (tiny n_boot) gets nan bounds, not a warning.
        warnings.simplefilter("ignore", RuntimeWarning)
        lo = np.nanpercentile(draws, tail, axis=0)
        hi = np.nanpercentile(draws, 100.0 - tail, axis=0)
    out = pd.DataFrame({"subject": subjects, "rating": point, "lo": lo, "hi": hi})
    return out.sort_values("rating", ascending=False, kind="stable").reset_index(drop=True)
