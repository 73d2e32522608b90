"""One card file read and checked: its YAML, its schema, its language folder, its id's uniqueness.
The loader (loader.py) assembles the library from these."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from emobench.errors import InputError
from emobench.registry.hashing import card_hash
from emobench.registry.models import DEFAULT_LANGUAGE, LANGUAGES, Language, Persona, PersonaCard, Scenario, ScenarioCard
from emobench.yaml_io import display_path, read_yaml

CASE_NEEDS = 3  # the first edition whose cases carry the hidden need (the scenario did before)
HELD_OUT_EDITION = 4  # the first edition with a held-out test split and the prose rules
# Cards in another language than English live in a folder of that name (personas/zh/),
# and its splits carry it as a suffix (test-zh), so a split is always one language.
OTHER_LANGUAGES: tuple[Language, ...] = tuple(lang for lang in LANGUAGES if lang != DEFAULT_LANGUAGE)

CardT = TypeVar("CardT", bound=BaseModel)
NamedT = TypeVar("NamedT", Persona, Scenario)


def _dotted(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part != "[key]":
            out += f".{part}" if out else part
    return out


def _problem(error: Any) -> str:
    kind, msg = error["type"], error["msg"]
    if kind == "missing":
        return "missing required field"
    if kind == "extra_forbidden":
        return "unknown field"
    msg = msg.removeprefix("Value error, ")
    if "[key]" in error["loc"]:
        return f"bad key: {msg}"
    if kind.startswith("value_error") or kind == "assertion_error":
        return msg
    shown = repr(error.get("input"))
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{msg}, got {shown}"


def validation_error(source: Path, exc: ValidationError, prefix: str = "") -> InputError:
    """The first pydantic error as a one-line InputError with a dotted field path."""
    first = exc.errors()[0]
    field = _dotted(tuple(first["loc"]))
    if prefix:
        field = f"{prefix}.{field}" if field else prefix
    return InputError(display_path(source), field, _problem(first))


def _validate(model: type[CardT], data: Any, source: Path, prefix: str = "") -> CardT:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(source, exc, prefix) from None


def load_persona(path: Path) -> Persona:
    data = _mapping(path)
    card = _validate(PersonaCard, data, path)
    return Persona(**card.model_dump(), content_hash=card_hash(card))


def load_scenario(path: Path, edition: int | None = None) -> Scenario:
    """A scenario card; with an edition, also where that edition keeps the hidden need."""
    data = _mapping(path)
    card = _validate(ScenarioCard, data, path)
    if edition is not None and edition >= CASE_NEEDS and card.hidden_need is not None:
        raise InputError(display_path(path), "hidden_need", f"not a scenario field in edition "
                         f"{edition}: each case states its persona's hidden need (cases[].hidden_need)")
    if edition is not None and edition < CASE_NEEDS and card.hidden_need is None:
        raise InputError(display_path(path), "hidden_need", "missing required field")
    return Scenario(**card.model_dump(), content_hash=card_hash(card))


def _mapping(path: Path) -> dict[str, Any]:
    data = read_yaml(path)
    if not isinstance(data, dict):
        got = "an empty file" if data is None else type(data).__name__
        raise InputError(display_path(path), "", f"expected a mapping (one card), got {got}")
    return data


def _card_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise InputError(display_path(folder), "", "directory not found")
    return sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def split_language(name: str) -> Language:
    """A split's language from its name: test-zh is Chinese, test and test-v1 English."""
    return next((lang for lang in OTHER_LANGUAGES if name.endswith(f"-{lang}")), DEFAULT_LANGUAGE)


def _language_cards(folder: Path) -> list[tuple[Path, Language]]:
    """The card files of a kind: English at the folder's top, other languages in subfolders."""
    files = [(p, DEFAULT_LANGUAGE) for p in _card_files(folder)]
    for lang in OTHER_LANGUAGES:
        if (folder / lang).is_dir():
            files += [(p, lang) for p in _card_files(folder / lang)]
    return files


def _in_its_folder(path: Path, card: NamedT, folder_language: Language, kind: str) -> NamedT:
    if card.language != folder_language:
        home = f"{kind}s/{card.language}/" if card.language != DEFAULT_LANGUAGE else f"{kind}s/"
        raise InputError(display_path(path), "language", f"{card.language!r}, but the card is in the "
                         f"{folder_language!r} folder: a {card.language} card lives in {home}")
    return card


def _unique(cards: list[tuple[Path, NamedT]], kind: str) -> dict[str, tuple[Path, NamedT]]:
    by_id: dict[str, tuple[Path, NamedT]] = {}
    for path, card in cards:
        card_id = card.id
        if card_id in by_id:
            other = display_path(by_id[card_id][0])
            raise InputError(
                display_path(path), "id", f"duplicate {kind} id {card_id!r} (also in {other})"
            )
        by_id[card_id] = (path, card)
    return by_id
