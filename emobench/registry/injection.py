"""Text addressed to the models inside a card: the simulated user and the judges read card
text as data, so a card may not speak to them (patterns in injection.yaml)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from emobench.errors import InputError
from emobench.registry.loader import Registry, display_path
from emobench.registry.words import first_match, patterns

INJECTION = "injection.yaml"


def addressed_to_models(text: str) -> str | None:
    """The words by which a text speaks to the models, or None."""
    return first_match(text, patterns(INJECTION, "patterns"))


def _strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]")


def _problem(file: str, field: str, words: str) -> InputError:
    return InputError(file, field, f"speaks to the models ({words!r}): card text is read by the "
                      "simulated user and the judges as data, never as instructions")


def check_injection(reg: Registry) -> Iterator[InputError]:
    """Every text field of the current edition's cards and cases."""
    for path, card in [*reg.current.personas.values(), *reg.current.scenarios.values()]:
        for field, text in _strings(card.model_dump(exclude={"content_hash", "id"})):
            if words := addressed_to_models(text):
                yield _problem(display_path(path), field, words)
    for case in reg.edition_cases():
        source = reg.current.sources[case.id]
        texts: list[tuple[str, str | None]] = [
            ("opening", case.opening_override),
            ("hidden_need.text", case.case_need.text if case.case_need else None)]
        for field, value in texts:
            if value and (words := addressed_to_models(value)):
                yield _problem(source.file, source.field(field), words)
