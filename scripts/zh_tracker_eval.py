"""Polarity AUC of Chinese sentiment candidates on a labelled emotion corpus (docs/trackers.md).

The corpus is JSON lines with `content` and `label` (CLUE's emotion files: valid.txt for
development, test.txt held out for the final figures). Positive: happiness, like; negative:
sadness, anger, disgust, fear; surprise is left out. Candidates: snownlp's naive Bayes, and four
lexicons that cntext ships as YAML (read with safe_load; nothing is unpickled), each scored as
positive minus negative words over a jieba segmentation, or mean valence for ChineseEmoBank.
Needs `snownlp cntext jieba` in a throwaway environment; they are not emobench dependencies.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import yaml
from scipy.stats import rankdata

POSITIVE = {"happiness", "like"}
NEGATIVE = {"sadness", "anger", "disgust", "fear"}
BAR = 0.85


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    n_pos = int(labels.sum())
    n_neg = len(labels) - n_pos
    return float((rankdata(scores)[labels == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def bootstrap(scores: np.ndarray, labels: np.ndarray, n_boot: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    draws = (rng.integers(0, len(labels), len(labels)) for _ in range(n_boot))
    values = [auc(scores[i], labels[i]) for i in draws if 0 < labels[i].sum() < len(i)]
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def _lexicon(name: str) -> dict:
    # find_spec locates the data without importing cntext, whose __init__ needs IPython.
    spec = find_spec("cntext")
    assert spec is not None and spec.origin is not None, "cntext is not installed"
    path = Path(spec.origin).parent / "io" / "data" / f"{name}.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))["Dictionary"]


def candidates(texts: list[str]) -> dict[str, Callable[[], np.ndarray]]:
    import jieba
    from snownlp import SnowNLP

    jieba.setLogLevel(60)
    tokens = [jieba.lcut(text) for text in texts]

    def polarity(pos: list[str], neg: list[str]) -> np.ndarray:
        good, bad = set(pos), set(neg)
        return np.array([sum(t in good for t in ts) - sum(t in bad for t in ts) for ts in tokens], float)

    def valence() -> np.ndarray:
        table = {word: float(v["valence"]) - 5 for word, v in _lexicon("zh_valence_ChineseEmoBank").items()}
        return np.array([np.mean([table[t] for t in ts if t in table] or [0.0]) for ts in tokens])

    dutir, hownet, ntusd = (_lexicon(f"zh_common_{n}") for n in ("DUTIR", "HowNet", "NTUSD"))
    return {
        "snownlp (naive Bayes, shopping reviews)": lambda: np.array([SnowNLP(t).sentiments for t in texts]),
        "DUTIR lexicon": lambda: polarity(dutir["乐"] + dutir["好"], dutir["怒"] + dutir["哀"] + dutir["惧"] + dutir["恶"]),
        "HowNet lexicon": lambda: polarity(hownet["pos"], hownet["neg"]),
        "NTUSD lexicon": lambda: polarity(ntusd["positive"], ntusd["negative"]),
        "ChineseEmoBank valence": valence,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="JSON lines with content and label")
    parser.add_argument("--boot", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.path, encoding="utf-8") if line.strip()]
    rows = [row for row in rows if row["label"] in POSITIVE | NEGATIVE]
    labels = np.array([row["label"] in POSITIVE for row in rows], dtype=int)
    print(f"{args.path}: {len(rows)} texts, {labels.sum()} positive, {len(rows) - labels.sum()} negative")
    for name, score in candidates([row["content"] for row in rows]).items():
        values = score()
        low, high = bootstrap(values, labels, args.boot, args.seed)
        verdict = "meets" if low >= BAR else "below"
        print(f"{name}: AUC {auc(values, labels):.3f} [{low:.3f}, {high:.3f}], {verdict} the {BAR} bar")


if __name__ == "__main__":
    main()
