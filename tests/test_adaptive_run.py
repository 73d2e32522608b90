"""`emobench run --stop-when` (docs/adaptive.md) against the fake server: a grid where one subject
is clearly better stops early, one where the two are equal plays every case; the stop shows in
the CLI, manifest, report.json and leaderboard; --resume plays on; a bad SPEC is one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from emobench.cli import app
from emobench.errors import InputError
from emobench.run.adaptive import case_order, default_wave, width_text
from emobench.run.runner import ROOT
from emobench.run.stop_spec import CallBudget, CostBudget, HalfWidth, PairResolved, PairsResolved, parse_rule
from emobench.rundir import RunDir
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder

PLATITUDES = yaml.safe_load((ROOT / "prompts" / "scripted" / "platitude.yaml").read_text())["lines"]
CASES = 6  # the first six cases of the test split


def judge_echo_badly(body: dict[str, Any]) -> str:
    """default_responder, except that the judge marks every turn without a platitude (the echo
    subject's) as a regression on each axis: scripted:platitude is clearly the better subject."""
    fmt = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    if fmt == "mdep_verdict" and not any(line in body["messages"][-1]["content"] for line in PLATITUDES):
        axis = {"progress": 0, "regression": 2, "evidence": "it repeats me", "reason": "echoes"}
        return json.dumps({"C": axis, "A": axis, "P": axis})
    return default_responder(body)


@pytest.fixture(scope="module")
def server() -> Any:
    with FakeOpenAIServer(FakeState(responder=judge_echo_badly)) as srv:
        yield srv


def _config(path: Path, base_url: str, other: str, **extra: object) -> Path:
    subjects = [{"binding": "scripted:platitude", "label": "platitude"}, {"binding": f"scripted:{other}", "label": "other"}]
    return write_config(path, base_url, split="test", subjects=subjects, max_turns=1, min_turns=1, **extra)


def emobench(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "220"})


def _run(config: Path, out: Path, run_id: str, *extra: str) -> Any:
    # Without the response cache: its answers, from another module's server, would stand in for this judge's.
    res = emobench("run", "--config", str(config), "--out", str(out), "--run-id", run_id, "--no-progress",
                   "--limit", str(CASES), "--no-cache", *extra)
    assert res.exit_code == 0, res.output
    return res


@pytest.fixture(scope="module")
def stopped(server: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("adaptive")
    res = _run(_config(out / "c.yaml", server.base_url, "echo"), out, "clear", "--stop-when", "pairs-resolved",
               "--wave", "1")
    return out / "clear", res


def test_a_clearly_better_subject_stops_the_run_early(stopped: tuple[Path, Any]) -> None:
    run_dir, res = stopped
    rd = RunDir(run_dir)
    block = rd.read_manifest()["adaptive"]
    played = block["cases_played"]
    assert block["stopped"] and 2 <= played < CASES and block["population"] == CASES
    assert block["reason"].startswith("pairs-resolved") and block["rules"] == ["pairs-resolved"]
    (pair,) = block["pairs"]
    assert pair["n"] == played and pair["lower"] > 0  # platitude - echo: certainly positive
    # The cases played are the first of the seeded order; every subject played each of them.
    ids = [f"test4-{i:02d}" for i in range(1, CASES + 1)]
    episodes = rd.read_episodes()
    assert {e.case_id for e in episodes} == set(case_order(ids)[:played]) and len(episodes) == 2 * played
    assert 0 < block["calls_saved_estimate"] < block["calls_full_estimate"]
    assert rd.read_report()["adaptive"] == block
    assert f"stopped early after {played} of {CASES} cases" in res.output
    # The leaderboard puts the sequence beside the bootstrap CI and says which holds.
    assert "EPM-Q CS" in res.output and "Stopped early" in res.output
    shown = emobench("leaderboard", "show", str(run_dir))
    assert shown.exit_code == 0 and "EPM-Q CS" in shown.output, shown.output
    # So does the run's episode list.
    listed = emobench("show", str(run_dir))
    assert listed.exit_code == 0 and f"stopped early after {played} of {CASES} cases" in listed.output, listed.output


@pytest.mark.soak  # the pages' plots take ~5 s
def test_the_run_page_and_the_leaderboard_page_say_where_the_run_stopped(stopped: tuple[Path, Any], tmp_path: Path) -> None:
    run_dir, _ = stopped
    played = RunDir(run_dir).read_manifest()["adaptive"]["cases_played"]
    assert emobench("report", str(run_dir)).exit_code == 0
    assert f"stopped early after {played} of {CASES} cases" in (run_dir / "report.html").read_text()
    assert emobench("leaderboard", "build", str(run_dir), "-o", str(tmp_path), "--n-boot", "50").exit_code == 0
    page = (tmp_path / "index.html").read_text()
    assert 'id="sequential-note"' in page and f"after {played} of {CASES} cases" in page
    assert page.count('class="sequence"') == 2 and "EPM-Q CS (valid)" in page


def test_resume_without_stop_when_plays_on(stopped: tuple[Path, Any], tmp_path: Path) -> None:
    src, _ = stopped
    run_dir = tmp_path / "clear"
    run_dir.mkdir()
    for f in src.iterdir():
        if f.is_file():
            (run_dir / f.name).write_bytes(f.read_bytes())
    res = emobench("run", "--resume", str(run_dir), "--no-progress", "--no-cache")
    assert res.exit_code == 0, res.output
    rd = RunDir(run_dir)
    assert len(rd.read_episodes()) == 2 * CASES and "adaptive" not in rd.read_manifest()
    assert "adaptive" not in rd.read_report() and "EPM-Q CS" not in res.output
    # The rule again on the full run: the same waves settle it, and only their calls are counted.
    again = emobench("run", "--resume", str(run_dir), "--no-progress", "--stop-when", "pairs-resolved", "--wave", "1")
    assert again.exit_code == 0, again.output
    before, after = RunDir(src).read_manifest()["adaptive"], rd.read_manifest()["adaptive"]
    assert {k: after[k] for k in ("cases_played", "calls", "pairs")} == {k: before[k] for k in ("cases_played", "calls", "pairs")}


def test_equal_subjects_play_every_case(server: FakeOpenAIServer, tmp_path: Path) -> None:
    res = _run(_config(tmp_path / "c.yaml", server.base_url, "platitude"), tmp_path, "equal",
               "--stop-when", "pairs-resolved", "--wave", "2")
    rd = RunDir(tmp_path / "equal")
    block = rd.read_manifest()["adaptive"]
    assert not block["stopped"] and block["cases_played"] == CASES and block["waves_played"] == 3
    assert block["pairs"][0]["mean"] == 0 and not block["pairs"][0]["lower"] > 0
    assert len(rd.read_episodes()) == 2 * CASES and block["calls_saved_estimate"] == 0
    assert f"played to the end after {CASES} of {CASES} cases" in res.output and "EPM-Q CS" not in res.output


def test_a_call_budget_stops_before_the_wave_that_would_pass_it(server: FakeOpenAIServer, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", server.base_url, split="test", max_turns=1, min_turns=1,
                       subjects=[{"binding": "scripted:platitude", "label": "platitude"}])
    _run(cfg, tmp_path, "budget", "--stop-when", "calls<=8", "--wave", "1")
    block = RunDir(tmp_path / "budget").read_manifest()["adaptive"]
    per_case = block["calls"] / block["cases_played"]
    assert block["stopped"] and 0 < block["calls"] <= 8 < block["calls"] + per_case
    assert block["reason"] == "calls<=8: the next wave would pass it"


def test_a_budgeted_run_counts_every_request_the_server_received(server: FakeOpenAIServer, tmp_path: Path) -> None:
    # Two subjects: the pairwise judge compares them after each wave, and its calls count too.
    before = len(server.state.requests)
    _run(_config(tmp_path / "c.yaml", server.base_url, "echo"), tmp_path, "both", "--stop-when", "calls<=30",
         "--wave", "1")
    received = len(server.state.requests) - before
    rd = RunDir(tmp_path / "both")
    block = rd.read_manifest()["adaptive"]
    assert block["stopped"] and block["calls"] == received <= 30
    assert any(r["body"]["response_format"]["json_schema"]["name"] == "pairwise_verdict"
               for r in server.state.requests[before:])
    accounted = rd.read_report()["accounting"]
    live = [a["calls"] for key, a in accounted.items() if not key.split(":", 1)[1].startswith("scripted:")]
    assert sum(live) == received  # the scripted subjects' replies are no model call
    full = block["calls_full_estimate"]
    assert full == round(received * CASES / block["cases_played"]) and block["calls_saved_estimate"] == full - received


@pytest.mark.parametrize(("spec", "needle"), [
    ("half-width<=0", "must be positive"), ("half-width<=x", "not a positive number"), ("pair=a", "pair=A,B"),
    ("calls<=1.5", "whole number"), ("everything", "expected half-width<=H"), ("", "expected"),
])
def test_a_bad_spec_is_one_line_naming_the_flag(spec: str, needle: str, tmp_path: Path) -> None:
    res = emobench("run", "--config", str(tmp_path / "absent.yaml"), "--stop-when", spec)
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert res.output.startswith("error: --stop-when: ") and needle in res.output


@pytest.mark.parametrize(("extra", "needle"), [
    (("--stop-when", "pair=platitude,nobody"), "'nobody' is not a subject of this run"),
    (("--stop-when", "cost<=2"), "no role of this run has a price"),
    (("--stop-when", "pairs-resolved", "--shard", "0/2"), "cannot be sharded"),
    (("--wave", "3",), "--wave: 3: waves are for an adaptive run"),
])
def test_what_cannot_stop_is_refused_before_a_call(extra: tuple[str, ...], needle: str, tmp_path: Path) -> None:
    cfg = _config(tmp_path / "c.yaml", "http://127.0.0.1:9/v1", "echo")
    res = emobench("run", "--config", str(cfg), "--out", str(tmp_path), "--no-progress", *extra)
    assert res.exit_code == 2 and res.output.count("\n") == 1 and needle in res.output, res.output
    assert not any(p.is_dir() for p in tmp_path.iterdir())  # no run directory was made


@settings(max_examples=15, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("half-width<=pairsco,=$.09 x")), max_size=16))
@example("  ").via("a run of spaces is quoted back as typed, not collapsed")
def test_the_command_refuses_a_bad_spec_in_one_line(spec: str) -> None:
    try:
        parse_rule(spec)
    except InputError as exc:
        res = emobench("run", "--config", "absent.yaml", f"--stop-when={spec}")
        assert res.exit_code == 2 and res.output == f"error: {exc}\n", res.output


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("half-width<=pairsco,=$.0123456789 xé-")), max_size=24) | st.text(max_size=12))
def test_the_parser_answers_every_text_with_a_rule_or_one_line(spec: str) -> None:
    try:
        rule = parse_rule(spec)
    except InputError as exc:
        assert str(exc).startswith("--stop-when: ") and "\n" not in str(exc)
        return
    assert parse_rule(str(rule)) == rule  # what the manifest records reads back as the same rule


@given(st.floats(min_value=1e-6, max_value=1e6), st.integers(1, 10**9))
def test_valid_specs_parse_to_their_rules(h: float, n: int) -> None:
    assert parse_rule(f"half-width<={h!r}") == HalfWidth(h)
    assert parse_rule(f" calls <= {n} ") == CallBudget(n)
    assert parse_rule(f"cost<=${h!r}") == CostBudget(h)
    assert parse_rule("pair=a b,c") == PairResolved("a b", "c") and parse_rule("pairs-resolved") == PairsResolved()


@given(st.lists(st.text(min_size=1, max_size=8), unique=True, max_size=30), st.integers(0, 3))
def test_a_subset_plays_in_the_order_the_whole_would(ids: list[str], seed: int) -> None:
    whole = case_order(ids, seed)
    subset = ids[::2]
    assert sorted(whole) == sorted(ids) and case_order(subset, seed) == [c for c in whole if c in set(subset)]


@given(st.integers(1, 4000))
def test_ten_waves_at_most_each_at_most_a_tenth_of_the_split_or_one_case(population: int) -> None:
    wave = default_wave(population)
    assert 1 <= wave <= population and len(range(0, population, wave)) <= 10
    assert wave == 1 or wave - 1 < population / 10


@given(st.floats(min_value=0, max_value=1e-10) | st.floats(min_value=1e-6, max_value=100))
@example(8.881784197001252e-16).via("a zero-width interval's float noise, once printed as ±8.88e-16")
def test_a_half_width_prints_as_the_number_it_means(width: float) -> None:
    text = width_text(width)
    assert "e-1" not in text and float(text) == pytest.approx(width if width > 1e-9 else 0.0, rel=5e-3, abs=1e-9)
