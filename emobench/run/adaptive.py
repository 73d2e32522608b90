"""Adaptive runs (docs/adaptive.md): play the cases in a seeded random order, in waves, and stop
once the question asked with `--stop-when` is settled.

After each wave every subject's mean EPM-Q over the split's cases, and every pair's mean paired
difference, get an anytime-valid confidence sequence (emobench.scoring.confseq: the finite case
set sampled without replacement). Anytime-valid means the run may stop at a time chosen from
the data and the interval still holds; a bootstrap interval would not. The runner asks this
module which cases each wave holds and, after each, whether to stop; the gate's sequential mode
(emobench.gate.sequential) answers the same two questions its own way.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Protocol, TypeVar

from emobench.config import Price, RunConfig
from emobench.errors import InputError
from emobench.profiles import load_profile
from emobench.records import EpisodeJudgement, PairwiseCall
from emobench.registry import Registry
from emobench.run.stop_spec import FLAG, CallBudget, CostBudget, HalfWidth, PairResolved, PairsResolved, StopRule
from emobench.rundir import RunDir, read_records
from emobench.scoring.confseq import SequenceInterval, mean_sequence
from emobench.scoring.episode_scores import score_episode
from emobench.scoring.replay import rejudged
from emobench.scoring.validity import REFERENCE_PREFIX

ALPHA = 0.05
T = TypeVar("T")
ORDER_SEED = 0  # every adaptive run of a split plays its cases in the same order
# The median pair of EMPA's 16 models was resolved after this share of the cases (docs/adaptive.md,
# "Cases needed per pair"): what `run --dry-run` assumes an adaptive comparison plays.
MEDIAN_CASE_SHARE = 0.50


Cell = tuple[str, int]  # (case id, seed): what one episode of each subject plays


class Stopper(Protocol):
    """What the runner asks of an adaptive run: its waves of the grid's (case, seed) cells, and
    after each wave (given every cell played so far, in order) whether to stop."""

    def waves(self, cells: Sequence[Cell]) -> list[list[Cell]]: ...

    def after_wave(self, rd: RunDir, played: Sequence[Cell]) -> bool: ...

    def record(self) -> dict[str, Any]: ...


def case_order(case_ids: Sequence[str], seed: int = ORDER_SEED) -> list[str]:
    """A seeded uniformly random order that depends on each case's id alone: a subset (the
    gate's baseline cases) is played in the order the whole split would be. Uniform, not
    stratified by category: the sequence's guarantee needs each next case to be a uniform
    draw from those not yet played."""
    return sorted(case_ids, key=lambda c: hashlib.blake2b(f"{seed}|{c}".encode(), digest_size=8).digest())


def cell_order(cells: Sequence[Cell], seed: int) -> list[Cell]:
    """The same for (case, seed) cells: the sequential gate's unit."""
    return sorted(cells, key=lambda c: hashlib.blake2b(f"{seed}|{c[0]}|{c[1]}".encode(), digest_size=8).digest())


def in_waves(ordered: Sequence[T], size: int) -> list[list[T]]:
    return [list(ordered[i:i + size]) for i in range(0, len(ordered), size)]


def default_wave(population: int) -> int:
    """Cases per wave: a tenth of the split. Looking costs the sequence nothing (it holds at every
    n), and a wave is played whole, so the run plays at most one wave past the point where it could
    have stopped: a tenth bounds that at a tenth of the grid's calls. Smaller waves save more and
    take longer (a wave smaller than the concurrency leaves slots idle); --wave chooses."""
    return max(1, math.ceil(population / 10))


def epmq_range(profile: str, source: str = FLAG) -> tuple[float, float]:
    """EPM-Q's range under a scoring profile; the sequences need a bounded one."""
    if not load_profile(profile).indices.cap_at_100:
        raise InputError(source, "", f"the scoring profile {profile!r} does not bound EPM-Q (indices may pass 100), "
                         "so no confidence sequence holds; use the emobench profile")
    return 0.0, 100.0


def cell_values(rd: RunDir, registry: Registry, cells: set[Cell], profile: str, min_turns: int,
                metric: str = "epmq") -> dict[str, dict[Cell, float]]:
    """subject -> (case, seed) -> the metric of that episode (unscored ones left out), for the given
    cells, as finalize would score them (the affect tracker plays no part in EPM-Q)."""
    judgements = {j.key: j for j in read_records(rd.judgements, EpisodeJudgement)}
    rules = load_profile(profile).engine
    out: dict[str, dict[Cell, float]] = defaultdict(dict)
    for episode in rd.read_episodes():
        if (episode.case_id, episode.seed) not in cells:
            continue
        judgement = judgements.get(episode.key)
        if judgement is not None and judgement.mdep is not None:
            episode = rejudged(episode, judgement.mdep, min_turns, rules)
        value = score_episode(episode, registry.case(episode.case_id), rd.path.name, judgement, None, profile)[metric]
        if value is not None:
            out[episode.subject][(episode.case_id, episode.seed)] = float(value)
    return out


def case_values(rd: RunDir, registry: Registry, cells: set[Cell], profile: str, min_turns: int,
                metric: str = "epmq") -> dict[str, dict[str, float]]:
    """subject -> case -> the mean over its seeds played of the metric."""
    out: dict[str, dict[str, float]] = {}
    for subject, values in cell_values(rd, registry, cells, profile, min_turns, metric).items():
        by_case: dict[str, list[float]] = defaultdict(list)
        for (case, _), value in values.items():
            by_case[case].append(value)
        out[subject] = {c: sum(v) / len(v) for c, v in by_case.items()}
    return out


def spent(rd: RunDir, prices: dict[str, Price], cells: set[Cell]) -> tuple[int, float]:
    """Live model calls and their cost on the given cells: the episodes', their judgements' and the
    pairwise judge's, not answered from the response cache, and not a scripted subject's reply
    (no model behind it). Only those cells, so that a run resumed with more on disk than its
    waves reached does not count the rest (a pairwise call recorded without its cell counts)."""
    calls, cost = 0, 0.0
    records = [e.calls for e in rd.read_episodes() if (e.case_id, e.seed) in cells]
    for j in read_records(rd.judgements, EpisodeJudgement):
        _, case, seed = j.key.rsplit("|", 2)
        if (case, int(seed)) in cells:
            records.append(j.calls)
    records.append([c for c in read_records(rd.pairwise_calls, PairwiseCall)
                    if c.case_id is None or (c.case_id, c.episode_seed) in cells])
    for call in (c for group in records for c in group if not c.cached and not c.model.startswith(REFERENCE_PREFIX)):
        calls += 1
        price = prices.get(call.label)
        if price is not None:
            cost += price.cost_usd(call.prompt_tokens, call.completion_tokens, call.cached_prompt_tokens,
                                   call.cache_write_tokens, call.batched)
    return calls, cost


def width_text(width: float) -> str:
    """A half-width for people: the float noise of a zero-width interval (8.88e-16) reads as 0."""
    return f"{round(width, 9) + 0.0:.3g}"


def interval_record(interval: SequenceInterval, mean: float) -> dict[str, Any]:
    return {"mean": mean, "lower": interval.lower, "upper": interval.upper, "n": interval.n,
            "population": interval.population, "alpha": interval.alpha}


@dataclass
class AdaptiveRun:
    """The Stopper of `run --stop-when`."""

    rules: list[StopRule]
    subjects: list[str]
    population: int
    wave: int
    registry: Registry
    profile: str
    min_turns: int
    prices: dict[str, Price]
    state: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def for_run(cls, rules: list[StopRule], config: RunConfig, registry: Registry, population: int,
                wave: int | None) -> AdaptiveRun:
        subjects = [s.name for s in config.subjects]
        if population < 1:
            raise InputError(FLAG, "", "the run has no case to play")
        for rule in rules:
            for label in (rule.a, rule.b) if isinstance(rule, PairResolved) else ():
                if label not in subjects:
                    raise InputError(FLAG, "", f"{rule}: {label!r} is not a subject of this run ({', '.join(subjects)})")
            if isinstance(rule, CostBudget) and not config.prices():
                raise InputError(FLAG, "", f"{rule}: no role of this run has a price (see docs/ci.md, prices)")
        if any(isinstance(r, PairsResolved) for r in rules) and len(subjects) < 2:
            raise InputError(FLAG, "", "pairs-resolved: the run has one subject, so no pair")
        epmq_range(config.scoring_profile)
        size = wave or default_wave(population)
        return cls(rules, subjects, population, size, registry, config.scoring_profile, config.min_turns,
                   config.prices())

    def waves(self, cells: Sequence[Cell]) -> list[list[Cell]]:
        """Waves of cases (every seed of each): the unit is the case, a subject's value its mean over seeds."""
        seeds: dict[str, list[int]] = defaultdict(list)
        for case, seed in cells:
            seeds[case].append(seed)
        return [[(c, s) for c in wave for s in seeds[c]] for wave in in_waves(case_order(list(seeds)), self.wave)]

    def after_wave(self, rd: RunDir, cells: Sequence[Cell]) -> bool:
        lo, hi = epmq_range(self.profile)
        played = list(dict.fromkeys(case for case, _ in cells))
        values = case_values(rd, self.registry, set(cells), self.profile, self.min_turns)
        subjects = {s: _sequence(played, values.get(s, {}), None, lo, hi, self.population) for s in self.subjects}
        pairs = {(a, b): _sequence(played, values.get(a, {}), values.get(b, {}), lo - hi, hi - lo, self.population)
                 for a, b in combinations(self.subjects, 2)}
        calls, cost = spent(rd, self.prices, set(cells))
        per_case = len(played) and 1 / len(played)
        reasons = [why for rule in self.rules
                   if (why := self._holds(rule, subjects, pairs, calls * per_case * self.wave + calls,
                                          cost * per_case * self.wave + cost))]
        self.state = {
            "cases_played": len(played), "waves_played": math.ceil(len(played) / self.wave),
            "stopped": bool(reasons) and len(played) < self.population,
            "reason": "; ".join(reasons) if reasons else "every case played",
            **_savings(calls, cost if self.prices else None, len(played), self.population),
            "subjects": {s: interval_record(*v) for s, v in subjects.items() if v},
            "pairs": [{"a": a, "b": b, **interval_record(*v)} for (a, b), v in pairs.items() if v],
        }
        return bool(reasons)

    def _holds(self, rule: StopRule, subjects: dict[str, Any], pairs: dict[tuple[str, str], Any],
               next_calls: float, next_cost: float) -> str | None:
        if isinstance(rule, HalfWidth):
            widths = [v[0].half_width for v in subjects.values() if v]
            ok = len(widths) == len(subjects) and max(widths) <= rule.limit
            return f"{rule}: every subject's mean EPM-Q within ±{width_text(max(widths, default=0))}" if ok else None
        if isinstance(rule, PairsResolved):
            ok = all(v and v[0].excludes(0.0) for v in pairs.values())
            return f"{rule}: every pair's sequence excludes 0" if ok else None
        if isinstance(rule, PairResolved):
            v = pairs.get((rule.a, rule.b)) or pairs.get((rule.b, rule.a))
            return f"{rule}: its sequence excludes 0" if v and v[0].excludes(0.0) else None
        if isinstance(rule, CallBudget):
            return f"{rule}: the next wave would pass it" if next_calls > rule.limit else None
        return f"{rule}: the next wave would pass it" if next_cost > rule.limit else None

    def record(self) -> dict[str, Any]:
        return {"mode": "run", "rules": [str(r) for r in self.rules], "order_seed": ORDER_SEED, "wave": self.wave,
                "population": self.population, "alpha": ALPHA, "range": list(epmq_range(self.profile)), **self.state}


def _sequence(played: Sequence[str], a: dict[str, float], b: dict[str, float] | None, lo: float, hi: float,
              population: int) -> tuple[SequenceInterval, float] | None:
    """The sequence over the played cases in play order (a's values, or a - b on the cases both
    have), with the observed mean; None before any value."""
    values = [a[c] - (b[c] if b is not None else 0.0) for c in played if c in a and (b is None or c in b)]
    if not values:
        return None
    return mean_sequence(values, lo=lo, hi=hi, population=population, alpha=ALPHA), sum(values) / len(values)


def _savings(calls: int, cost: float | None, played: int, population: int) -> dict[str, Any]:
    """Calls (and dollars) so far against the full grid's, extrapolated at the played cases' mean."""
    full = round(calls * population / played) if played else calls
    out: dict[str, Any] = {"calls": calls, "calls_full_estimate": full, "calls_saved_estimate": full - calls}
    if cost is not None:
        full_cost = cost * population / played if played else cost
        out |= {"cost_usd": round(cost, 6), "cost_saved_estimate_usd": round(full_cost - cost, 6)}
    return out


def stop_line(block: dict[str, Any]) -> str:
    """The run's closing line about its stop (CLI, report)."""
    played, population = block["cases_played"], block["population"]
    saved, full = block["calls_saved_estimate"], block["calls_full_estimate"]
    share = f" ({saved / full:.0%})" if full else ""
    head = "stopped early" if block["stopped"] else "played to the end"
    dollars = f", ≈ ${block['cost_saved_estimate_usd']:.2f}" if "cost_saved_estimate_usd" in block else ""
    return (f"{head} after {played} of {population} cases ({block['waves_played']} wave(s) of {block['wave']}): "
            f"{block['reason']}; ≈ {saved} of {full} calls saved{share}{dollars} against the full grid")
