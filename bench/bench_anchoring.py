"""Anchored estimates (emobench.scoring.ppi) checked on real human ratings: EPITOME and FailedESConv.

For each data set and predictor, labelled subsets of n ∈ {25, 50, 100, 200} are drawn at random
(--draws times each); the rest are unlabelled. For each draw: does the anchored interval cover the
full data's human mean, does the people-only interval (the labelled alone), does the naive
panel-only one (the predictor's own mean over everything); the anchored interval's width against
the people-only one; λ; and the effective number of human ratings the predictor was worth.

- EPITOME (3,004 Reddit replies, 3 mechanisms rated 0–2 by trained annotators): the human score is
  the sum of the three levels (0–6); each reply is its own cluster.
- FailedESConv (196 chats, 987 points where the help-seeker rated the supporter 1–5): the human
  score is the rating; points are clustered by chat. ESConv.json itself is not in the public
  repository, and its test split is never read.

Predictors, none fitted to the ratings: reply length (words; ESConv: since the previous rating),
the sentence encoder's similarity of reply to post (EPITOME), the affect tracker's valence change
of the seeker (ESConv), each rescaled onto the rating scale by its own 1st–99th percentiles; a
deliberately biased predictor (the human score plus a constant and noise: a good but lenient
judge); and an adversarial one (the scale reversed, plus noise).

    HF_HUB_OFFLINE=1 python bench/bench_anchoring.py --epitome DIR --esconv FailedESConv.json [--draws 1000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _servers import cpu_line, load_line

from emobench.scoring.ppi import anchored_mean, effective_ratings, people_mean

SIZES = (25, 50, 100, 200)


def rescale(x: NDArray[np.float64], low: float, high: float) -> NDArray[np.float64]:
    """Onto [low, high] by the predictor's own 1st and 99th percentiles (no rating is looked at)."""
    lo, hi = np.percentile(x, [1, 99])
    return np.clip(low + (x - lo) / (hi - lo) * (high - low), low, high)


def epitome(folder: Path, rng: np.random.Generator) -> tuple[NDArray[np.float64], dict[str, NDArray[np.float64]], None]:
    from emobench.sentence_encoder import Encoder
    from emobench.validation.epitome.data import read_epitome

    pairs = read_epitome(folder).pairs
    y = np.array([float(sum(p.levels.values())) for p in pairs])
    words = np.array([len(p.response_post.split()) for p in pairs], dtype=float)
    encoder = Encoder.load()
    posts, replies = encoder.embed([p.seeker_post for p in pairs]), encoder.embed([p.response_post for p in pairs])
    similarity = np.sum(posts * replies, axis=1).astype(float)
    return y, {
        "reply length": rescale(words, 0, 6),
        "encoder similarity": rescale(similarity, 0, 6),
        "biased (+1.5)": np.clip(y + 1.5 + rng.normal(0, 1, len(y)), 0, 6),
        "adversarial": np.clip(6 - y + rng.normal(0, 1, len(y)), 0, 6),
    }, None


def esconv(path: Path, rng: np.random.Generator) -> tuple[NDArray[np.float64], dict[str, NDArray[np.float64]], list[str]]:
    from emobench.trackers.affect import valence
    from emobench.validation.esconv.data import read_file

    ratings, words, chats, pairs = [], [], [], []
    for chat in read_file(path, "FailedESConv"):
        since, before = 0, ""
        for turn in chat.turns:
            if turn.speaker == "supporter":
                since += len(turn.text.split())
                continue
            if turn.feedback is not None:
                ratings.append(float(turn.feedback))
                words.append(float(since))
                chats.append(chat.chat_id)
                pairs.append((before, turn.text))
                since = 0
            before = turn.text
    texts = sorted({t for pair in pairs for t in pair})
    moods = dict(zip(texts, valence(texts), strict=True))
    change = np.array([moods[now] - moods[then] for then, now in pairs])
    y = np.array(ratings)
    return y, {
        "reply length": rescale(np.array(words), 1, 5),
        "valence change": rescale(change, 1, 5),
        "biased (+1)": np.clip(y + 1 + rng.normal(0, 0.7, len(y)), 1, 5),
        "adversarial": np.clip(6 - y + rng.normal(0, 0.7, len(y)), 1, 5),
    }, chats


def study(y: NDArray[np.float64], f: NDArray[np.float64], clusters: Sequence[str] | None, n: int, draws: int,
          rng: np.random.Generator) -> dict[str, Any]:
    truth = float(y.mean())
    keys = np.asarray(clusters) if clusters is not None else None
    everything = people_mean(f, list(keys) if keys is not None else None)  # the panel alone: one interval
    found: dict[str, list[float]] = {k: [] for k in ("anchored", "people", "width", "weight", "worth")}
    for _ in range(draws):
        rated = rng.choice(len(y), n, replace=False)
        rest = np.setdiff1d(np.arange(len(y)), rated)
        lab = list(keys[rated]) if keys is not None else None
        unl = list(keys[rest]) if keys is not None else None
        est = anchored_mean(y[rated], f[rated], f[rest], lab, unl)
        people = people_mean(y[rated], lab)
        found["anchored"].append(est.low <= truth <= est.high)
        found["people"].append(people.low <= truth <= people.high)
        found["width"].append((est.high - est.low) / (people.high - people.low) if people.high > people.low else 1.0)
        found["weight"].append(est.weight)
        found["worth"].append(effective_ratings(people, est, n))
    return {
        "n": n, "draws": draws,
        "coverage_anchored": float(np.mean(found["anchored"])), "coverage_people": float(np.mean(found["people"])),
        "coverage_panel_only": float(everything.low <= truth <= everything.high),
        "panel_only_miss": float(everything.mean - truth),
        "width_vs_people_median": float(np.median(found["width"])),
        "weight_median": float(np.median(found["weight"])),
        "effective_ratings_median": float(np.median(found["worth"])),
    }


def table(name: str, truth: float, rows: list[dict[str, Any]]) -> str:
    lines = [f"\n{name} (human mean {truth:.3f})\n",
             "| predictor | n | anchored covers | people only covers | width vs people only | λ (median) "
             "| worth (human ratings) | panel only: covers, off by |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['predictor']} | {r['n']} | {100 * r['coverage_anchored']:.1f}% | {100 * r['coverage_people']:.1f}% | "
                     f"{r['width_vs_people_median']:.2f} | {r['weight_median']:.2f} | {r['effective_ratings_median']:.0f} | "
                     f"{'yes' if r['coverage_panel_only'] else 'no'}, {r['panel_only_miss']:+.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epitome", type=Path, required=True, help="folder with EPITOME's three reddit CSV files")
    parser.add_argument("--esconv", type=Path, required=True, help="FailedESConv.json")
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    print(cpu_line())
    print(load_line())
    started = time.monotonic()
    rng = np.random.default_rng(args.seed)
    out: dict[str, Any] = {"draws": args.draws, "seed": args.seed, "sets": {}}
    for name, (y, predictors, clusters) in {
        "EPITOME (3,004 replies; human score 0–6)": epitome(args.epitome, rng),
        "FailedESConv (987 rated points in 196 chats, clustered by chat; human score 1–5)": esconv(args.esconv, rng),
    }.items():
        rows = [{"predictor": label, **study(y, f, clusters, n, args.draws, rng)}
                for label, f in predictors.items() for n in SIZES]
        out["sets"][name] = {"human_mean": float(y.mean()), "rows": rows}
        print(table(name, float(y.mean()), rows), flush=True)
    print(f"\n{time.monotonic() - started:.0f} s")
    print(load_line())
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
