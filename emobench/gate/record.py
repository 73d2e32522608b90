"""A gate with no baseline yet: the candidate is published where the baseline belongs.

A pipeline's first run has nothing to compare against; recording it there (a bundle, as
`emobench leaderboard build` writes one) gives every later run its baseline.
"""

from __future__ import annotations

from pathlib import Path

from emobench.gate.summary import public_label
from emobench.publish.case_scores import build_cases, write_cases
from emobench.publish.leaderboard import build_leaderboard, write_leaderboard
from emobench.publish.runs import load_run


def is_missing(baseline: Path) -> bool:
    """No baseline yet: nothing at the path, or an empty folder (a restore that found nothing)."""
    return not baseline.exists() or (baseline.is_dir() and not any(baseline.iterdir()))


def record_baseline(candidate: Path, baseline: Path, *, n_boot: int, seed: int) -> str:
    """Publish the candidate run as the bundle at `baseline`; return the line that says so."""
    cases = build_cases([load_run(candidate)])
    write_leaderboard(build_leaderboard([candidate], n_boot=n_boot, seed=seed), baseline)
    write_cases(cases, baseline)
    subjects = ", ".join(public_label(s) for s in sorted(set(cases.column("subject").to_pylist())))
    return (f"no baseline at {baseline} yet: recorded {candidate} ({subjects}) there as the "
            "baseline; nothing to compare, the gate passes")
