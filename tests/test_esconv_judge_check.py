"""`emobench validate --judge-check esconv`: a panel against the seekers' own ratings, on our own
fixture (tests/fixtures/esconv, no ESConv text), through the loopback fake server. The statistics
against values worked out by hand, the baselines, merging into validity.json, the response cache,
--dry-run, one-line errors, the page, and one run of the embedded judge on real vLLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import scipy.stats

from emobench.publish.html import write_page
from emobench.publish.leaderboard import build_leaderboard
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "esconv"
# The fake MDEP judge's levels per reply, keyed by a phrase of the reply: (C, A, P) progress and
# regression. A reply scores the sum of its EPM points: progress 0/1/2 -> 0/1/3, regression 1 -> -2.
REPLIES: dict[str, tuple[tuple[int, int, int], tuple[int, int, int]] | None] = {
    "worries you most": ((1, 0, 0), (0, 0, 0)),  # 1
    "timetable": ((0, 0, 0), (0, 1, 0)),  # -2 (with "Lots of people" in the same reply)
    "pressure is piling": ((1, 2, 0), (0, 0, 0)),  # 4
    "heaviest": ((1, 0, 0), (0, 0, 0)),  # 1
    "move on so quickly": ((2, 1, 0), (0, 0, 0)),  # 4
    "how much you cared": ((0, 2, 1), (0, 0, 0)),  # 4
    "how are you doing": ((0, 0, 0), (0, 0, 0)),  # 0
    "Waiting for offers": ((2, 2, 0), (0, 0, 0)),  # 6
    "extension": ((1, 0, 1), (0, 0, 0)),  # 2
    "What happened between": None,  # never parseable: the point is invalid
    "lost a friend": ((1, 1, 0), (0, 0, 0)),  # 2
}
# The fake holistic judge's score (every dimension) per chat, keyed by its first seeker message.
CHATS = {"exams next week": 3, "ex moved on fast": 6, "contract ends next month": 8, "stopped talking to me": 5}


def _responder(body: dict[str, Any]) -> str:
    fmt = body["response_format"]["json_schema"]["name"]
    text = body["messages"][-1]["content"]
    if fmt == "holistic_verdict":
        score = next(v for phrase, v in CHATS.items() if phrase in text)
        return json.dumps({d: {"score": score, "evidence": "x", "reason": "y"}
                           for d in ("empathy", "humanlikeness", "persona_adaptation", "coherence")})
    if fmt != "mdep_verdict":
        return default_responder(body)
    reply = text.rsplit("\nAssistant: ", 1)[1]  # the conversation's last line is the reply to rate
    levels = next(v for phrase, v in REPLIES.items() if phrase in reply)
    if levels is None:
        return "not json at all"
    return json.dumps({axis: {"progress": p, "regression": r, "evidence": "x" if p or r else "", "reason": "y"}
                       for axis, p, r in zip("CAP", *levels, strict=True)})


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "emobench", "validate", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "COLUMNS": "250", **(env or {})}, timeout=300)


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("esconv")
    out = tmp / "validity.json"
    out.write_text(json.dumps({"fidelity": {"kept": True}, "judge_check": {"dataset": "epitome"}}))
    with FakeOpenAIServer(FakeState(responder=_responder)) as fake:
        panels = []
        for name in ("panel-a", "panel-b"):
            path = tmp / f"{name}.yaml"
            path.write_text(f"name: {name}\njudges:\n  - binding: openai:fake-model@{fake.base_url}\n    label: {name}-judge\n")
            panels += ["--panel", str(path)]
        args = ("--judge-check", "esconv", "--data", str(FIXTURE / "original"), *panels, "--n-boot", "200", "-o", str(out))
        env = {"EMOBENCH_RESPONSE_CACHE": str(tmp / "cache.sqlite")}
        first = _cli(*args, env=env)
        n_requests = len(fake.state.requests)
        assert first.returncode == 0, first.stderr
        report = json.loads(out.read_text())
        again = _cli(*args, env=env)  # a rerun (or a resumed one) is answered from the response cache
        assert again.returncode == 0, again.stderr
        n_again = len(fake.state.requests) - n_requests
    return {"report": report, "result": first, "n_requests": n_requests, "n_again": n_again,
            "rerun": json.loads(out.read_text())}


def test_per_turn_statistics_match_the_hand_computed_values(checked: dict[str, Any]) -> None:
    block = checked["report"]["judge_check_esconv"]
    # 9 feedback points (the test chat left out); one has no valid verdict. Valid turn scores
    # against feedback: [1, -2, 2.5, 4, 4, 3, 2, 2] vs [2, 1, 3, 4, 5, 5, 4, 3]. Mid-ranks
    # [2, 1, 5, 7.5, 7.5, 6, 3.5, 3.5] and [2, 1, 3.5, 5.5, 7.5, 7.5, 5.5, 3.5]: rho = 0.8466.
    # Pairs: 21 concordant, 2 discordant, 2 tied in score only, 3 in feedback only:
    # tau-b = 19 / sqrt(25 * 26) = 0.7452.
    assert block["n_feedback_points"] == 9 and block["feedback_from"] == ["ESConv", "FailedESConv"]
    turn = block["panels"]["panel-a"]["all"]["per_turn"]
    assert (turn["n"], turn["n_valid"], turn["n_chats"]) == (9, 8, 4)
    assert turn["invalid_share"]["value"] == pytest.approx(1 / 9, abs=1e-4)
    assert turn["spearman"]["value"] == pytest.approx(0.8466, abs=1e-4)
    assert turn["kendall"]["value"] == pytest.approx(0.7452, abs=1e-4)
    assert turn["spearman"]["lo"] <= turn["spearman"]["value"] <= turn["spearman"]["hi"]


def test_per_chat_and_auc_match_the_hand_computed_values(checked: dict[str, Any]) -> None:
    figures = checked["report"]["judge_check_esconv"]["panels"]["panel-a"]["all"]
    # Chat scores 8, 5 (ESConv) and 3, 6 (failed); the partial survey of the second failed chat
    # leaves it out of every survey item.
    chat = figures["per_chat"]
    assert chat["empathy"]["spearman"]["value"] == 1.0 and chat["empathy"]["n_left_out_no_survey"] == 1
    assert chat["relevance"]["spearman"]["value"] == 1.0
    # Intensity drops 2, 1, 1 against 8, 5, 3: rho = 1.5 / sqrt(1.5 * 2) = 0.8660.
    assert chat["intensity_drop"]["spearman"]["value"] == pytest.approx(0.8660, abs=1e-4)
    # ESConv above failed in 3 of the 4 pairs (8>3, 8>6, 5>3; 5<6).
    auc = figures["auc_esconv_vs_failed"]
    assert (auc["value"], auc["n_positive"], auc["n_negative"]) == (0.75, 2, 2)


def test_the_baselines_use_the_same_points(checked: dict[str, Any]) -> None:
    base = checked["report"]["judge_check_esconv"]["baselines"]
    words = [5, 12, 17, 11, 8, 17, 8, 5, 8]  # words in the replies before each feedback point
    feedback = [2, 1, 3, 4, 5, 5, 4, 3, 3]
    turn = base["reply_words"]["all"]["per_turn"]
    assert turn["n_valid"] == 9
    assert turn["spearman"]["value"] == pytest.approx(scipy.stats.spearmanr(words, feedback).statistic, abs=1e-4)
    assert base["valence_change"]["all"]["per_turn"]["n_valid"] == 9
    assert base["constant"]["spearman"] == 0.0 and base["constant"]["auc"] == 0.5


def test_every_figure_is_also_given_by_experience_type(checked: dict[str, Any]) -> None:
    by = checked["report"]["judge_check_esconv"]["panels"]["panel-a"]["by_experience_type"]
    assert set(by) == {"Current Experience", "Previous Experience"}
    # Current: the first ESConv and first failed chat, 5 points: scores [1, -2, 2.5, 3, 2] vs [2, 1, 3, 5, 4].
    current = by["Current Experience"]["per_turn"]
    assert current["n_valid"] == 5
    assert current["spearman"]["value"] == pytest.approx(scipy.stats.spearmanr([1, -2, 2.5, 3, 2], [2, 1, 3, 5, 4]).statistic)
    assert by["Previous Experience"]["per_turn"]["n"] == 4


def test_results_merge_and_record_provenance_but_no_text(checked: dict[str, Any]) -> None:
    report = checked["report"]
    assert report["fidelity"] == {"kept": True} and report["judge_check"] == {"dataset": "epitome"}
    block = report["judge_check_esconv"]
    assert "1 test chats left out of ESConv.json (matched against test.txt)" in block["data"]["notes"]
    assert set(block["data"]["sha256"]) == {"ESConv.json", "FailedESConv.json"}
    assert block["stand_in"]["file"] == "esconv.yaml" and len(block["stand_in"]["content_hash"]) == 64
    panel = block["panels"]["panel-b"]
    assert panel["judges"][0]["label"] == "panel-b-judge" and "temperature" in panel["judges"][0]["sampling"]
    assert set(panel["prompt_versions"]) == {"mdep", "holistic"}
    text = json.dumps(report)
    assert "stick to it" not in text and "contract ends" not in text


def test_a_rerun_is_answered_from_the_cache(checked: dict[str, Any]) -> None:
    # 11 replies and 4 chats per panel, the invalid reply asked 1 + 2 retries: 2 * (10 + 3 + 4).
    assert checked["n_requests"] == 34 and checked["n_again"] == 0
    cost = checked["rerun"]["judge_check_esconv"]["panels"]["panel-a"]["cost"]
    assert cost["n_cached"] == cost["n_calls"] == 17
    assert checked["rerun"]["judge_check_esconv"]["panels"] == checked["report"]["judge_check_esconv"]["panels"] | {
        k: {**v, "cost": checked["rerun"]["judge_check_esconv"]["panels"][k]["cost"]}
        for k, v in checked["report"]["judge_check_esconv"]["panels"].items()}


def test_several_panels_print_side_by_side_with_the_baselines(checked: dict[str, Any]) -> None:
    out = checked["result"].stdout
    header = next(line for line in out.splitlines() if "panel-a" in line and "panel-b" in line)
    assert "reply length" in header and "valence change" in header and "constant" in header
    assert "0.85 [" in out and "Previous Experience" in out


def test_the_page_shows_it_labelled_with_the_panel(checked: dict[str, Any], tmp_path: Path) -> None:
    from tests.test_validity import _run

    run = _run(tmp_path, True, [0])
    (run / "validity.json").write_text(json.dumps({"judge_check_esconv": checked["report"]["judge_check_esconv"]}))
    write_page(build_leaderboard([run], n_boot=200), tmp_path)
    html = (tmp_path / "index.html").read_text()
    for label in ("panel-a", "panel-b"):
        assert f"Judges against help-seekers' own ratings: ESConv, panel <code>{label}</code>" in html
    assert "0.85<span class=\"ci\">" in html and "0.75<span" in html


def test_dry_run_counts_calls_and_writes_nothing(tmp_path: Path) -> None:
    with FakeOpenAIServer(FakeState(responder=_responder)) as fake:
        result = _cli("--judge-check", "esconv", "--data", str(FIXTURE / "original"), "--judge",
                      f"openai:fake-model@{fake.base_url}", "--dry-run", "-o", str(tmp_path / "v.json"))
        assert not fake.state.requests
    assert result.returncode == 0, result.stderr
    assert "4 chat(s), 9 feedback point(s), 11 repl(ies)" in result.stdout
    assert " 45 " in result.stdout  # (11 replies + 4 chats) * (1 + 2 retries)
    assert not (tmp_path / "v.json").exists()


def test_the_hugging_face_layout_says_feedback_is_absent(tmp_path: Path) -> None:
    with FakeOpenAIServer(FakeState(responder=_responder)) as fake:
        result = _cli("--judge-check", "esconv", "--data", str(FIXTURE / "huggingface"), "--judge",
                      f"openai:fake-model@{fake.base_url}", "--n-boot", "50", "-o", str(tmp_path / "v.json"))
    assert result.returncode == 0, result.stderr
    block = json.loads((tmp_path / "v.json").read_text())["judge_check_esconv"]
    assert block["n_feedback_points"] == 0 and block["data"]["layout"] == "huggingface"
    assert "per-turn feedback absent (Hugging Face layout)" in block["data"]["notes"]
    assert "per-turn feedback absent" in result.stdout


@pytest.mark.parametrize(("damage", "expected"), [
    ("truncated", "FailedESConv.json: line"),
    ("bad-feedback", "FailedESConv.json: chat 0: dialog[2].annotation.feedback: '9' is not a rating 1-5"),
    ("wrong-layout", "ESConv.json: line 2 column 1: not valid JSON"),
    ("bad-split", "--split: 'train,dev'"),
    ("bad-validity", "v.json: not a readable validity.json"),
])
def test_bad_data_is_one_line_exit_2_and_nothing_written(tmp_path: Path, damage: str, expected: str) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    failed = (FIXTURE / "original" / "FailedESConv.json").read_text()
    damaged = {"truncated": failed[: len(failed) // 2], "bad-feedback": failed.replace('"feedback": "2"', '"feedback": "9"')}
    (folder / "FailedESConv.json").write_text(damaged.get(damage, failed))
    if damage == "wrong-layout":
        (folder / "ESConv.json").write_text((FIXTURE / "huggingface" / "train.txt").read_text())
    out = tmp_path / "v.json"
    if damage == "bad-validity":
        out.write_text("{not json")
    extra = ["--split", "train,dev"] if damage == "bad-split" else []
    result = _cli("--judge-check", "esconv", "--data", str(folder), *extra, "-o", str(out))
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in result.stderr
    assert not out.exists() or out.read_text() == "{not json"
    assert not (tmp_path / "logs").exists()


def test_panel_and_judge_together_or_user_alone_are_refused(tmp_path: Path) -> None:
    result = _cli("--judge-check", "esconv", "--data", str(FIXTURE / "original"), "--panel", "judges/panels/embedded.yaml",
                  "--judge", "openai:x@http://127.0.0.1:9/v1", "-o", str(tmp_path / "v.json"))
    assert result.returncode == 2 and "--judge: give --panel files or --judge bindings, not both" in result.stderr
    result = _cli("--judge-check", "esconv", "--data", str(FIXTURE / "original"), "--user", "openai:x@http://127.0.0.1:9/v1",
                  "-o", str(tmp_path / "v.json"))
    assert result.returncode == 2 and "--user:" in result.stderr
