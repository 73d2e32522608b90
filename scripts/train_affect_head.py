"""Train the affect head (emobench/trackers/weights/affect_head.npz) on GoEmotions; report figures.

Reproducible with a fixed seed; the data stay outside the repository.

Data (both CC BY 4.0):
  GoEmotions (Demszky et al., 2020), google-research/google-research `goemotions/data/`
  {train,dev,test}.tsv: text, comma-separated label ids, comment id; no header. Any copy with
  these sha256 works (they were read from a byte-identical mirror, monologg/GoEmotions-pytorch
  `data/original/`, and checked against google-research page by page):
    train.tsv 1c254a142be5c00e80d819b9ae1bbd36d94b2eeb8f4b1271846508d57e57d9c5
    dev.tsv   575489c079c9de1097062a01738f998590d6b7ead66dd1c9fd1d2ba01fd8bc62
    test.tsv  0587b2dd8b27b97352adbfc3fb083d46005c8946657fdc2b1ca8b1cc7f1f8be4
  Without a git client, page through each file with any raw-file reader (16k characters a
  page is enough) and concatenate the pages.
  EmoBank (Buechel & Hahn, 2017), JULIELab/EmoBank `corpus/emobank.csv` (id, split, V, A, D,
  text): held out, used only to measure the valence's correlation with people's ratings.

Layout: DATA/goemotions/{train,dev,test}.tsv and DATA/emobank/emobank.csv; embeddings are
cached as DATA/emb/<name>.npy (MiniLM, see emobench/sentence_encoder.py).

    python scripts/train_affect_head.py --data /work/data [--train-rows 43410] [--seed 0]

The test splits (GoEmotions test, EmoBank test) are read once, after the weights and
thresholds are fixed, and only to print the figures that the model card reports.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize
from scipy.special import expit, log_softmax, softmax
from scipy.stats import pearsonr, rankdata, spearmanr

from emobench.trackers.head import WEIGHTS_PATH, fire
from emobench.trackers.lexicon import vader

Array = npt.NDArray[np.float64]
_CHUNK = 1000
L2_GRID = (1e-3, 3e-3, 1e-2, 3e-2)

# GoEmotions label ids, in the order of the dataset's emotions.txt.
GOEMOTIONS = (
    "admiration amusement anger annoyance approval caring confusion curiosity desire disappointment "
    "disapproval disgust embarrassment excitement fear gratitude grief joy love nervousness optimism "
    "pride realization relief remorse sadness surprise neutral"
).split()
# The dataset paper's sentiment grouping; the ambiguous labels (confusion, curiosity,
# realization, surprise) take no side.
POSITIVE = set("admiration amusement approval caring desire excitement gratitude joy love optimism pride relief".split())
NEGATIVE = set(
    "anger annoyance disappointment disapproval disgust embarrassment fear grief nervousness remorse sadness".split()
)
# The head's classes: what a support conversation needs to follow (docs/trackers.md says why).
CLASS_GROUPS = {
    "sadness": {"sadness", "grief", "disappointment"},
    "fear": {"fear", "nervousness"},
    "anger": {"anger", "annoyance", "disgust"},
    "shame": {"embarrassment", "remorse"},
    "hope": {"optimism", "desire"},
    "joy": {"joy", "amusement", "excitement", "love", "pride", "relief", "admiration"},
    "gratitude": {"gratitude"},
    "neutral": {"neutral"},
}
NEGATIVE_CLASSES = ("sadness", "fear", "anger", "shame")


def read_goemotions(path: Path) -> tuple[list[str], list[set[str]]]:
    texts, labels = [], []
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            texts.append(row[0])
            labels.append({GOEMOTIONS[int(i)] for i in row[1].split(",")})
    return texts, labels


def embeddings(name: str, texts: list[str], cache: Path) -> Array:
    """MiniLM embeddings of `texts`, cached in chunks of 1,000 rows (an interrupted run resumes)."""
    encoder = None
    parts = []
    for start in range(0, len(texts), _CHUNK):
        path = cache / f"{name}.{start // _CHUNK:03d}.npy"
        chunk = texts[start : start + _CHUNK]
        if not path.exists():
            if encoder is None:
                from emobench.sentence_encoder import Encoder

                encoder = Encoder.load()
            cache.mkdir(parents=True, exist_ok=True)
            np.save(path, encoder.embed(chunk))
            print(f"embedded {name} rows {start}-{start + len(chunk)}", flush=True)
        part = np.load(path)
        if part.shape[0] != len(chunk):
            raise SystemExit(f"{path}: {part.shape[0]} rows for {len(chunk)} texts; delete it to re-embed")
        parts.append(part)
    return np.concatenate(parts).astype(np.float64) if parts else np.zeros((0, 384))


def features(emb: Array, texts: list[str]) -> Array:
    """The head's input: the embedding and VADER's four scores (see head.AffectHead.features)."""
    return np.hstack([emb, np.asarray(vader(texts), dtype=np.float64)])


def targets(labels: list[set[str]]) -> Array:
    return np.array([[bool(group & lab) for group in CLASS_GROUPS.values()] for lab in labels], dtype=np.float64)


def polarity(labels: list[set[str]]) -> npt.NDArray[np.int64]:
    """0 negative, 1 neutral, 2 positive; -1 for mixed or ambiguous texts (left out)."""
    out = []
    for lab in labels:
        pos, neg = bool(lab & POSITIVE), bool(lab & NEGATIVE)
        out.append(2 if pos and not neg else 0 if neg and not pos else 1 if lab == {"neutral"} else -1)
    return np.array(out)


def fit_binary(x: Array, y: Array, l2: float) -> tuple[Array, Array]:
    """One-vs-rest logistic regressions, all columns of y at once (L-BFGS, L2 on weights)."""
    n, d = x.shape
    k = y.shape[1]

    def loss(theta: Array) -> tuple[float, Array]:
        w, b = theta[: d * k].reshape(d, k), theta[d * k :]
        z = x @ w + b
        value = float(np.sum(np.logaddexp(0.0, z) - y * z)) / n + 0.5 * l2 * float(np.sum(w * w))
        g = (expit(z) - y) / n
        return value, np.concatenate([(x.T @ g + l2 * w).ravel(), g.sum(axis=0)])

    res = minimize(loss, np.zeros(d * k + k), jac=True, method="L-BFGS-B", options={"maxiter": 2000})
    return res.x[: d * k].reshape(d, k), res.x[d * k :]


def fit_softmax(x: Array, y: npt.NDArray[np.int64], k: int, l2: float) -> tuple[Array, Array]:
    n, d = x.shape
    onehot = np.eye(k)[y]

    def loss(theta: Array) -> tuple[float, Array]:
        w, b = theta[: d * k].reshape(d, k), theta[d * k :]
        logp = log_softmax(x @ w + b, axis=1)
        value = -float(np.sum(onehot * logp)) / n + 0.5 * l2 * float(np.sum(w * w))
        g = (np.exp(logp) - onehot) / n
        return value, np.concatenate([(x.T @ g + l2 * w).ravel(), g.sum(axis=0)])

    res = minimize(loss, np.zeros(d * k + k), jac=True, method="L-BFGS-B", options={"maxiter": 2000})
    return res.x[: d * k].reshape(d, k), res.x[d * k :]


def f1(pred: npt.ArrayLike, truth: npt.ArrayLike) -> tuple[float, float, float]:
    pred, truth = np.asarray(pred, dtype=bool), np.asarray(truth, dtype=bool)
    tp = float(np.sum(pred & truth))
    p = tp / max(float(pred.sum()), 1.0)
    r = tp / max(float(truth.sum()), 1.0)
    return p, r, 0.0 if p + r == 0 else 2 * p * r / (p + r)


def auc(score: Array, positive: npt.NDArray[np.bool_]) -> float:
    ranks = rankdata(score)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def pick_thresholds(prob: Array, truth: Array) -> Array:
    grid = np.round(np.arange(0.05, 0.951, 0.01), 2)
    out = []
    for j in range(prob.shape[1]):
        scores = [f1(prob[:, j] >= t, truth[:, j] > 0)[2] for t in grid]
        out.append(grid[int(np.argmax(scores))])
    return np.array(out)


def pick_neutral_threshold(prob: Array, thresholds: Array, truth: Array, neutral: int) -> Array:
    """The neutral unit's threshold that maximises the smaller of neutral's precision and recall
    under the full rule (`fire`), the emotion thresholds fixed. Neutral competes with the
    emotions, so its own F1 is not the right aim; a tracker that calls distress "neutral" (or
    small talk an emotion) misleads either way, so neither may be bought with the other."""
    grid = np.round(np.arange(0.05, 0.951, 0.01), 2)
    scores = []
    for t in grid:
        trial = thresholds.copy()
        trial[neutral] = t
        scores.append(min(f1(fire(prob, trial, neutral)[:, neutral], truth[:, neutral] > 0)[:2]))
    out = thresholds.copy()
    out[neutral] = grid[int(np.argmax(scores))]
    return out


def report_classes(pred: npt.NDArray[np.bool_], truth: Array) -> dict[str, dict[str, float]]:
    out = {}
    for j, name in enumerate(CLASS_GROUPS):
        p, r, f = f1(pred[:, j], truth[:, j] > 0)
        out[name] = {"precision": round(p, 3), "recall": round(r, 3), "f1": round(f, 3), "support": int(truth[:, j].sum())}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--train-rows", type=int, default=43410, help="first N rows of train.tsv")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=WEIGHTS_PATH)
    ap.add_argument("--no-test", action="store_true", help="development runs: figures on dev only")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    go, cache = args.data / "goemotions", args.data / "emb"

    tr_texts, tr_labels = read_goemotions(go / "train.tsv")
    tr_texts, tr_labels = tr_texts[: args.train_rows], tr_labels[: args.train_rows]
    tr_emb = embeddings("train", tr_texts, cache)
    dv_texts, dv_labels = read_goemotions(go / "dev.tsv")
    dv_x = features(embeddings("dev", dv_texts, cache), dv_texts)
    tr_x = features(tr_emb, tr_texts)
    order = rng.permutation(len(tr_texts))  # the optimiser is deterministic; the shuffle only fixes row order
    tr_x, tr_labels = tr_x[order], [tr_labels[i] for i in order]
    mean, scale = tr_x.mean(axis=0), tr_x.std(axis=0) + 1e-6
    tr_z, dv_z = (tr_x - mean) / scale, (dv_x - mean) / scale
    neutral = list(CLASS_GROUPS).index("neutral")

    # L2 strength and thresholds are chosen on dev: emotion units by macro-F1, polarity by AUC.
    best: tuple[float, float, Array, Array, Array] | None = None
    for l2 in L2_GRID:
        w, b = fit_binary(tr_z, targets(tr_labels), l2)
        prob = expit(dv_z @ w + b)
        th = pick_neutral_threshold(prob, pick_thresholds(prob, targets(dv_labels)), targets(dv_labels), neutral)
        score = float(np.mean([c["f1"] for c in report_classes(fire(prob, th, neutral), targets(dv_labels)).values()]))
        print(f"emotion l2={l2:g}: dev macro-F1 {score:.3f}", flush=True)
        if best is None or score > best[0]:
            best = (score, l2, w, b, th)
    assert best is not None
    _, l2_emo, w_emo, b_emo, thresholds = best
    pol = polarity(tr_labels)
    keep = pol >= 0
    dv_pol = polarity(dv_labels)
    sided = (dv_pol == 0) | (dv_pol == 2)
    valence_fits = {}
    for name, cols in (("with_vader", slice(None)), ("without_vader", slice(0, tr_z.shape[1] - 4))):
        scored = []
        for l2 in L2_GRID:
            w, b = fit_softmax(tr_z[keep][:, cols], pol[keep], 3, l2)
            p = softmax(dv_z[:, cols] @ w + b, axis=1)
            scored.append((auc((p[:, 2] - p[:, 0])[sided], dv_pol[sided] == 2), l2, w, b))
            print(f"valence {name} l2={l2:g}: dev AUC {scored[-1][0]:.3f}", flush=True)
        valence_fits[name] = max(scored, key=lambda t: t[0])
    _, l2_val, w_val, b_val = valence_fits["with_vader"]

    np.savez(
        args.out,
        classes=np.array(list(CLASS_GROUPS)),
        negative=np.array([c in NEGATIVE_CLASSES for c in CLASS_GROUPS]),
        mean=mean.astype(np.float32),
        scale=scale.astype(np.float32),
        emotion_w=w_emo.astype(np.float32),
        emotion_b=b_emo.astype(np.float32),
        thresholds=thresholds.astype(np.float32),
        valence_w=w_val.astype(np.float32),
        valence_b=b_val.astype(np.float32),
    )
    _, _, w_plain, b_plain = valence_fits["without_vader"]
    plain = (mean[:-4], scale[:-4], w_plain, b_plain)
    figures = evaluate(args.out, args.data, plain, ("dev",) if args.no_test else ("dev", "test"))
    provenance = {
        "sha256": hashlib.sha256(args.out.read_bytes()).hexdigest(),
        "data": {name: hashlib.sha256((go / f"{name}.tsv").read_bytes()).hexdigest() for name in ("train", "dev", "test")},
        "train_rows": len(tr_texts),
        "seed": args.seed,
        "l2": {"emotion": l2_emo, "valence": l2_val},
        "groups": {name: sorted(group) for name, group in CLASS_GROUPS.items()},
        "thresholds": dict(zip(CLASS_GROUPS, [round(float(t), 2) for t in thresholds], strict=True)),
        "figures": figures,
    }
    args.out.with_suffix(".json").write_text(json.dumps(provenance, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(provenance, indent=1))


def _plain_valence(plain: tuple[Array, Array, Array, Array], emb: Array) -> Array:
    """The ablation: the same polarity layer trained on the embedding alone, no VADER inputs."""
    mean, scale, w, b = plain
    p = softmax(((emb - mean) / scale) @ w + b, axis=1)
    return np.asarray(p[:, 2] - p[:, 0])


def evaluate(
    weights: Path, data: Path, plain: tuple[Array, Array, Array, Array], splits: tuple[str, ...]
) -> dict[str, object]:
    """Figures of the saved head on dev and, once, on the test splits, beside the baselines.

    Two protocols for the emotions: every text, and only the texts whose labels all fall in
    the kept classes (the texts a kept-class tracker can get right).
    """
    from emobench.trackers.head import AffectHead

    head = AffectHead.load(weights, check=False)
    kept_labels = set().union(*CLASS_GROUPS.values())
    negative = [list(CLASS_GROUPS).index(c) for c in NEGATIVE_CLASSES]
    neutral = list(CLASS_GROUPS).index("neutral")
    out: dict[str, object] = {}
    for split in splits:
        texts, labels = read_goemotions(data / "goemotions" / f"{split}.tsv")
        emb = embeddings(split, texts, data / "emb")
        truth = targets(labels)
        pred = fire(head.emotion_probs(emb, texts), head.thresholds, neutral)
        inside = np.array([lab <= kept_labels for lab in labels])
        figures: dict[str, object] = {"n": len(texts), "n_kept_only": int(inside.sum())}
        for name, subset in (("all", np.ones(len(texts), dtype=bool)), ("kept_only", inside)):
            per_class = report_classes(pred[subset], truth[subset])
            figures[name] = {
                "classes": per_class,
                "macro_f1": round(float(np.mean([c["f1"] for c in per_class.values()])), 3),
                "majority_neutral_share": round(float(truth[subset, neutral].mean()), 3),
                "majority_macro_f1": round(_majority_macro_f1(truth[subset], neutral), 3),
                "distress_any_f1": round(f1(pred[subset][:, negative].any(axis=1), truth[subset][:, negative].any(axis=1))[2], 3),
            }
        pol = polarity(labels)
        sided = (pol == 0) | (pol == 2)
        positive = pol[sided] == 2
        figures["polarity_auc"] = {
            "head": round(auc(head.valence(emb, texts)[sided], positive), 3),
            "head_without_vader": round(auc(_plain_valence(plain, emb)[sided], positive), 3),
            "vader": round(auc(np.array([v[0] for v in vader(texts)])[sided], positive), 3),
            "n_positive": int(positive.sum()),
            "n_negative": int((~positive).sum()),
        }
        out[split] = figures
    if "test" not in splits:
        return out
    with (data / "emobank" / "emobank.csv").open(encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["split"] == "test"]
    texts = [r["text"] for r in rows]
    emb = embeddings("emobank_test", texts, data / "emb")
    rated = np.array([float(r["V"]) for r in rows])
    scores = {
        "head": head.valence(emb, texts),
        "head_without_vader": _plain_valence(plain, emb),
        "vader": np.array([v[0] for v in vader(texts)]),
    }
    out["emobank_test"] = {"n": len(rows)} | {
        name: {"pearson": round(float(pearsonr(v, rated)[0]), 3), "spearman": round(float(spearmanr(v, rated)[0]), 3)}
        for name, v in scores.items()
    }
    return out


def _majority_macro_f1(truth: Array, neutral: int) -> float:
    """Macro-F1 over the kept classes of always answering "neutral"."""
    pred = np.zeros(truth.shape, dtype=bool)
    pred[:, neutral] = True
    return float(np.mean([f1(pred[:, j], truth[:, j] > 0)[2] for j in range(truth.shape[1])]))


if __name__ == "__main__":
    main()
