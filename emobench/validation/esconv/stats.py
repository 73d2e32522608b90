"""Rank agreement and AUC with 95% CIs from a bootstrap over chats, for the ESConv judge check
(docs/validity.md). A chat is the unit: its feedback points are resampled together."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.stats

from emobench.scoring.reliability import spearman_rho
from emobench.validation.agreement.stats import CI, invalid_share

Stat = Callable[[np.ndarray, np.ndarray], float]


def _round(x: float) -> float | None:
    return None if math.isnan(x) else round(float(x), 4)


def _rho(x: np.ndarray, y: np.ndarray) -> float:
    return spearman_rho(x, y)


def _tau(x: np.ndarray, y: np.ndarray) -> float:
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(scipy.stats.kendalltau(x, y, variant="b").statistic)


def _interval(values: list[float]) -> tuple[float | None, float | None]:
    kept = np.array([v for v in values if not math.isnan(v)])
    if not kept.size:
        return None, None
    lo, hi = np.quantile(kept, [(1 - CI) / 2, (1 + CI) / 2])
    return _round(lo), _round(hi)


def chat_draws(groups: Sequence[str], n_boot: int, seed: int) -> list[np.ndarray]:
    """Index arrays of n_boot resamples that draw whole chats (groups) with replacement."""
    members: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    blocks = [np.array(v) for v in members.values()]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(blocks), size=(n_boot, len(blocks)))
    return [np.concatenate([blocks[k] for k in row]) for row in picks]


def rank_agreement(
    truth: Sequence[float], score: Sequence[float | None], groups: Sequence[str], *, n_boot: int, seed: int
) -> dict[str, Any]:
    """Spearman's rho and Kendall's tau-b of score (None: invalid, left out) against truth."""
    valid = [i for i, s in enumerate(score) if s is not None]
    x = np.array([score[i] for i in valid], dtype=float)
    y = np.array([truth[i] for i in valid], dtype=float)
    kept = [groups[i] for i in valid]
    draws = chat_draws(kept, n_boot, seed) if len(set(kept)) >= 2 else []
    out: dict[str, Any] = {"n": len(truth), "n_valid": len(valid), "n_chats": len(set(kept)),
                           "invalid_share": invalid_share(len(truth) - len(valid), len(truth))}
    for name, stat in (("spearman", _rho), ("kendall", _tau)):
        lo, hi = _interval([stat(x[d], y[d]) for d in draws])
        out[name] = {"value": _round(stat(x, y)), "lo": lo, "hi": hi}
    return out


def _auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(a random positive scores above a random negative), ties counted as half."""
    if not pos.size or not neg.size:
        return math.nan
    ranks = scipy.stats.rankdata(np.concatenate([pos, neg]))
    return float((ranks[: pos.size].sum() - pos.size * (pos.size + 1) / 2) / (pos.size * neg.size))


def auc(score: Sequence[float | None], positive: Sequence[bool], *, n_boot: int, seed: int) -> dict[str, Any]:
    """AUC of a per-chat score for positive against negative chats; the bootstrap resamples the
    chats of each group within that group."""
    pos = np.array([s for s, p in zip(score, positive, strict=True) if p and s is not None], dtype=float)
    neg = np.array([s for s, p in zip(score, positive, strict=True) if not p and s is not None], dtype=float)
    out: dict[str, Any] = {"n_positive": int(pos.size), "n_negative": int(neg.size), "value": _round(_auc(pos, neg)),
                           "lo": None, "hi": None}
    if pos.size >= 2 and neg.size >= 2:
        rng = np.random.default_rng(seed)
        values = [_auc(pos[rng.integers(0, pos.size, pos.size)], neg[rng.integers(0, neg.size, neg.size)])
                  for _ in range(n_boot)]
        out["lo"], out["hi"] = _interval(values)
    return out
