"""What the regression gate can detect: the MDD per split size and seeds, on simulated runs.

For each (cases, seeds) the script writes pairs of synthetic run directories (tests/
synthetic_runs.py) whose subjects have the same truth, runs the gate on them, and reports the
gate's own minimum detectable difference (mean over repetitions) for EPM-Q and success. Then it
checks the promise behind the number: a candidate truly worse by the MDD is caught about 80% of
the time, and identical subjects trip the gate about 2.5% of the time at tolerance 0 (less with
a tolerance).

Two regimes bracket real runs: "shared" case difficulty (a hard case is hard for both models,
so pairing removes it) and "independent" (no shared difficulty at all, the worst case).

    python scripts/gate_power.py [--reps 12]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emobench.gate.compare import is_regression, run_gate
from emobench.library_paths import library_root
from emobench.registry import load_registry
from emobench.scoring.stats import bootstrap_case_means
from tests.synthetic_runs import SubjectTruth, write_run

# The current edition's split sizes: the table in docs/ci.md follows the library.
SPLITS = {split: len(load_registry(library_root()).cases(split)) for split in ("test", "dev")}
SEEDS = (1, 2, 3, 5)
BASE = SubjectTruth("accepted", epmq=60, success=0.5)


def mdd(root: Path, n_cases: int, n_seeds: int, regime: str, reps: int) -> tuple[float, float]:
    """Mean MDD for EPM-Q and success over reps pairs of same-truth runs."""
    found: list[tuple[float, float]] = []
    for rep in range(reps):
        kw = {"n_cases": n_cases, "n_seeds": n_seeds, "case_effects": regime, "report": False}
        b = write_run(root / f"b{rep}", [BASE], seed=2 * rep, **kw)  # type: ignore[arg-type]
        c = write_run(root / f"c{rep}", [SubjectTruth("candidate", 60, 0.5)], seed=2 * rep + 1,
                      **kw)  # type: ignore[arg-type]
        res = run_gate(b, c, metrics=["epmq", "success"], n_boot=500).results
        found.append((res[0].diff.mdd, res[1].diff.mdd))
    return float(np.mean([f[0] for f in found])), float(np.mean([f[1] for f in found]))


def detection_rate(root: Path, n_cases: int, n_seeds: int, drop: float, reps: int) -> float:
    caught = 0
    for rep in range(reps):
        kw = {"n_cases": n_cases, "n_seeds": n_seeds, "report": False}
        b = write_run(root / f"pb{rep}", [BASE], seed=1000 + 2 * rep, **kw)  # type: ignore[arg-type]
        c = write_run(root / f"pc{rep}", [SubjectTruth("candidate", 60 - drop, 0.5)],
                      seed=1001 + 2 * rep, **kw)  # type: ignore[arg-type]
        caught += run_gate(b, c, n_boot=1000).exit_code
    return caught / reps


def false_alarms(n_cases: int, n_seeds: int, tolerance: float, reps: int = 2000) -> float:
    """Identical subjects (shared case difficulty), vectorised like the gate's own bootstrap."""
    rng = np.random.default_rng(11)
    case_mean = 60 + rng.normal(0, 8, (n_cases, reps))
    base = (case_mean[..., None] + rng.normal(0, 6, (n_cases, reps, n_seeds))).mean(axis=2)
    cand = (case_mean[..., None] + rng.normal(0, 6, (n_cases, reps, n_seeds))).mean(axis=2)
    est = bootstrap_case_means(cand - base, [np.zeros(n_cases, dtype=np.intp)], n_boot=1000,
                               seed=3)[0]
    return float(is_regression(est.point[0], est.hi[0], tolerance).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=12, help="run pairs per cell")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print("| split (cases) | seeds | episodes per run | EPM-Q MDD, shared | EPM-Q MDD, "
              "independent | success MDD, shared |")
        print("|---|---|---|---|---|---|")
        table = {}
        for split, n_cases in SPLITS.items():
            for n_seeds in SEEDS:
                cell = root / f"{split}-{n_seeds}"
                shared = mdd(cell / "s", n_cases, n_seeds, "shared", args.reps)
                indep = mdd(cell / "i", n_cases, n_seeds, "per_subject", args.reps)
                table[(split, n_seeds)] = shared[0]
                print(f"| {split} ({n_cases}) | {n_seeds} | {n_cases * n_seeds} | {shared[0]:.2f} "
                      f"| {indep[0]:.2f} | {shared[1]:.3f} |", flush=True)
        drop = table[("test", 3)]
        rate = detection_rate(root / "power", SPLITS["test"], 3, drop, reps=4 * args.reps)
        print(f"\npower check: test split, 3 seeds, true drop {drop:.2f} (the MDD): caught in "
              f"{rate:.0%} of {4 * args.reps} pairs (promised 80%)")
        for tol in (0.0, 1.0, 2.0):
            print(f"false alarms, identical subjects, test split, 3 seeds, tolerance {tol:g}: "
                  f"{false_alarms(SPLITS['test'], 3, tol):.1%}")


if __name__ == "__main__":
    main()
