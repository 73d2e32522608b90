"""Read ESConv (Liu et al., ACL 2021) from the copy a user fetched, in either layout, into typed
chats (docs/validity.md, "Judges against help-seekers' own ratings: ESConv").

- original: `ESConv.json` and `FailedESConv.json`, each one JSON list of chats, turns
  `{"speaker", "annotation": {"feedback" | "strategy"}, "content"}`;
- Hugging Face: `train`/`valid`/`test` as `.txt` or `.json` JSON lines, turns
  `{"text", "speaker": "usr" | "sys", "strategy"}`, no per-turn feedback.

The test split is held out: a test file is read only to leave its chats out of `ESConv.json`.
Any malformed record is one InputError naming the file, the record and the field.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from emobench.errors import InputError

SPLITS = ("train", "valid", "test")
DEFAULT_SPLITS = frozenset({"train", "valid"})
ORIGINAL = ("ESConv", "FailedESConv")
# Each file's own speaker names; FailedESConv calls the seeker "speaker" and the supporter "listener".
SPEAKERS: dict[str, dict[str, Literal["seeker", "supporter"]]] = {
    "ESConv": {"seeker": "seeker", "supporter": "supporter"},
    "FailedESConv": {"speaker": "seeker", "listener": "supporter", "seeker": "seeker", "supporter": "supporter"},
    "huggingface": {"usr": "seeker", "sys": "supporter"},
}
CARD_FIELDS = ("experience_type", "emotion_type", "problem_type", "situation")
SCALE = (1, 5)


@dataclass(frozen=True)
class EsconvTurn:
    speaker: Literal["seeker", "supporter"]
    text: str
    feedback: int | None  # 1-5 on seeker turns where annotated, else None
    strategy: str | None


@dataclass(frozen=True)
class EsconvChat:
    chat_id: str  # f"{file stem}:{index in the file}"
    source: str  # "ESConv" | "FailedESConv" | "train" | "valid" | "test"
    emotion_type: str
    problem_type: str
    experience_type: str
    situation: str
    initial_intensity: int | None
    final_intensity: int | None
    empathy: int | None
    relevance: int | None
    turns: tuple[EsconvTurn, ...]  # consecutive turns by one speaker kept as they are

    @property
    def failed(self) -> bool:
        return self.source == "FailedESConv"


@dataclass(frozen=True)
class EsconvSample:
    chats: tuple[EsconvChat, ...]
    layout: Literal["original", "huggingface"]
    notes: tuple[str, ...]
    files: tuple[str, ...]


def parse_splits(text: str) -> frozenset[str]:
    """`train,valid` (the default), any comma-separated subset of train/valid/test, or `all`."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    if names == ["all"]:
        return frozenset(SPLITS)
    unknown = [s for s in names if s not in SPLITS]
    if unknown or not names:
        raise InputError("--split", "", f"{text!r}: use a comma-separated list of {', '.join(SPLITS)}, or all")
    return frozenset(names)


def _level(value: Any, path: Path, where: str) -> int | None:
    """A 1-5 rating given as a number or a string of one; empty or absent is None."""
    if value is None or value == "":
        return None
    number = int(value.strip()) if isinstance(value, str) and value.strip().isdecimal() else value
    if isinstance(number, bool) or not isinstance(number, int) or not SCALE[0] <= number <= SCALE[1]:
        raise InputError(path, where, f"{value!r} is not a rating {SCALE[0]}-{SCALE[1]}")
    return number


def _text(value: Any, path: Path, where: str) -> str:
    if not isinstance(value, str):
        raise InputError(path, where, f"expected text, got {type(value).__name__}")
    return value


def _turn(item: Any, layout: str, path: Path, where: str) -> EsconvTurn:
    if not isinstance(item, dict):
        raise InputError(path, where, "expected an object")
    names = SPEAKERS[layout]
    speaker = item.get("speaker")
    if not isinstance(speaker, str) or speaker not in names:
        hint = " (a Hugging Face layout file? name it train/valid/test)" if speaker in ("usr", "sys") else ""
        raise InputError(path, f"{where}.speaker", f"{speaker!r} is not one of {', '.join(names)}{hint}")
    role = names[speaker]
    if layout == "huggingface":
        text = _text(item.get("text"), path, f"{where}.text")
        strategy, feedback = item.get("strategy"), None
    else:
        text = _text(item.get("content"), path, f"{where}.content")
        note = item.get("annotation", {})
        if not isinstance(note, dict):
            raise InputError(path, f"{where}.annotation", "expected an object")
        strategy = note.get("strategy")
        feedback = _level(note.get("feedback"), path, f"{where}.annotation.feedback")
        if feedback is not None and role != "seeker":
            raise InputError(path, f"{where}.annotation.feedback", "feedback on a supporter turn")
    if strategy is not None and not isinstance(strategy, str):
        raise InputError(path, f"{where}.strategy", f"expected text, got {type(strategy).__name__}")
    return EsconvTurn(speaker=role, text=text, feedback=feedback, strategy=strategy or None)


def _chat(record: Any, index: int, source: str, layout: str, path: Path) -> EsconvChat:
    where = f"chat {index}"
    if not isinstance(record, dict):
        raise InputError(path, where, "expected an object")
    card = {f: _text(record.get(f), path, f"{where}: {f}") for f in CARD_FIELDS}
    survey = record.get("survey_score", {})
    seeker = survey.get("seeker", {}) if isinstance(survey, dict) else None
    if not isinstance(seeker, dict):
        raise InputError(path, f"{where}: survey_score.seeker", "expected an object")
    levels = {k: _level(seeker.get(k), path, f"{where}: survey_score.seeker.{k}")
              for k in ("initial_emotion_intensity", "final_emotion_intensity", "empathy", "relevance")}
    dialog = record.get("dialog")
    if not isinstance(dialog, list) or not dialog:
        raise InputError(path, f"{where}: dialog", "expected a non-empty list of turns")
    turns = tuple(_turn(t, layout, path, f"{where}: dialog[{k}]") for k, t in enumerate(dialog))
    return EsconvChat(
        chat_id=f"{path.stem}:{index}", source=source, initial_intensity=levels["initial_emotion_intensity"],
        final_intensity=levels["final_emotion_intensity"], empathy=levels["empathy"], relevance=levels["relevance"],
        turns=turns, **card)


def _records(path: Path, layout: str) -> list[Any]:
    """The file's records: one JSON list (original) or one JSON value a line (Hugging Face)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, "", f"cannot read as UTF-8 text ({type(exc).__name__})") from None
    if layout != "huggingface":
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            where = f"line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
            raise InputError(path, where, "not valid JSON (truncated, or JSON lines in the original layout?)") from None
        if not isinstance(data, list):
            raise InputError(path, "", "expected a JSON list of chats (the original layout)")
        return data
    records = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except (json.JSONDecodeError, RecursionError):
            raise InputError(path, f"line {n}", "not valid JSON (truncated, or not the JSON-lines layout?)") from None
    return records


def read_file(path: Path, source: str) -> list[EsconvChat]:
    """Every chat of one file; source is its stem (ESConv, FailedESConv, train, valid, test)."""
    layout = source if source in ORIGINAL else "huggingface"
    chats = [_chat(r, i, source, layout, path) for i, r in enumerate(_records(path, layout))]
    if not chats:
        raise InputError(path, "", "no chats")
    return chats


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def match_key(chat: EsconvChat) -> tuple[str, str]:
    """What identifies a chat across the layouts: its situation and the seeker's first message."""
    first = next((t.text for t in chat.turns if t.speaker == "seeker"), "")
    return _squash(chat.situation), _squash(first)


def _split_file(folder: Path, split: str) -> Path | None:
    return next((p for p in (folder / f"{split}.txt", folder / f"{split}.json") if p.is_file()), None)


def _draw(chats: list[EsconvChat], limit: int | None, seed: int, stem: str) -> list[EsconvChat]:
    if limit is None or limit >= len(chats):
        return chats
    rng = np.random.default_rng([seed, zlib.crc32(stem.encode())])
    return [chats[i] for i in sorted(rng.choice(len(chats), size=limit, replace=False))]


def _plan(data: Path, splits: frozenset[str]) -> tuple[Literal["original", "huggingface"], list[tuple[Path, str]], Path | None]:
    """(layout, (file, source) to read, test file to exclude by) for a --data file or folder."""
    if data.is_file():
        if data.stem in ORIGINAL:
            return "original", [(data, data.stem)], None
        if data.stem in SPLITS:
            if data.stem not in splits:
                raise InputError(data, "", f"the {data.stem} split is held out; add it to --split to read it")
            return "huggingface", [(data, data.stem)], None
        raise InputError(data, "", "not an ESConv file: expected ESConv.json, FailedESConv.json or train/valid/test .txt/.json")
    if not data.is_dir():
        raise InputError(data, "", "no such file or folder: pass --data with your copy of ESConv (docs/validity.md)")
    originals = [(data / f"{s}.json", s) for s in ORIGINAL if (data / f"{s}.json").is_file()]
    failed = [(p, s) for p, s in originals if s == "FailedESConv"]
    test = _split_file(data, "test")
    if any(s == "ESConv" for _, s in originals):
        return "original", originals, None if "test" in splits else test
    found = [(p, s) for s in SPLITS if s in splits and (p := _split_file(data, s)) is not None]
    if found:
        return "huggingface", found + failed, None
    if any(_split_file(data, s) for s in SPLITS):
        raise InputError(data, "", f"no {' or '.join(sorted(splits))} file (.txt or .json); see --split")
    if failed:
        return "original", failed, None
    raise InputError(data, "", "no ESConv file: expected ESConv.json, FailedESConv.json or train/valid/test .txt/.json")


def load_esconv(data: Path, *, splits: frozenset[str] = DEFAULT_SPLITS, limit: int | None = None,
                seed: int = 0) -> EsconvSample:
    """The chats in `data` (a file or a folder), `limit` per file drawn with `seed`."""
    layout, files, test = _plan(data, splits)
    notes: list[str] = []
    if layout == "huggingface":
        notes.append("per-turn feedback absent (Hugging Face layout)")
        read_splits = {s for _, s in files}
        notes += [f"no {s} file in {data}" for s in SPLITS if s in splits and s not in read_splits]
    chats: list[EsconvChat] = []
    for path, source in files:
        read = read_file(path, source)
        if source == "ESConv" and "test" not in splits:
            if test is None:
                notes.append("test chats could not be excluded (no test.txt or test.json beside ESConv.json)")
            else:
                held_out = {match_key(c) for c in read_file(test, "test")}
                kept = [c for c in read if match_key(c) not in held_out]
                notes.append(f"{len(read) - len(kept)} test chats left out of ESConv.json (matched against {test.name})")
                read = kept
        chats += _draw(read, limit, seed, source)
    if not any(c.source == "FailedESConv" for c in chats):
        notes.append("no FailedESConv.json: no ESConv-against-failed AUC")
    elif all(c.source == "FailedESConv" for c in chats):
        notes.append("FailedESConv only: per-turn figures are from failed chats only, and there is no AUC")
    return EsconvSample(chats=tuple(chats), layout=layout, notes=tuple(notes), files=tuple(str(p) for p, _ in files))
