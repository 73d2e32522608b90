"""`emobench gate --sequential` (docs/adaptive.md): the candidate plays the baseline's cases in
the gate's order, in waves, and the gate decides as soon as the answer is certain.

After each wave, the confidence sequence of the mean paired difference (candidate - baseline,
per-case EPM-Q, bounded in [-100, 100]) over the baseline's finite case set: entirely below
-tolerance, a regression beyond the tolerance is certain (fail, exit 1); entirely above it, the
candidate is certainly no worse than the tolerance (pass, exit 0). The sequence is valid at every
stopping time, so stopping on either is sound. Undecided after every case, the gate decides as
it does without --sequential (emobench.gate.compare).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emobench.errors import InputError
from emobench.gate.baseline import GateSide, load_side
from emobench.gate.summary import public_label
from emobench.registry import Registry
from emobench.run.adaptive import (
    ALPHA,
    case_order,
    case_values,
    default_wave,
    epmq_range,
    in_waves,
    interval_record,
    spent,
)
from emobench.rundir import RunDir
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
    wave: int
    registry: Registry
    profile: str
    min_turns: int
    population: int = 0
    state: dict[str, Any] = field(default_factory=dict)

    def waves(self, case_ids: Sequence[str]) -> list[list[str]]:
        paired = [c for c in case_ids if c in self.baseline]
        self.population = len(paired)
        if self.population < 2:
            raise InputError(FLAG, "", f"{self.population} case(s) of the candidate's config are the baseline's; need 2")
        return in_waves(case_order(paired, self.seed), self.wave)

    def after_wave(self, rd: RunDir, played: Sequence[str]) -> bool:
        lo, hi = epmq_range(self.profile, FLAG)
        mine = case_values(rd, self.registry, set(played), self.profile, self.min_turns).get(self.subject, {})
        diffs = [mine[c] - self.baseline[c] for c in played if c in mine]
        cs = mean_sequence(diffs, lo=lo - hi, hi=hi - lo, population=self.population, alpha=ALPHA)
        decision = "fail" if cs.upper < -self.tolerance else "pass" if cs.lower > -self.tolerance else None
        if len(played) >= self.population:  # every case played: the gate decides as without --sequential
            decision = None
        calls, _ = spent(rd, {}, set(played))
        full = round(calls * self.population / len(played)) if played else calls
        self.state = {
            "decision": decision, "stopped": decision is not None and len(played) < self.population,
            "cases_played": len(played), "waves_played": -(-len(played) // self.wave),
            "difference": interval_record(cs, sum(diffs) / len(diffs) if diffs else float("nan")),
            "calls": calls, "calls_full_estimate": full, "calls_saved_estimate": full - calls,
            "reason": {"fail": f"a regression beyond the tolerance {self.tolerance:g} is certain",
                       "pass": f"no regression beyond the tolerance {self.tolerance:g}, certainly",
                       None: "every case played, nothing certain"}[decision],
        }
        return decision is not None

    def record(self) -> dict[str, Any]:
        return {"mode": "gate", "order_seed": self.seed, "wave": self.wave, "population": self.population,
                "alpha": ALPHA, "tolerance": self.tolerance, **self.state}


def candidate_subject(labels: list[str], requested: str | None, where: Path) -> str:
    if requested is not None:
        if requested not in labels:
            raise InputError(where, "subject", f"{requested!r} not found; have {labels}")
        return requested
    real = [s for s in labels if not s.startswith(REFERENCE_PREFIX)]
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
    subject = candidate_subject([s.name for s in config.subjects], requested, play or candidate)
    gate = SequentialGate({c: float(v) for c, v in values.items() if v is not None}, subject, tolerance, seed,
                          wave or default_wave(len(values)), registry,
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
    return "\n".join([
        f"## emobench gate: **{verdict}** (sequential: stopped after {s['cases_played']} of {gate.population} "
        "cases; `epmq`)",
        "",
        f"- Baseline: `{public_label(baseline_subject)}` from `{baseline}`.",
        f"- Candidate: `{public_label(gate.subject)}` from `{candidate}`.",
        "",
        "| slice | metric | difference [95% CS] | paired cases | verdict |",
        "|---|---|---|---|---|",
        f"| overall | `epmq` | {d['mean']:+.3f} [{d['lower']:+.3f}, {d['upper']:+.3f}] | {d['n']} of {gate.population} "
        f"| {cell} |",
        "",
        f"- Sequential gate: the candidate played the baseline's cases in the gate's order (seed {gate.seed}), "
        f"{gate.wave} per wave, and stopped after wave {s['waves_played']}: the confidence sequence of candidate - "
        f"baseline (anytime-valid, {1 - ALPHA:.0%}) lies entirely {'below' if verdict == 'FAIL' else 'above'} "
        f"-{gate.tolerance:g}. A bootstrap CI would not hold at a stop chosen from the data; this interval does.",
        f"- Live model calls (answers from the response cache are free): {s['calls']} made, ≈ "
        f"{s['calls_saved_estimate']} of {s['calls_full_estimate']} saved against playing every case.",
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
