"""PromptTemplate.block renders what plain jinja renders: its short cut for a dict's keys and its
context built from a copy of the globals change the speed, never the text or the errors."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jinja2
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from emobench.prompts import load_template

SOURCE = """{% block user %}
{% for line in lines %}{{ line.speaker }}: {{ line.text }} / {{ line.items }} / {{ line.get }}
{% endfor %}{{ person.name }} {% for i in range(2) %}{{ i }}{% endfor %} {{ loose.get("x", "-") }}
{% endblock %}"""
PLAIN = jinja2.Environment(
    undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False, autoescape=False
)


def plain_block(context: dict[str, Any]) -> str:
    template = PLAIN.from_string(SOURCE)
    return "".join(template.blocks["user"](template.new_context(context))).strip()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path: Path = tmp_path_factory.mktemp("render") / "t.j2"
    path.write_text(SOURCE, encoding="utf-8")
    return load_template(path)


# A dict key named like a dict method ("items") still reads the method, as jinja does.
LINES = [{"speaker": "Mara", "text": "hi", "items": "a key"}, {"speaker": "Assistant", "text": "hello", "get": 1}]
CONTEXT = {"lines": LINES, "person": SimpleNamespace(name="Mara"), "loose": {"x": 1}}


def test_the_block_is_plain_jinjas_text(template: Any) -> None:
    text = template.block("user", **CONTEXT)
    assert text == plain_block(CONTEXT)
    assert "Mara: hi" in text and "built-in method items" in text and "01" in text


@pytest.mark.parametrize("broken", [{"lines": [{"text": "no speaker"}]}, {"person": SimpleNamespace()}])
def test_a_missing_key_or_attribute_fails_as_in_plain_jinja(template: Any, broken: dict[str, Any]) -> None:
    context = {**CONTEXT, **broken}
    with pytest.raises(jinja2.UndefinedError) as plain:
        plain_block(context)
    with pytest.raises(jinja2.UndefinedError) as ours:
        template.block("user", **context)
    assert str(ours.value) == str(plain.value)


# A shipped rubric's transcript, whatever its lines hold (dicts or objects, control characters),
# renders as plain jinja renders it.
RUBRIC = Path(__file__).resolve().parents[1] / "judges" / "mdep.j2"
FIELDS = st.fixed_dictionaries({"speaker": st.sampled_from(["Mara", "Assistant", "\x00speaker\x00"]), "text": st.text()})
LINE = st.one_of(FIELDS, FIELDS.map(lambda line: SimpleNamespace(**line)))


PLAIN_RUBRIC = PLAIN.from_string(RUBRIC.read_text(encoding="utf-8"))


def rubric_block(context: dict[str, Any]) -> str:
    template = PLAIN_RUBRIC
    return "".join(template.blocks["user"](template.new_context(context))).strip()


@settings(max_examples=60, deadline=None)
@given(st.lists(LINE, max_size=6), st.text())
@example([{"speaker": "Mara", "text": "a"}, {"speaker": "Assistant", "text": "b"}], "\x00speaker\x00: \x00text\x00\n")
def test_a_rubric_transcript_renders_as_plain_jinja(transcript: list[Any], reply: str) -> None:
    context = {"transcript": transcript, "reply": reply}
    assert load_template(RUBRIC).block("user", **context) == rubric_block(context)


def test_a_line_without_its_field_fails_as_in_plain_jinja() -> None:
    context = {"transcript": [{"speaker": "Mara", "text": "hi"}, {"speaker": "Assistant"}], "reply": "ok"}
    with pytest.raises(jinja2.UndefinedError) as plain:
        rubric_block(context)
    with pytest.raises(jinja2.UndefinedError) as ours:
        load_template(RUBRIC).block("user", **context)
    assert str(ours.value) == str(plain.value)
