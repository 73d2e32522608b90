"""The subject replay's false-alarm rate and power (`emobench verify --spot-check N --subject B`).

Simulated, not played: no model here is sampled. The case means are real: EMPA's recorded runs
re-scored (leaderboard/external/empa-d59757a), per-case EPM-Q of 16 models on 30 cases. Episodes
are Beta draws around a case's mean with the project's two noise models (sd 6 EPM-Q points at
mid-range, docs/ci.md's synthetic runs, and a noisier 15; smaller near 0 and 100), as
bench/adaptive_tables.py draws them. A submission plays the 30 cases x 3 seeds; the replay draws
N of its 90 cells and plays each once more.

  honest:        submitted and replayed cells from the named model: the share refused is the
                 false-alarm rate (the protocol's alpha is what it was built for);
  better model:  the submission is another model's, higher on average, labelled as the named one;
                 the replay is the named model's: the share refused is the power, by the gap
                 between the two models' means;
  inflated run:  the named model's episodes, each raised by DELTA points (capped at 100).

The test is emobench.board.replay's, vectorised here over trials; a sample of trials is decided
again by the shipped decide() and must agree.

    python bench/bench_spot_check.py [--reps 2000] [--pair-reps 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from numpy.typing import NDArray
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from emobench.board.protocol import DEFAULT_PROTOCOL, load_protocol  # noqa: E402
from emobench.board.replay import decide, pooled_noise  # noqa: E402

FloatArray = NDArray[np.float64]
BUNDLE = ROOT / "leaderboard" / "external" / "empa-d59757a" / "cases.parquet"
SEEDS = 3
NOISE = (6.0, 15.0)
NS = (3, 5, 10, 15, 30, 60, 90)
GAPS = ((0.0, 3.0), (3.0, 6.0), (6.0, 10.0), (10.0, 20.0), (20.0, 100.0))
DELTAS = (2.0, 5.0, 10.0)


def load_scores() -> FloatArray:
    """(models, cases) per-case EPM-Q."""
    table = pq.read_table(BUNDLE, columns=["subject", "case_id", "epmq"]).to_pylist()
    subjects, cases = sorted({r["subject"] for r in table}), sorted({r["case_id"] for r in table})
    scores = np.full((len(subjects), len(cases)), np.nan)
    for r in table:
        scores[subjects.index(r["subject"]), cases.index(r["case_id"])] = r["epmq"]
    assert not np.isnan(scores).any()
    return scores


def episodes(means: FloatArray, sd: float, draws: int, rng: np.random.Generator) -> FloatArray:
    """`draws` Beta episodes per case mean: shape (*means.shape, draws)."""
    p = np.clip(means / 100.0, 1e-3, 1 - 1e-3)[..., None]
    k = 0.25 / (sd / 100.0) ** 2 - 1  # Beta variance p(1-p)/(k+1): sd at p = 1/2
    return 100.0 * rng.beta(p * k, (1 - p) * k, (*means.shape, draws))


def trials(submitted: FloatArray, named: FloatArray, sd: float, n: int, alpha: float,
           rng: np.random.Generator, check: int = 0) -> float:
    """Share refused: submitted (trials, cases, seeds) episodes against a replay of n of their
    cells drawn from the named model's case means (trials, cases)."""
    reps, cases, seeds = submitted.shape
    centred = submitted - submitted.mean(axis=2, keepdims=True)
    df = cases * (seeds - 1)
    s = np.sqrt((centred ** 2).sum(axis=(1, 2)) / df)
    picks = np.argsort(rng.random((reps, cases * seeds)), axis=1)[:, :n]  # n cells without replacement
    flat = submitted.reshape(reps, -1)
    sub = np.take_along_axis(flat, picks, axis=1)
    again = episodes(np.take_along_axis(named, picks // seeds, axis=1), sd, 1, rng)[..., 0]
    diff = (sub - again).mean(axis=1)
    threshold = stats.t.ppf(1 - alpha, df) * s * np.sqrt(2 / n)
    refused = diff > threshold
    for i in range(check):  # the shipped function decides the same
        noise = pooled_noise((str(c), float(x)) for c in range(cases) for x in submitted[i, c])
        shipped = decide(sub[i].tolist(), again[i].tolist(), noise, alpha)
        assert shipped.refused == bool(refused[i]) and np.isclose(shipped.threshold, threshold[i])
    return float(refused.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000, help="honest and inflated trials per model")
    parser.add_argument("--pair-reps", type=int, default=200, help="trials per (better, named) pair")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    alpha = load_protocol(DEFAULT_PROTOCOL).spot_check_alpha
    scores = load_scores()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    name = next((line.split(":", 1)[1].strip() for line in cpu.splitlines() if line.startswith("Model name")),
                platform.processor())
    print(f"# subject replay, alpha {alpha} (configs/board.yaml); {len(scores)} EMPA models x {scores.shape[1]} cases, "
          f"{SEEDS} seeds; seed {args.seed}; {name}\n")
    header = "| noise sd | " + " | ".join(f"N={n}" for n in NS) + " |"
    rule = "|---|" + "---|" * len(NS)

    print(f"## Honest replays: share refused (false alarms), mean over models [max model]; {args.reps} trials each\n")
    print(header + "\n" + rule)
    for sd in NOISE:
        cells = []
        for n in NS:
            rates = [trials(episodes(np.repeat(m[None], args.reps, 0), sd, SEEDS, rng), np.repeat(m[None], args.reps, 0),
                            sd, n, alpha, rng, check=20 if n == NS[0] else 0) for m in scores]
            cells.append(f"{np.mean(rates):.4f} [{np.max(rates):.4f}]")
        print(f"| {sd:g} | " + " | ".join(cells) + " |")

    print(f"\n## A better model's run under the named model's name: share refused, by the gap in mean EPM-Q; "
          f"{args.pair_reps} trials per ordered pair\n")
    means = scores.mean(axis=1)
    pairs = [(b, m) for b in range(len(scores)) for m in range(len(scores)) if means[b] > means[m]]
    print("| noise sd | gap (points) | pairs | " + " | ".join(f"N={n}" for n in NS) + " |")
    print("|---|---|---|" + "---|" * len(NS))
    for sd in NOISE:
        for lo, hi in GAPS:
            chosen = [(b, m) for b, m in pairs if lo <= means[b] - means[m] < hi]
            if not chosen:
                continue
            rates = [np.mean([trials(episodes(np.repeat(scores[b][None], args.pair_reps, 0), sd, SEEDS, rng),
                                     np.repeat(scores[m][None], args.pair_reps, 0), sd, n, alpha, rng)
                              for b, m in chosen]) for n in NS]
            print(f"| {sd:g} | {lo:g} to {hi:g} | {len(chosen)} | " + " | ".join(f"{r:.3f}" for r in rates) + " |")

    print(f"\n## The named model's run with every episode raised by DELTA points: share refused, mean over models; "
          f"{args.reps} trials each\n")
    print("| noise sd | DELTA | " + " | ".join(f"N={n}" for n in NS) + " |")
    print("|---|---|" + "---|" * len(NS))
    for sd in NOISE:
        for delta in DELTAS:
            rates = [np.mean([trials(np.minimum(episodes(np.repeat(m[None], args.reps, 0), sd, SEEDS, rng) + delta, 100.0),
                                     np.repeat(m[None], args.reps, 0), sd, n, alpha, rng) for m in scores]) for n in NS]
            print(f"| {sd:g} | {delta:g} | " + " | ".join(f"{r:.3f}" for r in rates) + " |")
    sd, n = NOISE[-1], 30
    print(f"\n## Honest replays by model (noise sd {sd:g}, N={n}): mean EPM-Q, share refused; {args.reps} trials each\n")
    for m in sorted(scores, key=np.mean):
        rate = trials(episodes(np.repeat(m[None], args.reps, 0), sd, SEEDS, rng), np.repeat(m[None], args.reps, 0),
                      sd, n, alpha, rng)
        print(f"- {m.mean():.1f}: {rate:.4f}")
    print(f"\n{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
