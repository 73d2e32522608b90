"""`emobench scenarios validate --reader BINDING` (issue 53): a model reads each case's prose
against its facts; its plumbing on the fake OpenAI server."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from emobench.registry.cli import app
from emobench.registry.loader import display_path
from tests.fake_openai import FakeOpenAIServer, FakeState
from tests.library_attack_kit import reader_of
from tests.library_heldout import Fault, HeldOut, Legitimate, measure
from tests.test_registry_heldout_faults import WORKSHOP
from tests.test_registry_heldout_faults import lib as lib  # the fixture

runner = CliRunner()
QUOTE = "Rowan would have wanted to see the place"


def finds_rowan(body: dict[str, Any]) -> str:
    """A reader that flags the stage naming Rowan's wish, wherever a case shows it."""
    user = body["messages"][-1]["content"]
    found = re.search(r"^\[(\S+) \| (stages\[\d\])\] [^\n]*" + QUOTE, user, re.M)
    findings = [{"file": found.group(1), "field": found.group(2), "quote": QUOTE,
                 "contradicts": "a planted finding"}] if found else []
    return json.dumps({"findings": findings})


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMOBENCH_CACHE", str(tmp_path / "cache"))


def _validate(lib: Path, server: FakeOpenAIServer) -> Any:
    return runner.invoke(app, ["validate", str(lib), "--reader", f"openai:reader@{server.base_url}"])


def test_each_finding_is_one_line_naming_file_and_field(lib: Path) -> None:
    with FakeOpenAIServer(FakeState(responder=finds_rowan)) as server:
        result = _validate(lib, server)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert lines == [f"error: {display_path(lib / WORKSHOP)}: stages[2]: the reader: '{QUOTE}' "
                     "contradicts a planted finding"]
    asked = [request["body"] for request in server.state.requests]
    assert len(asked) == 5  # one call per case of the edition
    assert asked[0]["response_format"]["json_schema"]["name"] == "card_findings"
    assert "CARD>>>" in asked[0]["messages"][-1]["content"]


def test_a_second_run_reads_from_the_cache(lib: Path) -> None:
    with FakeOpenAIServer(FakeState(responder=finds_rowan)) as server:
        first = _validate(lib, server)
        calls = len(server.state.requests)
        second = _validate(lib, server)
    assert second.exit_code == first.exit_code == 2
    assert second.stderr == first.stderr
    assert len(server.state.requests) == calls  # every case came from the cache


def test_an_edited_card_is_read_again(lib: Path) -> None:
    with FakeOpenAIServer(FakeState(responder=finds_rowan)) as server:
        _validate(lib, server)
        calls = len(server.state.requests)
        path = lib / WORKSHOP
        path.write_text(path.read_text().replace(QUOTE, "Rowan would have liked to see the place"))
        result = _validate(lib, server)
    assert result.exit_code == 0, result.output
    assert len(server.state.requests) == calls + 1  # test4-03 alone plays the workshop card


def test_a_clean_reading_passes_and_no_reader_runs_by_default(lib: Path) -> None:
    with FakeOpenAIServer(FakeState(responder=lambda body: '{"findings": []}')) as server:
        plain = runner.invoke(app, ["validate", str(lib)])
        assert plain.exit_code == 0 and not server.state.requests
        result = _validate(lib, server)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: edition 4")


@pytest.mark.parametrize("answer, says", [
    ("The card looks fine to me.", "not JSON"),
    ('{"findings": [{"file": "x.yaml", "field": "stages[0]", "quote": "a"}]}', "findings.0.contradicts"),
    ('{"findings": [{"file": "x.yaml", "field": "stages[0]", "quote": "a", "contradicts": "b"}]}',
     "names x.yaml: stages[0], which case"),
])
def test_a_malformed_answer_is_one_line_naming_the_endpoint(lib: Path, answer: str, says: str) -> None:
    with FakeOpenAIServer(FakeState(responder=lambda body: answer)) as server:
        result = _validate(lib, server)
    assert result.exit_code == 3, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert lines[0].startswith(f"error: endpoint {server.base_url}: the reader's answer on case ")
    assert says in lines[0]


@pytest.mark.parametrize("binding, says", [
    ("scripted:echo", "cannot read a card"), ("openai:m", "expected openai:MODEL@BASE_URL")])
def test_a_binding_that_cannot_read_is_refused_in_one_line(lib: Path, binding: str, says: str) -> None:
    result = runner.invoke(app, ["validate", str(lib), "--reader", binding])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().startswith("error: --reader: binding: ") and says in result.stderr


def test_a_copy_of_the_library_elsewhere_reads_from_the_cache(lib: Path, tmp_path: Path) -> None:
    with FakeOpenAIServer(FakeState(responder=finds_rowan)) as server:
        _validate(lib, server)
        calls = len(server.state.requests)
        copy = tmp_path / "copy"
        shutil.copytree(lib, copy)
        result = _validate(copy, server)
    assert len(server.state.requests) == calls
    assert f"error: {display_path(copy / WORKSHOP)}: stages[2]: the reader: " in result.stderr


POPPED = "She says Rowan popped in on Tuesday with sandwiches."


def finds_popped(body: dict[str, Any]) -> str:
    user = body["messages"][-1]["content"]
    found = re.search(r"^\[(\S+) \| (\S+)\] [^\n]*popped in", user, re.M)
    return json.dumps({"findings": [{"file": found.group(1), "field": found.group(2), "quote": "popped in",
                                     "contradicts": "facts.relatives: Rowan died 2020"}] if found else []})


def test_the_held_out_set_counts_a_readers_finding_at_the_planted_field(tmp_path: Path) -> None:
    held = HeldOut(faulty=[Fault(fault_class="contact with the dead", lang="en", file=WORKSHOP, field="stages[1]",
                                 text=POPPED, expect=("is dead",))],
                   legitimate=[Legitimate(name="a living brother", lang="en", file=WORKSHOP, field="stages[1]",
                                          text="She says Tobin rang last night.")])
    assert measure(held, tmp_path)[0] == {("contact with the dead", "en"): (0, 1)}  # the rules miss it
    with FakeOpenAIServer(FakeState(responder=finds_popped)) as server:
        rates, missed, refused = measure(held, tmp_path, reader_of(f"openai:reader@{server.base_url}"))
    assert rates == {("contact with the dead", "en"): (1, 1)} and not missed and not refused
