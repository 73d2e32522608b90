"""The ESConv reader on our own fixture in both layouts (tests/fixtures/esconv, no ESConv text):
the quirks of the format, the held-out test split, seeded sampling, and one InputError naming
file, chat and field for anything malformed, whatever the damage (hypothesis)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.errors import InputError
from emobench.validation.esconv.data import load_esconv, parse_splits, read_file

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "esconv"


def test_the_original_layout_reads_both_files_and_leaves_the_test_chat_out() -> None:
    sample = load_esconv(FIXTURE / "original")
    assert sample.layout == "original"
    assert [c.chat_id for c in sample.chats] == ["ESConv:0", "ESConv:1", "FailedESConv:0", "FailedESConv:1"]
    assert any("1 test chats left out of ESConv.json (matched against test.txt)" in n for n in sample.notes)
    first = sample.chats[0]
    assert (first.initial_intensity, first.final_intensity, first.empathy, first.relevance) == (3, 1, 5, 5)
    assert [t.speaker for t in first.turns[:4]] == ["seeker", "supporter", "seeker", "seeker"]  # kept as they are
    assert [t.feedback for t in first.turns] == [None] * 5 + [5, None, 4]
    assert first.turns[1].strategy == "Question" and first.turns[0].strategy is None  # empty annotation
    assert sample.chats[1].turns[-1].feedback == 3  # a number, not a string, in the file


def test_failed_chats_map_speaker_and_listener_and_keep_a_partial_survey() -> None:
    chats = read_file(FIXTURE / "original" / "FailedESConv.json", "FailedESConv")
    assert all(c.failed for c in chats)
    assert {t.speaker for t in chats[0].turns} == {"seeker", "supporter"}
    partial = chats[1]
    assert (partial.initial_intensity, partial.final_intensity, partial.empathy, partial.relevance) == (4, None, None, None)
    assert sum(t.feedback is not None for c in chats for t in c.turns) == 5


def test_without_a_test_file_the_report_says_test_chats_could_not_be_excluded(tmp_path: Path) -> None:
    shutil.copy(FIXTURE / "original" / "ESConv.json", tmp_path)
    sample = load_esconv(tmp_path)
    assert len(sample.chats) == 3
    assert any("test chats could not be excluded" in n for n in sample.notes)
    assert any("no FailedESConv.json" in n for n in sample.notes)
    assert len(load_esconv(FIXTURE / "original", splits=parse_splits("all")).chats) == 5  # asked for: kept


def test_the_hugging_face_layout_reads_train_and_valid_only_by_default() -> None:
    sample = load_esconv(FIXTURE / "huggingface")
    assert sample.layout == "huggingface"
    assert [c.source for c in sample.chats] == ["train", "train", "valid"]
    assert "per-turn feedback absent (Hugging Face layout)" in sample.notes
    assert all(t.feedback is None for c in sample.chats for t in c.turns)
    assert sample.chats[2].initial_intensity == 5 and sample.chats[1].final_intensity is None
    assert [c.source for c in load_esconv(FIXTURE / "huggingface", splits=parse_splits("test")).chats] == ["test"]
    with pytest.raises(InputError, match="the test split is held out"):
        load_esconv(FIXTURE / "huggingface" / "test.txt")


def test_a_seeded_limit_draws_the_same_chats_per_file(tmp_path: Path) -> None:
    records = json.loads((FIXTURE / "original" / "FailedESConv.json").read_text())
    (tmp_path / "FailedESConv.json").write_text(json.dumps(records * 10))
    one = load_esconv(tmp_path, limit=4, seed=3)
    assert len(one.chats) == 4 and one.chats == load_esconv(tmp_path, limit=4, seed=3).chats
    assert {c.chat_id for c in one.chats} != {c.chat_id for c in load_esconv(tmp_path, limit=4, seed=4).chats}


@pytest.mark.parametrize(("damage", "expected"), [
    (lambda t: t[:-40], "FailedESConv.json: line"),
    (lambda t: t.replace('"feedback": "2"', '"feedback": "7"'), "chat 0: dialog[2].annotation.feedback: '7' is not a rating 1-5"),
    (lambda t: t.replace('"speaker": "listener"', '"speaker": "sys"', 1), "chat 0: dialog[1].speaker: 'sys' is not one of"),
    (lambda t: t.replace('"situation": "Exams', '"situation": 3, "x": "', 1), "chat 0: situation: expected text, got int"),
    (lambda t: json.dumps(json.loads(t)[0]), "expected a JSON list of chats"),
])
def test_a_damaged_file_is_one_error_naming_file_chat_and_field(tmp_path: Path, damage, expected: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "FailedESConv.json"
    path.write_text(damage((FIXTURE / "original" / "FailedESConv.json").read_text()))
    with pytest.raises(InputError) as err:
        load_esconv(tmp_path)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_wrong_names_and_layouts_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no ESConv file"):
        load_esconv(tmp_path)
    with pytest.raises(InputError, match="no such file or folder"):
        load_esconv(tmp_path / "nowhere")
    shutil.copy(FIXTURE / "huggingface" / "train.txt", tmp_path / "ESConv.json")  # JSON lines under the original name
    with pytest.raises(InputError, match=r"ESConv\.json: line 2 column 1: not valid JSON"):
        load_esconv(tmp_path)
    with pytest.raises(InputError, match="--split"):
        parse_splits("train,dev")


_TEXT = (FIXTURE / "original" / "FailedESConv.json").read_text()
_HF = (FIXTURE / "huggingface" / "train.txt").read_text()


def _load(name: str, text: str) -> None:
    """Read one file alone in a fresh folder; an InputError must be one line naming it."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / name).write_text(text)
        try:
            sample = load_esconv(Path(tmp))
        except InputError as exc:
            assert "\n" not in str(exc) and name in str(exc)
        else:
            assert all(c.turns for c in sample.chats)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["FailedESConv.json", "train.txt"]), st.integers(0, 4000), st.integers(0, 60),
       st.text(alphabet='{}[]":,0123456789abc \n-', max_size=8))
def test_any_mutation_is_an_input_error_or_a_valid_read(name: str, at: int, cut: int, insert: str) -> None:
    text = _TEXT if name == "FailedESConv.json" else _HF
    at %= len(text)
    _load(name, text[:at] + insert + text[at + cut:])


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["experience_type", "survey_score", "dialog", "annotation", "content", "feedback", "speaker"]),
       st.one_of(st.none(), st.booleans(), st.integers(-3, 9), st.text(max_size=3), st.lists(st.integers(), max_size=2),
                 st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)))
def test_any_value_in_any_field_is_an_input_error_or_a_valid_read(field: str, value: object) -> None:
    records = json.loads(_TEXT)
    if field in ("experience_type", "survey_score", "dialog"):
        records[1][field] = value
    elif field in ("annotation", "content", "speaker"):
        records[1]["dialog"][2][field] = value
    else:
        records[1]["dialog"][2]["annotation"]["feedback"] = value
    _load("FailedESConv.json", json.dumps(records))
