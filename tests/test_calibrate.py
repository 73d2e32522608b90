"""IEDR judge and `calibrate`: parsing, retries against the fake server, comparison with the
authored levels, and the command end to end through an openai:fake@URL binding."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from emobench.episode.roles import derive_seed
from emobench.judging.calibrate_cli import calibrate
from emobench.judging.iedr import ITEMS, compare, iedr_messages, parse_iedr, rate_case
from emobench.prompts import load_template
from emobench.registry import Case, IEDRLevels, Registry
from emobench.run.runner import ROOT
from tests.conftest import fake_caller
from tests.fake_openai import FakeOpenAIServer, FakeState

TEMPLATE = load_template(ROOT / "judges" / "iedr.j2")
RETRIES = 2
# demo4-01 as authored: C = -(2 + 2 + 3) = -7, A = -(4 + 4 + 6) = -14, P = -(2 + 4 + 3) = -9,
# |P0| = sqrt(49 + 196 + 81) = 18.1, easy.
DEMO_01 = {"C1": 1, "C2": 1, "C3": 1, "A1": 2, "A2": 1, "A3": 2, "P1": 1, "P2": 1, "P3": 1}


def _rating(levels: dict[str, Any] | None = None, **override: Any) -> str:
    return json.dumps({"notes": "masked grief, low agency", **(levels or DEMO_01), **override})


BAD = {
    "malformed_json": ('{"notes": "x", "C1": 1,', "not JSON"),
    "out_of_range": (_rating(A2=4), "A2"),
    "truncated": (_rating()[: len(_rating()) // 2], "not JSON"),
}


def test_parse_iedr_reads_nine_levels() -> None:
    assert parse_iedr(_rating(), "stop") == IEDRLevels(**DEMO_01)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("levels: 1, 2, 3", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        (_rating(C3=4), "C3"),
        (_rating(P1=-1), "P1"),
        (_rating(A1="2"), "A1"),
        (_rating(A1=True), "A1"),
        (json.dumps({k: v for k, v in DEMO_01.items() if k != "P3"}), "P3"),
        (_rating(dict.fromkeys(ITEMS, 0)), "all nine levels are 0"),
    ],
)
def test_parse_iedr_rejects_invalid_output(text: str, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        parse_iedr(text, "stop")


def test_parse_iedr_rejects_truncation() -> None:
    with pytest.raises(ValueError, match="truncated"):
        parse_iedr(_rating(), "length")


def test_the_judge_sees_the_cards_but_not_the_authored_levels(registry: Registry) -> None:
    case = registry.cases("demo")[0]
    system, user = iedr_messages(TEMPLATE, case)
    assert "A2 emotional accessibility" in system["content"] and case.persona.name not in system["content"]
    assert case.hidden_need in user["content"] and case.persona.background in user["content"]
    assert not re.search(r"\b[CAP][123]\b\W*[:=]\s*\d", user["content"].split("Return only JSON")[0])


@pytest.mark.parametrize("fault", sorted(BAD))
def test_an_invalid_rating_is_retried_then_recorded_missing(fault: str, registry: Registry) -> None:
    bad, error = BAD[fault]
    case = registry.cases("demo")[0]
    with FakeOpenAIServer(FakeState(responder=lambda body: bad)) as server:
        judge = fake_caller(server.base_url, "judge", "judge-0")
        rated, calls = asyncio.run(rate_case(judge, TEMPLATE, case, 4, RETRIES))
        seeds = [r["body"]["seed"] for r in server.state.requests]
        formats = {r["body"]["response_format"]["json_schema"]["name"] for r in server.state.requests}
    assert rated is None  # missing, never level 0
    assert len(calls) == RETRIES + 1 and all(c.error and re.search(error, c.error) for c in calls)
    assert seeds == [derive_seed(4, "iedr", case.id, "judge-0", a) for a in range(RETRIES + 1)] == [c.seed for c in calls]
    assert formats == {"iedr_levels"}


def test_a_rating_that_recovers_on_retry_is_used(registry: Registry) -> None:
    answers = iter(["{", _rating()])
    with FakeOpenAIServer(FakeState(responder=lambda body: next(answers))) as server:
        judge = fake_caller(server.base_url, "judge", "j")
        rated, calls = asyncio.run(rate_case(judge, TEMPLATE, registry.cases("demo")[0], 0, RETRIES))
    assert rated == IEDRLevels(**DEMO_01)
    assert [c.error is None for c in calls] == [False, True]


def test_compare_reports_differences_bands_and_disagreement(registry: Registry) -> None:
    case = registry.cases("demo")[0]
    assert case.iedr.model_dump() == DEMO_01
    same = compare(case, IEDRLevels(**DEMO_01))
    assert same["diff"] == dict.fromkeys(ITEMS, 0) and not same["disagree"]
    assert same["p0_authored"] == same["p0_rated"] == [-7, -14, -9] and same["band_authored"] == "easy"
    # C1 one level up and A1 one level down: no item off by 2, band kept
    # (C = -9, A = -12, |P0| = sqrt(81 + 144 + 81) = 17.5, easy).
    near = compare(case, IEDRLevels(**{**DEMO_01, "C1": 2, "A1": 1}))
    assert near["diff"]["C1"] == 1 and near["diff"]["A1"] == -1 and not near["disagree"]
    # A2 1 -> 3 and P2 1 -> 3: A = -(4 + 12 + 6) = -22, P = -(2 + 12 + 3) = -17,
    # |P0| = sqrt(49 + 484 + 289) = 28.7, medium.
    far = compare(case, IEDRLevels(**{**DEMO_01, "A2": 3, "P2": 3}))
    assert far["diff"]["A2"] == far["diff"]["P2"] == 2 and far["p0_rated"] == [-7, -22, -17]
    assert (far["band_authored"], far["band_rated"], far["disagree"]) == ("easy", "medium", True)
    # Two levels off on one item without leaving the band is still a disagreement:
    # A2 1 -> 3 alone gives A = -22 and |P0| = sqrt(49 + 484 + 81) = 24.8, still easy.
    gap = compare(case, IEDRLevels(**{**DEMO_01, "A2": 3}))
    assert gap["diff"]["A2"] == 2 and gap["band_rated"] == "easy" and gap["disagree"]


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.callback()(lambda: None)  # keep "calibrate" a subcommand, as it is once mounted
    app.command()(calibrate)
    return app


def _respond_by_persona(registry: Registry, bad_for: str | None = None) -> Any:
    """demo4-01 (Zoe) is rated with A2 = P2 = 3 (a disagreement); demo4-02 as authored."""
    demo_02 = registry.cases("demo")[1].iedr.model_dump()

    def respond(body: dict[str, Any]) -> str:
        user = body["messages"][1]["content"]
        if bad_for and bad_for in user:
            return "I would rate these fairly high overall."
        if "Zoe" in user:
            return _rating(A2=3, P2=3)
        return _rating(demo_02)

    return respond


def test_calibrate_prints_disagreements_and_writes_the_report(registry: Registry, tmp_path: Path) -> None:
    out = tmp_path / "reports" / "iedr.json"
    with FakeOpenAIServer(FakeState(responder=_respond_by_persona(registry))) as server:
        binding = f"openai:fake-model@{server.base_url}"
        result = CliRunner().invoke(_cli(), ["calibrate", "--split", "demo", "--judge", binding, "--out", str(out)],
                                    env={"COLUMNS": "200"})
        sampling = {(r["body"]["temperature"], r["body"]["max_tokens"]) for r in server.state.requests}
    assert result.exit_code == 0, result.output
    assert "demo4-01" in result.output and "easy → medium" in result.output and "A2 1→3, P2 1→3" in result.output
    assert "demo4-02" not in result.output.split("Agreement per item")[0]  # agrees, so not in the table
    assert "band matches in 50% of 2 rated case(s); 1 disagreement(s)" in result.output
    assert sampling == {(0.0, 1024)}
    report = json.loads(out.read_text())
    assert report["split"] == "demo" and report["judge"]["model"] == "fake-model" and report["template"] == TEMPLATE.ref
    assert report["summary"]["items"]["A2"]["exact"] == 0.5 and report["summary"]["items"]["C1"]["exact"] == 1.0
    by_id = {c["case_id"]: c for c in report["cases"]}
    assert by_id["demo4-01"]["disagree"] and not by_id["demo4-02"]["disagree"]
    assert by_id["demo4-01"]["diff"]["A2"] == 2 and len(by_id["demo4-01"]["calls"]) == 1


def test_calibrate_reports_a_case_with_no_valid_rating(registry: Registry, tmp_path: Path) -> None:
    out = tmp_path / "iedr.json"
    with FakeOpenAIServer(FakeState(responder=_respond_by_persona(registry, bad_for="Mei-Lin"))) as server:
        binding = f"openai:fake-model@{server.base_url}"
        result = CliRunner().invoke(_cli(), ["calibrate", "--split", "demo", "--judge", binding, "--out", str(out)],
                                    env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "demo4-02: no valid rating after 3 attempt(s): not JSON" in result.output
    report = json.loads(out.read_text())
    assert report["summary"]["rated"] == 1 and report["summary"]["invalid"] == 1
    missing = next(c for c in report["cases"] if c["case_id"] == "demo4-02")
    assert not missing["valid"] and "rated" not in missing and all(c["error"] for c in missing["calls"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--judge", "nonsense"], "--judge: binding: bad role binding"),
    ],
)
def test_calibrate_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(_cli(), ["calibrate", *args])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_compare_uses_the_case_band(registry: Registry) -> None:
    # demo4-02 as authored is hard: C = -(6 + 6 + 9) = -21, A = -(4 + 12 + 6) = -22,
    # P = -(2 + 12 + 3) = -17, |P0| = sqrt(441 + 484 + 289) = 34.8.
    case: Case = registry.cases("demo")[1]
    row = compare(case, case.iedr)
    assert row["p0_authored"] == [-21, -22, -17] and row["band_authored"] == row["band_rated"] == "hard"
