"""`emobench play` runs through the other commands, over HTTP (no browser): people play the user,
the simulator plays the same cases, `validate --fidelity` compares them and the leaderboard shows
it; a person as the supporter is a gate candidate against a model; `judge --panel` re-judges."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from emobench.records import EpisodeJudgement
from emobench.rundir import RunDir, read_records
from emobench.validation.fidelity.runs import read_matched
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState
from tests.play_support import PlayServer, emobench

CASES = ["demo4-01", "demo4-02"]
# What each person does, case by case: the meter they set with each message, then how they leave.
ANN = {"case": "demo4-01", "meters": [40, 55, 61], "leave": ("thanks, bye", 70)}
BOB = {"case": "demo4-02", "meters": [25, 20, 35], "leave": ("", 10)}  # leaves without a word


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(FakeState()) as server:
        yield server


def _kind(body: dict[str, Any]) -> str:
    return str((body.get("response_format") or {}).get("json_schema", {}).get("name", "text"))


def _play_user(server: PlayServer, handle: str, plan: dict[str, Any]) -> None:
    token = server.join(handle)
    status, view = server.call("POST", f"/api/p/{token}/episodes", {"case": plan["case"]})
    assert status == 200 and view["your_turn"], view
    path = f"/api/p/{token}/episodes/{view['id']}"
    for number, meter in enumerate(plan["meters"]):
        status, view = server.call("POST", path + "/turn", {"message": f"message {number} from {handle}", "meter": meter})
        assert status == 200 and not view["done"] and view["meter"] == meter, view
    message, meter = plan["leave"]
    status, view = server.call("POST", path + "/leave", {"message": message, "meter": meter})
    assert status == 200 and view["done"], view


@pytest.fixture(scope="module")
def user_runs(fake: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two people play the user, one case each, against subject-a; then `emobench run` with the simulator."""
    root = tmp_path_factory.mktemp("play-user")
    # min_turns above the turns played: no stop rule ends an episode before the person leaves.
    config = write_config(root / "play.yaml", fake.base_url, max_turns=6, min_turns=5)
    server = PlayServer(config, "user", root / "play")
    try:
        _play_user(server, "ann", ANN)
        _play_user(server, "bob", BOB)
    finally:
        server.stop()
    ran = emobench("run", "--config", str(config), "--out", str(root), "--run-id", "sim", "--no-progress")
    assert ran.returncode == 0, ran.stderr
    return {"play": root / "play", "sim": root / "sim", "root": root}


def test_people_as_the_user_against_the_simulator(user_runs: dict[str, Path]) -> None:
    play, sim, root = user_runs["play"], user_runs["sim"], user_runs["root"]
    matched = read_matched(play, sim)
    assert matched.human_users == ["human:ann", "human:bob"] and matched.simulator_user == "fake-model"
    starts = {e.case_id: e.meters[0] for e in matched.simulator}
    for plan in (ANN, BOB):
        (view,) = [e for e in matched.human if e.case_id == plan["case"]]
        # The meter path is the card's start, then exactly what the person set, the leave included.
        assert view.meters == (starts[plan["case"]], *plan["meters"], plan["leave"][1])
        assert view.stop_reason == "user_left" and view.subject == "fake-model"
        assert len(view.moves) == len(plan["meters"]) + bool(plan["leave"][0])  # a silent leave is no move

    validated = emobench("validate", "--fidelity", str(play), str(sim), "--n-boot", "100")
    assert validated.returncode == 0, validated.stderr
    fid = json.loads((play / "validity.json").read_text())["fidelity"]
    assert fid["matched"] == {"pairs": 2, "cases": CASES, "subjects": ["fake-model"], "human_episodes": 2,
                              "simulator_episodes": 2, "unmatched_human": 0, "unmatched_simulator": 0}
    assert fid["human_users"] == ["human:ann", "human:bob"]
    meter = [(t["turn"], t["n"], t["mean"]) for t in fid["meter"]["human"]]
    paths = [[starts[p["case"]], *p["meters"], p["leave"][1]] for p in (ANN, BOB)]
    assert meter == [(turn + 1, 2, (a + b) / 2) for turn, (a, b) in enumerate(zip(*paths, strict=True))]
    assert fid["stops"]["leave_rate"]["human"] == 1.0 and fid["stops"]["reasons"]["user_left"]["human"] == 2
    assert fid["discriminator"]["n_turns"]["human"] == 3 + 1 + 3
    assert fid["turn_words"]["human"]["median"] == 4  # "message N from ann"

    built = emobench("leaderboard", "build", str(play), "-o", str(root / "page"), "--n-boot", "50")
    assert built.returncode == 0, built.stderr
    html = (root / "page" / "index.html").read_text()
    section = html[html.index('id="validity"'):]
    assert "Simulator fidelity" in section and "<code>human:ann, human:bob</code>" in section


def test_a_play_run_is_judged_again_by_another_panel(fake: FakeOpenAIServer, user_runs: dict[str, Path]) -> None:
    play = user_runs["play"]
    panel = user_runs["root"] / "pair.yaml"
    panel.write_text(yaml.safe_dump({"name": "pair", "judges": [
        {"binding": f"openai:fake-model@{fake.base_url}", "label": "judge-x"}]}))
    before, old = len(fake.state.requests), (play / "judgements.jsonl").read_bytes()
    judged = emobench("judge", str(play), "--panel", str(panel), "--no-cache")
    assert judged.returncode == 0, judged.stderr
    assert {_kind(r["body"]) for r in fake.state.requests[before:]} <= {"mdep_verdict", "holistic_verdict"}
    episodes = {e.key: e for e in RunDir(play).read_episodes()}
    new = read_records(play / "panels" / "pair" / "judgements.jsonl", EpisodeJudgement)
    assert {j.key for j in new} == set(episodes) and len(new) == 2
    for j in new:
        assert j.mdep is not None and len(j.mdep) == len(episodes[j.key].turns)
        assert {v.judge for t in j.mdep for v in t.verdicts} == {"judge-x"}
    assert len(pd.read_parquet(play / "panels" / "pair" / "scores.parquet")) == 2
    assert (play / "judgements.jsonl").read_bytes() == old  # the run's own verdicts stay


def _play_supporter(server: PlayServer, token: str, case: str) -> None:
    status, view = server.call("POST", f"/api/p/{token}/episodes", {"case": case})
    assert status == 200, view
    while not view["done"]:
        status, view = server.call("POST", f"/api/p/{token}/episodes/{view['id']}/turn",
                                   {"message": "That sounds hard. What worries you most?"})
        assert status == 200, view


def test_a_person_as_the_supporter_is_gated_against_a_model(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.yaml", fake.base_url, max_turns=3, min_turns=2)
    server = PlayServer(config, "supporter", tmp_path / "people")
    try:
        bea = server.join("bea")
        for case in CASES:
            _play_supporter(server, bea, case)
        _play_supporter(server, server.join("cal"), CASES[0])
    finally:
        server.stop()
    ran = emobench("run", "--config", str(config), "--out", str(tmp_path), "--run-id", "model", "--no-progress")
    assert ran.returncode == 0, ran.stderr
    gate = ["gate", "--baseline", str(tmp_path / "model"), "--candidate", str(tmp_path / "people"), "--n-boot", "200"]

    two = emobench(*gate)  # two people played: the gate asks which, as for any run of several subjects
    assert two.returncode == 2 and two.stderr.strip().count("\n") == 0
    assert "2 subjects ['human:bea', 'human:cal']; choose one with --candidate-subject" in two.stderr

    compared = emobench(*gate, "--candidate-subject", "human:bea")
    assert compared.returncode == 0, compared.stderr
    assert "Candidate: `human:bea` from `people`" in compared.stdout and "Baseline: `subject-a` from `model`" in compared.stdout
    scores = pd.read_parquet(tmp_path / "people" / "scores.parquet")
    bea = scores[scores["subject"] == "human:bea"]["epmq"].mean()
    row = next(line for line in compared.stdout.splitlines() if line.startswith("| overall |"))
    assert row.split("|")[4].strip() == f"{bea:.3f}" and row.split("|")[7].strip() == "2"

    refused = emobench(*gate, "--candidate-subject", "human:cal")  # one shared case: too few to pair
    assert refused.returncode == 2 and refused.stderr.strip().count("\n") == 0
    assert "1 case(s) with epmq in slice 'overall' overlap the baseline; need 2" in refused.stderr
