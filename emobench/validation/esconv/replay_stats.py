"""The figures of the ESConv replay (docs/validity.md, "Replay against ESConv"): the simulator's
turns set against the real seekers' at the same places, every CI from a bootstrap over chats.

Pure: rows in, numbers out. The tracker's readings (valence, embedding per text) and the
out-of-character test are handed in, so the statistics can be checked by hand.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.stats

from emobench.scoring.reliability import spearman_rho
from emobench.scoring.stats import wilson_interval
from emobench.validation.fidelity.compare import turn_words
from emobench.validation.fidelity.discriminator import discriminate

CI = 0.95
FAILED = "FailedESConv"


@dataclass(frozen=True)
class Row:
    """One replayed seeker turn: the person's words and the simulator's at the same place."""

    chat: str
    source: str
    real: str
    simulated: str | None  # None: no valid reply after the retries
    previous_reply: str  # the supporter's block just before: the out-of-character test's echo check
    feedback: int | None
    meter_change: float | None  # the simulator's meter change since the previous rated turn (rated turns only)
    leave: bool | None
    last: bool


@dataclass(frozen=True)
class ChatSummary:
    chat: str
    source: str
    meter_change: float | None  # last meter minus start; None when no turn was valid
    intensity_drop: int | None  # initial minus final intensity, when the survey has both


def _num(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or math.isnan(x) else round(float(x), digits) + 0.0


def proportion(k: int, n: int) -> dict[str, Any]:
    if n == 0:
        return {"k": 0, "n": 0, "rate": None, "lo": None, "hi": None}
    lo, hi = wilson_interval(k / n, n, CI)
    return {"k": k, "n": n, "rate": _num(k / n), "lo": _num(float(lo)), "hi": _num(float(hi))}


def chat_bootstrap(
    stat: Callable[[np.ndarray], float], chats: Sequence[str], n_boot: int, seed: int
) -> tuple[float | None, float | None]:
    """Percentile CI of stat(row indices) over resamples of whole chats (with replacement);
    resamples where the statistic is undefined are skipped."""
    by_chat: dict[str, list[int]] = {}
    for i, c in enumerate(chats):
        by_chat.setdefault(c, []).append(i)
    groups = [np.array(v) for v in by_chat.values()]
    if len(groups) < 2:
        return None, None
    rng = np.random.default_rng(seed)
    values = np.array([stat(np.concatenate([groups[j] for j in rng.integers(0, len(groups), len(groups))]))
                       for _ in range(n_boot)])
    values = values[~np.isnan(values)]
    if not values.size:
        return None, None
    lo, hi = np.quantile(values, [(1 - CI) / 2, (1 + CI) / 2])
    return _num(lo), _num(hi)


def _with_ci(stat: Callable[[np.ndarray], float], chats: Sequence[str], n_boot: int, seed: int) -> dict[str, Any]:
    value = stat(np.arange(len(chats))) if chats else math.nan
    lo, hi = chat_bootstrap(stat, chats, n_boot, seed) if chats else (None, None)
    return {"value": _num(value), "lo": lo, "hi": hi}


def rank_agreement(x: Sequence[float], y: Sequence[float], chats: Sequence[str], *, n_boot: int, seed: int) -> dict[str, Any]:
    """Spearman's rho and Kendall's tau-b of x against y, with bootstrap CIs over chats."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)

    def rho(i: np.ndarray) -> float:
        return spearman_rho(a[i], b[i])

    def tau(i: np.ndarray) -> float:
        if i.size < 3 or np.ptp(a[i]) == 0 or np.ptp(b[i]) == 0:
            return math.nan
        return float(scipy.stats.kendalltau(a[i], b[i], variant="b").statistic)

    return {"n": len(a), "n_chats": len(set(chats)), "spearman": _with_ci(rho, chats, n_boot, seed),
            "kendall_tau_b": _with_ci(tau, chats, n_boot, seed)}


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else math.nan


def question_rate(rows: Sequence[Row], *, n_boot: int, seed: int) -> dict[str, Any]:
    """Share of turns with a question mark on each side, over the places the simulator answered."""
    valid = [r for r in rows if r.simulated is not None]
    real = np.array(["?" in r.real for r in valid], dtype=float)
    sim = np.array(["?" in (r.simulated or "") for r in valid], dtype=float)
    diff = _with_ci(lambda i: _mean(sim[i]) - _mean(real[i]), [r.chat for r in valid], n_boot, seed)
    return {"real": proportion(int(real.sum()), len(valid)), "simulated": proportion(int(sim.sum()), len(valid)),
            "difference": diff}


def valence(rows: Sequence[Row], valences: dict[str, float], *, n_boot: int, seed: int) -> dict[str, Any]:
    valid = [r for r in rows if r.simulated is not None]
    real = np.array([valences[r.real] for r in valid], dtype=float)
    sim = np.array([valences[r.simulated or ""] for r in valid], dtype=float)
    chats = [r.chat for r in valid]
    return {
        "n": len(valid),
        "real_mean": _num(_mean(real)),
        "simulated_mean": _num(_mean(sim)),
        "paired_difference": _with_ci(lambda i: _mean(sim[i] - real[i]), chats, n_boot, seed),
        "spearman": _with_ci(lambda i: spearman_rho(real[i], sim[i]), chats, n_boot, seed),
    }


def meter_feedback(rows: Sequence[Row], *, n_boot: int, seed: int) -> dict[str, Any]:
    points = [r for r in rows if r.feedback is not None and r.meter_change is not None]
    out = rank_agreement([r.meter_change or 0.0 for r in points], [r.feedback or 0 for r in points],
                         [r.chat for r in points], n_boot=n_boot, seed=seed)
    sources = sorted({r.source for r in points})
    out["sources"] = sources
    out["label"] = "failed chats only" if sources == [FAILED] else None
    if not points:
        out["note"] = "no rated seeker turn (per-turn ratings exist in the original layout only)"
    return out


def meter_intensity(chats: Sequence[ChatSummary], *, n_boot: int, seed: int) -> dict[str, Any]:
    kept = [c for c in chats if c.meter_change is not None and c.intensity_drop is not None]
    return rank_agreement([c.meter_change or 0.0 for c in kept], [c.intensity_drop or 0 for c in kept],
                          [c.chat for c in kept], n_boot=n_boot, seed=seed)


def figures(
    rows: Sequence[Row], chats: Sequence[ChatSummary], valences: dict[str, float], embeddings: dict[str, np.ndarray],
    out_of_character: Callable[[str, str], bool], *, n_boot: int, seed: int,
) -> dict[str, Any]:
    """Every figure over these rows (one source, or all pooled)."""
    valid = [r for r in rows if r.simulated is not None]
    by_chat: dict[str, list[Row]] = {}
    for r in valid:
        by_chat.setdefault(r.chat, []).append(r)
    disc_rows = [(embeddings[r.real], 0, f"real|{r.chat}", r.chat) for r in valid]
    disc_rows += [(embeddings[r.simulated or ""], 1, f"simulated|{r.chat}", r.chat) for r in valid]
    if disc_rows:
        x, y, eps, groups = zip(*disc_rows, strict=True)
        disc = discriminate(np.vstack(x), np.array(y, dtype=np.int_), list(eps), list(groups), n_boot=n_boot, seed=seed)
    else:
        disc = {"auc": None, "lo": None, "hi": None, "n_turns": {"human": 0, "simulator": 0}, "n_folds": 0,
                "note": "no valid simulated turn"}
    went_on = [r for r in valid if not r.last]
    return {
        "n_chats": len({r.chat for r in rows}),
        "n_turns": len(rows),
        "invalid": proportion(len(rows) - len(valid), len(rows)),
        "discriminator": {"grouped_by": "chat", **disc},
        "turn_words": turn_words([[r.real for r in rs] for rs in by_chat.values()],
                                 [[r.simulated or "" for r in rs] for rs in by_chat.values()]),
        "question_rate": question_rate(rows, n_boot=n_boot, seed=seed),
        "valence": valence(rows, valences, n_boot=n_boot, seed=seed),
        "meter_feedback": meter_feedback(rows, n_boot=n_boot, seed=seed),
        "meter_intensity": meter_intensity(chats, n_boot=n_boot, seed=seed),
        "leave": proportion(sum(bool(r.leave) for r in went_on), len(went_on)),
        "out_of_character": {
            "simulated": proportion(sum(out_of_character(r.simulated or "", r.previous_reply) for r in valid), len(valid)),
            "real": proportion(sum(out_of_character(r.real, r.previous_reply) for r in valid), len(valid)),
        },
    }
