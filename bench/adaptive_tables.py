"""The tables of docs/adaptive.md: confidence sequences on real scores, printed as markdown.

The population is EMPA's recorded runs, re-scored (leaderboard/external/empa-d59757a): per-case
EPM-Q (emobench profile, bounded in [0, 100]) of 16 models on 30 cases. A simulated run plays the
30 cases in a uniformly random order, in waves of WAVE cases, and looks after every wave.

  (a) coverage when a pair's run stops at the first wave whose interval excludes 0: the
      confidence sequence against emobench's bootstrap (scoring.stats.bootstrap_case_means, the
      expanded percentile interval every report prints) recomputed after every wave;
  (b) for each of the 120 pairs, the share of cases played when the sequence first resolves it;
  (c) the sequential gate on a baseline of EMPA's per-case scores, with regressions injected.

    python bench/adaptive_tables.py [--runs 10000] [--orders 100] [--gate-reps 25] [--seed 0]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from numpy.typing import NDArray

from emobench.gate.compare import is_regression
from emobench.scoring.confseq import sequence_bounds
from emobench.scoring.stats import bootstrap_case_means

FloatArray = NDArray[np.float64]
BUNDLE = Path(__file__).resolve().parents[1] / "leaderboard" / "external" / "empa-d59757a" / "cases.parquet"
LO, HI = 0.0, 100.0  # the emobench profile caps every index, so per-case EPM-Q is in [0, 100]
WAVE = 3  # cases per wave: emobench.run.adaptive.default_wave for 30 cases (a tenth of the split)
ALPHA = 0.05
MARGIN = 3.0  # the gate's EPM-Q tolerance in the example pipelines (docs/ci.md)
DROPS = (0.0, 3.0, 6.0, 10.0)  # injected regressions, EPM-Q points
# Candidate's episode noise: a Beta around baseline case - drop, so an episode stays in [0, 100] and
# its mean is the target exactly (clipping would move it); the sd at mid-range is docs/ci.md's
# synthetic model (6) or a noisier one (15), smaller near the ends. SEEDS episodes per case, as the
# gate protocol plays them (configs/standard.yaml).
NOISE = (6.0, 15.0)
SEEDS = 3
CLOSE = 10.0  # a pair is "close" when its true mean difference is under this many points


@dataclass(frozen=True)
class Coverage:
    at_stop: float  # share of runs whose interval at the stop holds the true mean
    close_at_stop: float  # the same, over runs of close pairs
    every_wave: float  # share of runs whose interval holds it after every wave
    cases: float  # mean cases played
    close_runs: int
    by_wave: list[float]  # share covered when read once after each wave, no stopping
    width: list[float]  # median width after each wave


@dataclass(frozen=True)
class PairBin:
    label: str
    pairs: int
    median: float  # median over pairs of the pair's median share of cases played
    resolved: float  # share of pairs resolved before the last wave (in their median order)
    mean: float  # mean share of cases played over pairs and orders
    fixed: float  # share of pairs whose full-grid bootstrap CI excludes 0


@dataclass(frozen=True)
class GateRow:
    noise: float
    drop: float
    realised: float  # mean realised drop
    fixed_fail: float  # today's gate: share of runs failed
    unit: str
    fails: float  # failed early
    passes: float  # passed early
    played: float  # mean share of the grid played
    same: float  # share with today's verdict


def load_scores() -> tuple[list[str], FloatArray]:
    """Subjects and their (subjects, cases) per-case EPM-Q, cases in case-id order."""
    table = pq.read_table(BUNDLE, columns=["subject", "case_id", "epmq"]).to_pylist()
    subjects = sorted({r["subject"] for r in table})
    cases = sorted({r["case_id"] for r in table})
    scores = np.full((len(subjects), len(cases)), np.nan)
    for r in table:
        scores[subjects.index(r["subject"]), cases.index(r["case_id"])] = r["epmq"]
    assert not np.isnan(scores).any(), "every model plays every case"
    return subjects, scores


def shuffled(rows: FloatArray, rng: np.random.Generator) -> FloatArray:
    """Each row in its own uniformly random order."""
    return np.take_along_axis(rows, rng.permuted(np.tile(np.arange(rows.shape[1]), (rows.shape[0], 1)), axis=1), axis=1)


def first_wave(hit: NDArray[np.bool_], waves: NDArray[np.intp], default: int) -> NDArray[np.intp]:
    """Per row, the case index that ends the first wave where `hit` (rows x waves) holds."""
    return np.where(hit.any(axis=1), waves[np.argmax(hit, axis=1)], default)


def bootstrap_bounds(diffs: FloatArray, n_boot: int, seed: int) -> tuple[FloatArray, FloatArray]:
    """emobench's by-case bootstrap CI of the mean of each row of `diffs` (rows are runs)."""
    est = bootstrap_case_means(diffs.T, [np.zeros(diffs.shape[1], dtype=np.intp)], n_boot=n_boot, seed=seed)[0]
    return est.lo[0], est.hi[0]


def coverage(scores: FloatArray, runs: int, n_boot: int, rng: np.random.Generator) -> dict[str, Coverage]:
    pairs = np.array(list(itertools.combinations(range(scores.shape[0]), 2)))
    chosen = pairs[rng.integers(len(pairs), size=runs)]
    diffs = shuffled(scores[chosen[:, 0]] - scores[chosen[:, 1]], rng)
    n_cases = diffs.shape[1]
    truth = diffs.mean(axis=1)
    waves = np.arange(WAVE - 1, n_cases, WAVE)
    rows = np.arange(runs)
    eps = 1e-9  # the full grid pins the mean exactly, up to rounding

    lower, upper = sequence_bounds(diffs, lo=LO - HI, hi=HI - LO, population=n_cases, alpha=ALPHA)
    cs_in = (lower[:, waves] <= truth[:, None] + eps) & (truth[:, None] - eps <= upper[:, waves])
    cs_stop = first_wave((lower[:, waves] > 0) | (upper[:, waves] < 0), waves, n_cases - 1)
    cs_at_stop = cs_in[rows, cs_stop // WAVE]

    boot = [bootstrap_bounds(diffs[:, : w + 1], n_boot, seed=int(w)) for w in waves]
    b_lo = np.stack([b[0] for b in boot], axis=1)
    b_hi = np.stack([b[1] for b in boot], axis=1)
    b_in = (b_lo <= truth[:, None] + eps) & (truth[:, None] - eps <= b_hi)
    b_stop = first_wave((b_lo > 0) | (b_hi < 0), waves, n_cases - 1)
    b_at_stop = b_in[rows, b_stop // WAVE]

    close = np.abs(truth) < CLOSE
    return {name: Coverage(float(at_stop.mean()), float(at_stop[close].mean()), float(inside.all(axis=1).mean()),
                           float(np.mean(stop + 1)), int(close.sum()), inside.mean(axis=0).tolist(),
                           np.median(width, axis=0).tolist())
            for name, at_stop, inside, stop, width in (
                ("sequence", cs_at_stop, cs_in, cs_stop, upper[:, waves] - lower[:, waves]),
                ("bootstrap", b_at_stop, b_in, b_stop, b_hi - b_lo))}


def pair_costs(scores: FloatArray, orders: int, n_boot: int, rng: np.random.Generator) -> list[PairBin]:
    """Per bin of true |difference|, then all pairs (the last row)."""
    pairs = list(itertools.combinations(range(scores.shape[0]), 2))
    n_cases = scores.shape[1]
    base = np.stack([scores[i] - scores[j] for i, j in pairs])
    truth = base.mean(axis=1)
    diffs = shuffled(np.repeat(base, orders, axis=0), rng)
    lower, upper = sequence_bounds(diffs, lo=LO - HI, hi=HI - LO, population=n_cases, alpha=ALPHA)
    early = np.arange(WAVE - 1, n_cases - 1, WAVE)  # waves before the last: the full grid is exact anyway
    stop = first_wave((lower[:, early] > 0) | (upper[:, early] < 0), early, n_cases - 1)
    fraction = ((stop + 1) / n_cases).reshape(len(pairs), orders)
    per_pair = np.median(fraction, axis=1)
    resolved = per_pair < 1.0
    b_lo, b_hi = bootstrap_bounds(base, n_boot, seed=0)
    fixed = (b_lo > 0) | (b_hi < 0)
    bins = [(f"{a:g}–{b:g}", (np.abs(truth) >= a) & (np.abs(truth) < b))
            for a, b in ((0.0, 5.0), (5.0, 10.0), (10.0, 20.0), (20.0, 40.0), (40.0, 100.0))]
    return [PairBin(label, int(keep.sum()), float(np.median(per_pair[keep])), float(resolved[keep].mean()),
                    float(fraction[keep].mean()), float(fixed[keep].mean()))
            for label, keep in [*bins, ("all", np.ones(len(pairs), dtype=bool))] if keep.any()]


def gate(scores: FloatArray, reps: int, n_boot: int, rng: np.random.Generator) -> list[GateRow]:
    """Per (episode noise, drop, what the sequence follows): the sequential gate against today's.

    The candidate plays every case SEEDS times, each episode a Beta draw with mean baseline case -
    drop (floored at 0: a baseline case below the drop loses less) and sd `sd` at mid-range.
    Today's gate pairs per-case means over seeds. The sequence follows one of three populations
    with the same mean difference: per-case differences (N = 30, range [-100, 100]); (case, seed)
    cells minus the baseline's case (N = 90, same range); or the candidate's cells alone (N = 90,
    range [0, 100]) minus the baseline's mean, which the published baseline fixes exactly.
    """
    rows = []
    for sd in NOISE:
        for drop in DROPS:
            baseline = np.repeat(scores, reps, axis=0)
            target = np.clip((baseline[:, :, None] - drop - LO) / (HI - LO), 1e-3, 1 - 1e-3)
            concentration = 0.25 / (sd / (HI - LO)) ** 2 - 1  # Beta variance p(1-p)/(k+1), sd at p = 1/2
            shape = (*baseline.shape, SEEDS)
            episodes = LO + (HI - LO) * rng.beta(target * concentration, (1 - target) * concentration, shape)
            case_diffs = episodes.mean(axis=2) - baseline
            mean = case_diffs.mean(axis=1)
            _, b_hi = bootstrap_bounds(case_diffs, n_boot, seed=int(10 * drop + sd))
            fixed_fail = is_regression(mean, b_hi, MARGIN)
            cells = episodes.reshape(len(baseline), -1)
            offset = baseline.mean(axis=1, keepdims=True)
            variants = (("paired cases", case_diffs, LO - HI, HI - LO, 0.0, WAVE),
                        ("paired cells", cells - np.repeat(baseline, SEEDS, axis=1), LO - HI, HI - LO, 0.0, WAVE * SEEDS),
                        ("candidate cells", cells, LO, HI, offset, WAVE * SEEDS))
            for label, values, lo, hi, shift, wave in variants:
                n = values.shape[1]
                lower, upper = sequence_bounds(shuffled(values, rng), lo=lo, hi=hi, population=n, alpha=ALPHA)
                lower, upper = lower - shift, upper - shift
                early = np.arange(wave - 1, n - 1, wave)
                fail_at = first_wave(upper[:, early] < -MARGIN, early, n)
                pass_at = first_wave(lower[:, early] > -MARGIN, early, n)
                fails, passes = fail_at < pass_at, pass_at < fail_at
                played = np.where(fails | passes, np.minimum(fail_at, pass_at) + 1, n) / n
                verdict = np.where(fails, True, np.where(passes, False, fixed_fail))
                rows.append(GateRow(sd, drop, -float(mean.mean()), float(fixed_fail.mean()), f"{label} ({n})",
                                    float(fails.mean()), float(passes.mean()), float(played.mean()),
                                    float(np.mean(verdict == fixed_fail))))
    return rows


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000, help="simulated runs for the coverage table")
    parser.add_argument("--orders", type=int, default=100, help="random orders per pair for the cost table")
    parser.add_argument("--gate-reps", type=int, default=25, help="runs per baseline model and gate cell")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples per interval")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    subjects, scores = load_scores()
    n_cases = scores.shape[1]
    print(f"Population: {len(subjects)} models x {n_cases} cases of EMPA's runs (per-case EPM-Q, emobench "
          f"profile, in [0, 100]); waves of {WAVE} cases; alpha {ALPHA}; seed {args.seed}.\n")

    cov = coverage(scores, args.runs, args.n_boot, rng)
    print(f"(a) Coverage under optional stopping: {args.runs:,} runs, each a random pair of the 120 in a random "
          f"order, stopped at the first wave whose interval excludes 0 (else after all {n_cases} cases); "
          f"{cov['sequence'].close_runs:,} of them are close pairs (|true difference| < {CLOSE:g}).\n")
    print("| interval | covers at the stop | close pairs, at the stop | at every wave | mean cases played |")
    print("|---|---|---|---|---|")
    for name, label in (("sequence", "confidence sequence"),
                        ("bootstrap", f"bootstrap, recomputed each wave ({args.n_boot:,} resamples)")):
        c = cov[name]
        print(f"| {label} | {pct(c.at_stop)} | {pct(c.close_at_stop)} | {pct(c.every_wave)} | {c.cases:.1f} |")
    print("\nThe same runs read once after a fixed number of cases (no stopping): coverage, and the median "
          "width in EPM-Q points.\n")
    waves = range(WAVE, n_cases + 1, WAVE)
    print("| cases played | " + " | ".join(str(w) for w in waves) + " |")
    print("|---|" + "---|" * len(waves))
    for name, label in (("sequence", "sequence"), ("bootstrap", "bootstrap")):
        print(f"| {label}: covers | " + " | ".join(pct(x) for x in cov[name].by_wave) + " |")
    for name, label in (("sequence", "sequence"), ("bootstrap", "bootstrap")):
        print(f"| {label}: median width | " + " | ".join(f"{x:.1f}" for x in cov[name].width) + " |")

    print(f"\n(b) Cases needed per pair: each of the 120 pairs in {args.orders} random orders; a pair is resolved "
          f"when its sequence excludes 0 before the last wave (in its median order).\n")
    print("| pairs by true difference (EPM-Q points) | pairs | median share of cases | resolved early | "
          "mean share of cases | fixed grid: bootstrap excludes 0 |")
    print("|---|---|---|---|---|---|")
    for b in pair_costs(scores, args.orders, args.n_boot, rng):
        cells = [b.label, str(b.pairs), pct(b.median), pct(b.resolved), pct(b.mean), pct(b.fixed)]
        print("| " + " | ".join(f"**{c}**" if b.label == "all" else c for c in cells) + " |")

    print(f"\n(c) Sequential gate, tolerance {MARGIN:g} EPM-Q: each of the {len(subjects)} models' per-case scores "
          f"as the baseline, {args.gate_reps} candidate runs each per row; the candidate plays each case {SEEDS} "
          f"times, each episode a Beta draw in [0, 100] with mean baseline case - drop (floored at 0) and the "
          f"given sd at mid-range (less near the ends), in a random order. After each "
          f"wave of {WAVE} cases' worth it fails when the sequence's upper end is below -{MARGIN:g} and passes "
          f"when its lower end is above; undecided before the last wave, today's gate decides on all "
          f"{n_cases} cases.\n")
    print("| episode sd (mid-range) | injected drop | realised drop | today's gate fails | sequence over (N) | "
          "failed early | passed early | mean share played | same verdict as today |")
    print("|---|---|---|---|---|---|---|---|---|")
    for g in gate(scores, args.gate_reps, args.n_boot, rng):
        print(f"| {g.noise:g} | {g.drop:g} | {g.realised:.2f} | {pct(g.fixed_fail)} | {g.unit} | {pct(g.fails)} | "
              f"{pct(g.passes)} | {pct(g.played)} | {pct(g.same)} |")
    print(f"({time.perf_counter() - start:.0f} s)", file=sys.stderr)  # stderr: stdout is the same every run


if __name__ == "__main__":
    main()
