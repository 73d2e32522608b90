"""`emobench gate --sequential` (docs/adaptive.md): the candidate plays the baseline's cases in
the gate's order, in waves, and the gate decides as soon as the answer is certain.

The unit is the candidate's (case, seed) cell: its episodes' EPM-Q, in [0, 100], played in a
seeded random order of every cell of the baseline's cases. Their mean over the whole grid,
minus the baseline's mean over those cases (a fixed number: the baseline is already played), is
the difference the gate asks about. After each wave its confidence sequence, entirely below
-tolerance, makes a regression beyond the tolerance certain (fail, exit 1); entirely above it,
the candidate is certainly no worse than the tolerance (pass, exit 0). Cells rather than paired
per-case differences: half the range and seeds times the population, so that one unplayed
extreme value moves the mean far less and a 30-case split can stop early (docs/adaptive.md
measures both). The sequence holds at every stopping time, so stopping on either is sound.
Undecided after every cell, the gate decides as it does without --sequential
(emobench.gate.compare).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emobench.errors import InputError
from emobench.gate.baseline import GateSide, load_side
from emobench.gate.summary import public_label
from emobench.registry import Registry
from emobench.run.adaptive import (
    ALPHA,
    Cell,
    cell_order,
    cell_values,
    default_wave,
    epmq_range,
    in_waves,
    interval_record,
    spent,
)
from emobench.rundir import RunDir

if TYPE_CHECKING:
    from emobench.config import RoleConfig
from emobench.scoring.confseq import mean_sequence
from emobench.scoring.validity import REFERENCE_PREFIX

FLAG = "--sequential"


@dataclass
class SequentialGate:
    """The Stopper the runner plays the candidate with (run/adaptive.py)."""

    baseline: dict[str, float]  # case -> the baseline's per-case EPM-Q (mean over seeds)
    subject: str  # the candidate's label in its run
    tolerance: float
    seed: int
    wave: int | None  # cells per wave; None: a tenth of them
    registry: Registry
    profile: str
    min_turns: int
    population: int = 0  # the candidate's cells of the baseline's cases
    paired_cases: set[str] = field(default_factory=set)
    state: dict[str, Any] = field(default_factory=dict)

    def waves(self, cells: Sequence[Cell]) -> list[list[Cell]]:
        paired = [c for c in cells if c[0] in self.baseline]
        self.population, self.paired_cases = len(paired), {c for c, _ in paired}
        if len(self.paired_cases) < 2:
            raise InputError(FLAG, "", f"{len(self.paired_cases)} case(s) of the candidate's config are the "
                             "baseline's; need 2")
        self.wave = self.wave or default_wave(self.population)
        return in_waves(cell_order(paired, self.seed), self.wave)

    def after_wave(self, rd: RunDir, played: Sequence[Cell]) -> bool:
        lo, hi = epmq_range(self.profile, FLAG)
        mine = cell_values(rd, self.registry, set(played), self.profile, self.min_turns).get(self.subject, {})
        values = [mine[c] for c in played if c in mine]
        cases = {c for c, _ in played}
        base = sum(self.baseline[c] for c in self.paired_cases) / len(self.paired_cases)
        cs = mean_sequence(values, lo=lo, hi=hi, population=self.population, alpha=ALPHA)
        lower, upper = cs.lower - base, cs.upper - base
        decision = "fail" if upper < -self.tolerance else "pass" if lower > -self.tolerance else None
        if len(played) >= self.population:  # every cell played: the gate decides as without --sequential
            decision = None
        calls, _ = spent(rd, {}, set(played))
        full = round(calls * self.population / len(played)) if played else calls
        mean = sum(values) / len(values) - base if values else float("nan")
        self.state = {
            "decision": decision, "stopped": decision is not None and len(played) < self.population,
            "cells_played": len(played), "cases_played": len(cases), "waves_played": -(-len(played) // (self.wave or 1)),
            "baseline_mean": base,
            "difference": {**interval_record(cs, mean), "lower": lower, "upper": upper},
            "calls": calls, "calls_full_estimate": full, "calls_saved_estimate": full - calls,
            "reason": {"fail": f"a regression beyond the tolerance {self.tolerance:g} is certain",
                       "pass": f"no regression beyond the tolerance {self.tolerance:g}, certainly",
                       None: "every episode played, nothing certain"}[decision],
        }
        return decision is not None

    def record(self) -> dict[str, Any]:
        return {"mode": "gate", "order_seed": self.seed, "wave": self.wave, "population": self.population,
                "alpha": ALPHA, "tolerance": self.tolerance, **self.state}


def candidate_subject(subjects: list[RoleConfig], requested: str | None, where: Path) -> str:
    """The subject to gate: the one asked for, else the run's one subject that is not a scripted
    reference (told by its binding: a reference may carry a label of its own), else its one subject."""
    labels = [s.name for s in subjects]
    if requested is not None:
        if requested not in labels:
            raise InputError(where, "subject", f"{requested!r} not found; have {labels}")
        return requested
    real = [s.name for s in subjects if not s.binding.startswith(REFERENCE_PREFIX)] or labels
    if len(real) != 1:
        raise InputError(where, "subject", f"{len(labels)} subjects {labels}; choose one with --candidate-subject")
    return real[0]


def play_candidate(
    baseline: Path, candidate: Path, *, play: Path | None, tolerance: float, baseline_subject: str | None,
    requested: str | None, seed: int, wave: int | None, bindings: dict[str, Any], cache: Any,
) -> SequentialGate:
    """Play (or resume) the candidate run against the baseline until the gate decides."""
    from rich.console import Console

    from emobench.run.finalize import finalize_run
    from emobench.run.flags import load_run_config
    from emobench.run.runner import ROOT, run_benchmark, run_registry

    base = load_side(baseline, baseline_subject, "--baseline-subject")
    rd = RunDir(candidate)
    resume = rd.manifest.exists()
    if not resume and play is None:
        raise InputError(candidate, "", "no run there yet: give --play CONFIG to play the candidate")
    config, _ = load_run_config(play, candidate if resume else None, bindings)
    registry = run_registry(config, ROOT)
    _check_before_play(base, config.split, registry.version(config.split), config.scoring_profile, play or candidate)
    epmq_range(config.scoring_profile, FLAG)
    values = dict(zip(base.cases.column("case_id").to_pylist(), base.cases.column("epmq").to_pylist(), strict=True))
    subject = candidate_subject(config.subjects, requested, play or candidate)
    gate = SequentialGate({c: float(v) for c, v in values.items() if v is not None}, subject, tolerance, seed,
                          wave, registry,
                          config.scoring_profile, config.min_turns)
    asyncio.run(run_benchmark(config, candidate, resume=resume, console=Console(stderr=True), show_progress=False,
                              cache=cache, stop=gate))
    finalize_run(rd, registry)
    return gate


def _check_before_play(base: GateSide, split: str, registry_version: str, profile: str, where: Path) -> None:
    """What makes the scores incomparable, refused before a call is made (the rest is checked on the
    played run, as without --sequential)."""
    for key, mine in (("split", split), ("registry_version", registry_version), ("scoring_profile", profile)):
        theirs = base.provenance.get(key)
        if theirs != mine:
            raise InputError(where, key, f"{mine!r} differs from the baseline's {theirs!r}; scores are not comparable")


def sequential_markdown(gate: SequentialGate, baseline: str, candidate: str, baseline_subject: str) -> str:
    """The summary of a gate that stopped early; one that played to the end uses the usual one."""
    s = gate.state
    d = s["difference"]
    verdict = "FAIL" if s["decision"] == "fail" else "PASS"
    cell = (f"**FAIL**: a regression beyond the tolerance {gate.tolerance:g} is certain" if verdict == "FAIL" else
            f"PASS: certainly no regression beyond the tolerance {gate.tolerance:g}")
    cases = len(gate.paired_cases)
    return "\n".join([
        f"## emobench gate: **{verdict}** (sequential: stopped after {s['cells_played']} of {gate.population} "
        "episodes; `epmq`)",
        "",
        f"- Baseline: `{public_label(baseline_subject)}` from `{baseline}`.",
        f"- Candidate: `{public_label(gate.subject)}` from `{candidate}`.",
        "",
        "| slice | metric | baseline | difference [95% CS] | episodes played | cases begun | verdict |",
        "|---|---|---|---|---|---|---|",
        f"| overall | `epmq` | {s['baseline_mean']:.3f} | {d['mean']:+.3f} [{d['lower']:+.3f}, {d['upper']:+.3f}] "
        f"| {s['cells_played']} of {gate.population} | {s['cases_played']} of {cases} | {cell} |",
        "",
        f"- Sequential gate: the candidate played its episodes of the baseline's {cases} cases (case × seed) in the "
        f"gate's order (seed {gate.seed}), {gate.wave} per wave, and stopped after wave {s['waves_played']}: the "
        f"confidence sequence of its mean EPM-Q over every such episode, minus the baseline's mean (anytime-valid, "
        f"{1 - ALPHA:.0%}), lies entirely {'below' if verdict == 'FAIL' else 'above'} -{gate.tolerance:g}. A "
        "bootstrap CI would not hold at a stop chosen from the data; this interval does.",
        f"- Live model calls (answers from the response cache are free): {s['calls']} made, ≈ "
        f"{s['calls_saved_estimate']} of {s['calls_full_estimate']} saved against playing every episode.",
    ]) + "\n"


def play_all(candidate: Path, play: Path, bindings: dict[str, Any], cache: Any) -> None:
    """The first run of a pipeline has no baseline to stop against: the candidate plays every case
    (then `--baseline-missing record` records it as the baseline)."""
    from rich.console import Console

    from emobench.run.finalize import finalize_run
    from emobench.run.flags import load_run_config
    from emobench.run.runner import ROOT, run_benchmark, run_registry

    resume = RunDir(candidate).manifest.exists()
    config, _ = load_run_config(None if resume else play, candidate if resume else None, bindings)
    asyncio.run(run_benchmark(config, candidate, resume=resume, console=Console(stderr=True), show_progress=False,
                              cache=cache))
    finalize_run(RunDir(candidate), run_registry(config, ROOT))
