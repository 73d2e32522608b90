"""Simulator fidelity (docs/validity.md): episodes people played as the user against episodes
the simulator played on the same cases with the same subjects.

Pure statistics over lists of per-episode values, and `fidelity_report`, which reads the two
runs (fidelity.runs), runs the tracker over the user turns and puts the statistics together.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.stats

from emobench.validation.fidelity.discriminator import discriminate
from emobench.validation.fidelity.runs import ITEMS, EpisodeView, Matched, read_matched

LEFT = "user_left"  # the stop reason of a user who left
MIN_PER_TURN = 2  # episodes each side needs at a turn for that turn to count in a path distance
# Two samples whose pooled items deal into the two sides' sizes in at most this many ways get an
# exact p (every deal, a few ms); more, and the asymptotic one, which is close by then.
EXACT_SPLITS = 20_000


def _num(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or math.isnan(x) else round(float(x), digits) + 0.0  # + 0.0: no -0.0


def _padded(paths: Sequence[Sequence[float]]) -> np.ndarray:
    """Episodes x turns, NaN past an episode's end."""
    width = max((len(p) for p in paths), default=0)
    out = np.full((len(paths), width), np.nan)
    for i, p in enumerate(paths):
        out[i, : len(p)] = p
    return out


def per_turn(paths: Sequence[Sequence[float]]) -> list[dict[str, Any]]:
    """Per turn (1-based): how many episodes reached it, their mean and its 95% t-interval."""
    rows = []
    for t, column in enumerate(_padded(paths).T, start=1):
        values = column[~np.isnan(column)]
        n, mean = len(values), float(values.mean())
        half = float(scipy.stats.t.ppf(0.975, n - 1) * values.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
        rows.append({"turn": t, "n": n, "mean": _num(mean), "lo": _num(mean - half), "hi": _num(mean + half)})
    return rows


def _gaps(human: np.ndarray, simulator: np.ndarray, turns: int) -> tuple[float, float]:
    """Mean over the first `turns` turns of |human mean - simulator mean|, and of the signed difference."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a resample can leave a turn empty
        diff = np.nanmean(human[:, :turns], axis=0) - np.nanmean(simulator[:, :turns], axis=0)
    return float(np.nanmean(np.abs(diff))), float(np.nanmean(diff))


def path_distance(
    human: Sequence[Sequence[float]], simulator: Sequence[Sequence[float]], *, n_boot: int, seed: int
) -> dict[str, Any]:
    """How far apart the two sides' mean paths run, over the turns both sides reach in at least
    MIN_PER_TURN episodes: the mean absolute gap and the mean signed difference (human -
    simulator) between the per-turn means, each with a 95% percentile bootstrap CI (episodes
    resampled within each side)."""
    h, s = _padded(human), _padded(simulator)
    # Paths have no holes, so the turns reached by enough episodes are the first few.
    turns = sum(1 for t in range(min(h.shape[1], s.shape[1]))
                if (~np.isnan(h[:, t])).sum() >= MIN_PER_TURN and (~np.isnan(s[:, t])).sum() >= MIN_PER_TURN)
    if turns == 0:
        return {"turns": 0, "gap": None, "gap_lo": None, "gap_hi": None, "diff": None, "diff_lo": None, "diff_hi": None}
    gap, diff = _gaps(h, s, turns)
    rng = np.random.default_rng(seed)
    boot = np.array([_gaps(h[rng.integers(0, len(h), len(h))], s[rng.integers(0, len(s), len(s))], turns)
                     for _ in range(n_boot)])
    (gap_lo, diff_lo), (gap_hi, diff_hi) = np.nanpercentile(boot, 2.5, axis=0), np.nanpercentile(boot, 97.5, axis=0)
    return {"turns": turns, "gap": _num(gap), "gap_lo": _num(gap_lo), "gap_hi": _num(gap_hi),
            "diff": _num(diff), "diff_lo": _num(diff_lo), "diff_hi": _num(diff_hi)}


def compare_paths(
    human: Sequence[Sequence[float]], simulator: Sequence[Sequence[float]], *, n_boot: int, seed: int
) -> dict[str, Any]:
    return {"human": per_turn(human), "simulator": per_turn(simulator),
            "distance": path_distance(human, simulator, n_boot=n_boot, seed=seed)}


def _spread(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "mean": None, "median": None, "q1": None, "q3": None}
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return {"n": len(values), "mean": _num(float(np.mean(values)), 2), "median": _num(median, 2),
            "q1": _num(q1, 2), "q3": _num(q3, 2)}


def _exact_split_p(items: np.ndarray, n_first: int, stat: Any) -> float | None:
    """Two-sided exact p of a two-sample test: items (pooled, the first side's n_first first, one
    row of features each) are dealt into the two sides' sizes in every way, and p is the share
    of deals whose statistic, of the first side's feature sums, reaches the observed one. None
    when the deals number over EXACT_SPLITS."""
    if math.comb(len(items), n_first) > EXACT_SPLITS:
        return None
    picks = np.array(list(itertools.combinations(range(len(items)), n_first)), dtype=np.intp)
    values = stat(items[picks].sum(axis=1))
    observed = float(stat(items[:n_first].sum(axis=0, keepdims=True))[0])
    return float(np.mean(values >= observed - 1e-9 * max(abs(observed), 1.0)))


def _mannwhitney_p(first: Sequence[float], second: Sequence[float]) -> float:
    """Mann–Whitney's two-sided p: exact over every deal where they are few (scipy's own exact p
    refuses ties and falls back to its normal approximation), else scipy's."""
    ranks = scipy.stats.rankdata([*first, *second])
    centre = len(first) * (len(ranks) + 1) / 2  # the first side's rank sum under the null
    exact = _exact_split_p(ranks[:, None], len(first), lambda sums: np.abs(sums[:, 0] - centre))
    return exact if exact is not None else float(scipy.stats.mannwhitneyu(first, second, alternative="two-sided").pvalue)


def turn_words(human: Sequence[Sequence[str]], simulator: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Words per user turn. KS compares the two distributions over turns (turns of one episode are
    not independent, so its p-value is optimistic); Mann–Whitney compares the episodes' mean
    lengths, one value per episode."""
    words = [[[len(m.split()) for m in episode] for episode in side] for side in (human, simulator)]
    turns = [[w for episode in side for w in episode] for side in words]
    means = [[float(np.mean(e)) for e in side if e] for side in words]
    out: dict[str, Any] = {"human": _spread(turns[0]), "simulator": _spread(turns[1]),
                           "ks": None, "ks_p": None, "mannwhitney_u": None, "mannwhitney_p": None}
    if turns[0] and turns[1]:
        ks = scipy.stats.ks_2samp(turns[0], turns[1])
        out |= {"ks": _num(ks.statistic), "ks_p": _num(ks.pvalue, 6)}
    if means[0] and means[1]:
        mw = scipy.stats.mannwhitneyu(means[0], means[1], alternative="two-sided")
        out |= {"mannwhitney_u": _num(mw.statistic, 2), "mannwhitney_p": _num(_mannwhitney_p(*means), 6),
                "episodes": {"human": len(means[0]), "simulator": len(means[1])}}
    return out


def _chi2(table: list[list[int]]) -> float | None:
    """Chi-square p of a sides x categories table, over the categories either side used: exact
    (every deal of the items into the two sides) where the deals are few, else asymptotic; None
    when fewer than two categories were used."""
    kept = np.array([col for col in zip(*table, strict=True) if sum(col) > 0]).T
    if kept.shape[1] < 2:
        return None
    totals, n_first = kept.sum(axis=0), int(kept[0].sum())
    expected = np.outer([n_first, totals.sum() - n_first], totals) / totals.sum()

    def statistic(first: np.ndarray) -> np.ndarray:  # Pearson's X², uncorrected, per deal
        return (((first - expected[0]) ** 2 / expected[0]) + ((totals - first - expected[1]) ** 2 / expected[1])).sum(axis=1)

    items = np.vstack([np.repeat(np.eye(kept.shape[1]), kept[side], axis=0) for side in (0, 1)])
    exact = _exact_split_p(items, n_first, statistic)
    return _num(exact if exact is not None else float(scipy.stats.chi2_contingency(kept).pvalue), 6)


def stops(human: Sequence[str], simulator: Sequence[str]) -> dict[str, Any]:
    """Stop reasons per side; the leave rate with Fisher's exact test; chi-square over all reasons."""
    counts = [Counter(human), Counter(simulator)]
    reasons = sorted(set(counts[0]) | set(counts[1]))
    left = [[c[LEFT], sum(c.values()) - c[LEFT]] for c in counts]
    return {
        "reasons": {r: {"human": counts[0][r], "simulator": counts[1][r]} for r in reasons},
        "leave_rate": {"human": _num(left[0][0] / len(human)), "simulator": _num(left[1][0] / len(simulator))},
        "leave_fisher_p": _num(float(scipy.stats.fisher_exact(left).pvalue), 6),
        "reasons_chi2_p": _chi2([[c[r] for r in reasons] for c in counts]),
    }


def judge_levels(human: Sequence[dict[str, int]], simulator: Sequence[dict[str, int]]) -> dict[str, Any]:
    """Per MDEP item (axis x progress/regression): how many judged turns the panel put at each
    level 0, 1, 2 on each side, and a chi-square p of the two distributions."""
    out = {}
    for item in ITEMS:
        table = [[sum(1 for turn in side if turn[item] == level) for level in (0, 1, 2)] for side in (human, simulator)]
        out[item] = {"human": table[0], "simulator": table[1], "chi2_p": _chi2(table)}
    return out


def _tracker_readings(texts: set[str]) -> tuple[dict[str, float], dict[str, np.ndarray], str]:
    """Valence and sentence embedding of each text, from the bundled affect tracker."""
    from emobench.trackers.affect import default_tracker

    tracker = default_tracker()
    ordered = sorted(texts)
    valences = {t: r.valence for t, r in zip(ordered, tracker.read(ordered), strict=True)}
    embeddings = dict(zip(ordered, tracker.embed(ordered).astype(np.float64), strict=True)) if ordered else {}
    return valences, embeddings, tracker.version


def discriminator_inputs(
    matched: Matched, embeddings: dict[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, list[str], list[str], str]:
    """Rows (one per user move), labels (1: simulated), episodes and CV groups. Groups are the
    matched (case, subject) pairs when there are two or more, so the classifier is always tested
    on cases it did not train on; else each episode is its own group."""
    episodes = [e for e in matched.human + matched.simulator if e.moves]
    by_pair = len(matched.pairs) >= 2
    rows = [(embeddings[m], int(e.side == "simulator"), f"{e.side}|{e.key}", "|".join(e.pair) if by_pair else f"{e.side}|{e.key}")
            for e in episodes for m in e.moves]
    if not rows:
        return np.zeros((0, 0)), np.zeros(0, dtype=np.int_), [], [], "episode"
    x, y, eps, groups = zip(*rows, strict=True)
    return np.vstack(x), np.array(y, dtype=np.int_), list(eps), list(groups), "case and subject" if by_pair else "episode"


def fidelity_report(human_run: Path, simulator_run: Path, *, n_boot: int, seed: int) -> dict[str, Any]:
    """The fidelity block of validity.json."""
    matched = read_matched(human_run, simulator_run)
    sides: list[list[EpisodeView]] = [matched.human, matched.simulator]
    valences, embeddings, tracker = _tracker_readings({m for side in sides for e in side for m in (*e.messages, *e.moves)})
    x, y, eps, groups, grouped_by = discriminator_inputs(matched, embeddings)
    both = len(set(y.tolist())) == 2
    disc = discriminate(x, y, eps, groups, n_boot=n_boot, seed=seed) if both else {
        "auc": None, "lo": None, "hi": None, "n_folds": 0, "note": "one side has no user turn after the opening",
        "n_turns": {"human": int((y == 0).sum()), "simulator": int((y == 1).sum())}}
    return {
        "human_run": str(human_run),
        "simulator_run": str(simulator_run),
        "human_users": matched.human_users,
        "simulator_user": matched.simulator_user,
        "matched": {"pairs": len(matched.pairs), "cases": sorted({c for c, _ in matched.pairs}),
                    "subjects": sorted({s for _, s in matched.pairs}),
                    "human_episodes": len(matched.human), "simulator_episodes": len(matched.simulator),
                    "unmatched_human": matched.unmatched_human, "unmatched_simulator": matched.unmatched_simulator},
        "meter": compare_paths(*[[e.meters for e in side] for side in sides], n_boot=n_boot, seed=seed),
        "valence": {"tracker": tracker, **compare_paths(*[[[valences[m] for m in e.messages] for e in side] for side in sides],
                                                        n_boot=n_boot, seed=seed)},
        "turn_words": turn_words(*[[e.moves for e in side] for side in sides]),
        "stops": stops(*[[e.stop_reason for e in side] for side in sides]),
        "judge_levels": judge_levels(*[[lv for e in side for lv in e.levels] for side in sides]),
        "discriminator": {"embedding": tracker.split("/")[0], "grouped_by": grouped_by, **disc},
        "n_boot": n_boot,
        "seed": seed,
    }
