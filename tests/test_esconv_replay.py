"""`emobench validate --fidelity-replay esconv`: the simulator replays real seekers, teacher-forced.

Our own chats in ESConv's original layout (written here, no ESConv text), a loopback fake
simulator whose meter moves are written into the supporter turns ("[+4]"), and every figure
checked against values worked out by hand in the comments; then teacher forcing, resume,
merging into validity.json, --dry-run, one-line errors, and one run on real vLLM."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.errors import InputError
from emobench.validation.esconv.card import record_case
from emobench.validation.esconv.check import STAND_IN as JUDGE_STAND_IN
from emobench.validation.esconv.data import EsconvChat, EsconvTurn
from emobench.validation.esconv.replay import STAND_IN, blocks, chat_case, load_spec, targets
from emobench.validation.esconv.replay_stats import chat_bootstrap, proportion, rank_agreement
from emobench.validation.stand_in import read_stand_in
from tests.fake_openai import FakeOpenAIServer, FakeState

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "esconv"
STATE = "\n\n[Private state"


def _dialog(turns: list[tuple[str, str, str | None]], names: tuple[str, str]) -> list[dict[str, Any]]:
    out = []
    for who, text, feedback in turns:
        note = {"feedback": feedback} if feedback else {}
        out.append({"speaker": names[0] if who == "s" else names[1], "annotation": note, "content": text})
    return out


def _chat(turns: list[tuple[str, str, str | None]], survey: dict[str, str], names: tuple[str, str]) -> dict[str, Any]:
    return {"experience_type": "Current Experience", "emotion_type": "anxiety", "problem_type": "job crisis",
            "situation": "Work is piling up.", "survey_score": {"seeker": survey, "supporter": {}},
            "dialog": _dialog(turns, names)}


# The fake simulator's meter_delta is the sum of the [+n] markers in the supporter's block;
# "ask" makes it ask a question, "bye" makes it leave, "voice" makes it talk like an assistant,
# "junk" makes every attempt unparseable (an invalid turn).
FAILED = [
    _chat([("p", "hello there [+9]", None), ("s", "hi", None), ("p", "tell me [+4]", None), ("s", "ok a", "4"),
           ("p", "hmm [-2]", None), ("p", "more [-2]", None), ("s", "fine b", "2"), ("p", "ask [+1]", None),
           ("s", "c?", None), ("p", "[+3]", None), ("s", "d", "5")],
          {"initial_emotion_intensity": "5", "final_emotion_intensity": "3"}, ("speaker", "listener")),
    _chat([("s", "x1", None), ("p", "[-3]", None), ("s", "x2", "3"), ("p", "bye [-5]", None), ("s", "x3", "1"),
           ("p", "[+2]", None), ("s", "x4", None)],
          {"initial_emotion_intensity": "4", "final_emotion_intensity": "4"}, ("speaker", "listener")),
    _chat([("s", "y1", None), ("p", "junk", None), ("s", "y2", "2"), ("p", "[+6]", None), ("s", "y3", "4")],
          {"initial_emotion_intensity": "2", "final_emotion_intensity": ""}, ("speaker", "listener")),
]
ESCONV = [_chat([("s", "z1", None), ("p", "[+1] voice", None), ("s", "z2", None)],
                {"initial_emotion_intensity": "3", "final_emotion_intensity": "1"}, ("seeker", "supporter"))]


def _responder(body: dict[str, Any]) -> str:
    reply = body["messages"][-1]["content"].split(STATE)[0]
    if "junk" in reply:
        return "not json"
    delta = sum(int(n) for n in re.findall(r"\[([+-]\d+)\]", reply))
    said = "what do you think?" if "ask" in reply else "as an AI I cannot say" if "voice" in reply else "i guess so"
    return json.dumps({"message": said, "meter_delta": delta, "inner": "x", "leave": "bye" in reply})


def _write_data(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "FailedESConv.json").write_text(json.dumps(FAILED), encoding="utf-8")
    (folder / "ESConv.json").write_text(json.dumps(ESCONV), encoding="utf-8")
    return folder


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "emobench", "validate", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "COLUMNS": "220", **(env or {})}, timeout=600)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("replay")
    data = _write_data(tmp / "data")
    out = tmp / "validity.json"
    out.write_text(json.dumps({"judge_check": {"kept": True}}))  # another check's block must survive
    with FakeOpenAIServer(FakeState(responder=_responder)) as fake:
        args = ("--fidelity-replay", "esconv", "--data", str(data), "--user", f"openai:fake-sim@{fake.base_url}",
                "--no-cache", "--n-boot", "200", "-o", str(out))
        first = _cli(*args)
        requests = list(fake.state.requests)
        report = json.loads(out.read_text()) if out.exists() else {}
        again = _cli(*args)
        n_after_resume = len(fake.state.requests) - len(requests)
    assert first.returncode == 0, first.stderr
    assert again.returncode == 0, again.stderr
    return {"report": report, "again": json.loads(out.read_text()), "stdout": first.stdout, "requests": requests,
            "resumed_requests": n_after_resume, "tmp": tmp}


def test_blocks_join_runs_and_drop_the_supporters_greeting() -> None:
    turn = EsconvTurn
    chat = EsconvChat(chat_id="f:0", source="FailedESConv", emotion_type="sadness", problem_type="breakup",
                      experience_type="Past Experience", situation="s", initial_intensity=None, final_intensity=None,
                      empathy=None, relevance=None, turns=(
                          turn("supporter", "hello", None, None), turn("seeker", "a", None, None),
                          turn("seeker", "b", 3, None), turn("supporter", "c", None, "Question"),
                          turn("seeker", "d", None, None), turn("supporter", "e", None, None),
                          turn("supporter", "f", None, None), turn("seeker", "g", 2, None),
                          turn("supporter", "h", None, None)))
    assert blocks(chat) == [("seeker", "a\nb", 3), ("supporter", "c", None), ("seeker", "d", None),
                            ("supporter", "e\nf", None), ("seeker", "g", 2), ("supporter", "h", None)]
    [second, third] = targets(chat)
    assert (second.index, second.history, second.real, second.feedback, second.last) == (
        2, (("a\nb", "c"),), "d", None, False)
    assert (third.index, third.history, third.real, third.feedback, third.last) == (
        3, (("a\nb", "c"), ("d", "e\nf")), "g", 2, True)


CHAT = EsconvChat(chat_id="f:0", source="ESConv", emotion_type="shame", problem_type="ongoing depression",
                  experience_type="Current Experience", situation="I lost my job last month.", initial_intensity=4,
                  final_intensity=2, empathy=None, relevance=None, turns=(EsconvTurn("seeker", "first words", None, None),))
# The cards' content hashes as the two builders before the shared one made them (the replay's
# resume keys and the judge check's results carry them): (replay, judge check), intensity 4 / unknown.
CARD_HASHES = {4: ("65c8d8fa7c09d57c703bc96cb47bb64d8e8cfa5b4eaf5900fa75eb51f7efef31",
                   "f893dd236bf468fa74d2fc3572594c8cb70311a85fd387ddab3bc870b26b73a2"),
               None: ("27ba6bc59ccb2787e3eea6681685a94ff1c516f7bb1e25649faadc71aac97f81",
                      "5325111d28e7521b01f36eed5f6fa4da3e03e43b3079ffbc0bea754484631eab")}


def test_the_card_carries_the_record_and_the_stand_in() -> None:
    spec = load_spec()
    case = chat_case(spec, CHAT)
    assert "I lost my job last month." in case.persona.background and "shame" in case.persona.background
    assert "is 4." in case.persona.background and case.scenario.topic == "ongoing depression: I lost my job last month."
    assert "shame" in case.hidden_need and case.opening == "first words"
    assert case.persona.name == "Sam" and case.persona.meter_start == 40
    unknown = chat_case(spec, EsconvChat(**{**CHAT.__dict__, "initial_intensity": None}))
    assert "is not given." in unknown.persona.background


@pytest.mark.parametrize("intensity", [4, None])
def test_both_cards_come_from_one_builder_unchanged(intensity: int | None) -> None:
    chat = EsconvChat(**{**CHAT.__dict__, "initial_intensity": intensity})
    judged = record_case(ROOT / JUDGE_STAND_IN, read_stand_in(ROOT / JUDGE_STAND_IN), chat, case_id="esconv-f:0")
    assert (chat_case(load_spec(), chat).content_hash, judged.content_hash) == CARD_HASHES[intensity]
    assert judged.opening == "(the seeker's first message)"  # the judges read the chat itself, not a card opening


def test_a_replay_stand_in_reads_every_record_field(tmp_path: Path) -> None:
    # The judge check's stand-in uses experience_type; the replay's may too, through the same fields.
    path = tmp_path / "seeker.yaml"
    path.write_text(STAND_IN.read_text(encoding="utf-8").replace(
        "You are dealing with {{ problem_type }}.", "You are dealing with {{ problem_type }} ({{ experience_type }})."))
    assert "ongoing depression (Current Experience)." in chat_case(load_spec(path), CHAT).persona.background


@pytest.mark.parametrize(("old", "new", "where"), [
    ("{{ problem_type }}: {{ situation }}", "{{ mood }}", "scenario.topic"),
    ("  scenario.topic:", "  scenario.mood.topic:", "from_record.scenario.mood.topic"),
], ids=["unknown-record-field", "no-such-card-field"])
def test_a_bad_record_template_is_one_input_error(tmp_path: Path, old: str, new: str, where: str) -> None:
    path = tmp_path / "seeker.yaml"
    path.write_text(STAND_IN.read_text(encoding="utf-8").replace(old, new))
    with pytest.raises(InputError) as caught:
        chat_case(load_spec(path), CHAT)
    assert (caught.value.source, caught.value.field) == (str(path), where) and "\n" not in str(caught.value)


def test_every_figure_matches_the_hand_computed_values(replayed: dict[str, Any]) -> None:
    block = replayed["report"]["fidelity_replay"]
    pooled = block["figures"]["all"]
    # 10 seeker turns to replay (A: 4, B: 3, C: 2, D: 1); C's first is junk on every attempt.
    assert (pooled["n_chats"], pooled["n_turns"]) == (4, 10)
    assert pooled["invalid"]["k"] == 1 and pooled["invalid"]["n"] == 10
    # Rated turns (meter change since the previous rated turn, rating): A (+4, 4), (-4, 2), (+4, 5);
    # B (-3, 3), (-5, 1); C (+6, 4), its first rated turn being invalid (the meter stays 40).
    # Ranks: x [4.5, 2, 4.5, 3, 1, 6], y [4.5, 2, 6, 3, 1, 4.5]; deviations from 3.5 give
    # sum xy = 14.75, sum x² = sum y² = 17, so rho = 14.75 / 17. Kendall: 12 concordant pairs,
    # 1 discordant, one pair tied on x only, one on y only: tau-b = 11 / sqrt(14 * 14).
    mf = pooled["meter_feedback"]
    assert (mf["n"], mf["n_chats"]) == (6, 3)
    assert mf["spearman"]["value"] == pytest.approx(14.75 / 17, abs=1e-4)
    assert mf["kendall_tau_b"]["value"] == pytest.approx(11 / 14, abs=1e-4)
    assert mf["spearman"]["lo"] <= mf["spearman"]["value"] <= mf["spearman"]["hi"]
    assert block["figures"]["FailedESConv"]["meter_feedback"]["label"] == "failed chats only"
    # Final meter change vs intensity drop: A (+4, 2), B (-6, 0), D (+1, 2); C has no final intensity.
    # Ranks x [3, 1, 2], y [2.5, 1, 2.5]: rho = 1.5 / sqrt(2 * 1.5).
    mi = pooled["meter_intensity"]
    assert mi["n"] == 3 and mi["spearman"]["value"] == pytest.approx(1.5 / math.sqrt(3), abs=1e-4)
    # Turns after which the person went on, with a valid reply: A 2, 3, 4 and B 2, 3; B 3 leaves.
    assert (pooled["leave"]["k"], pooled["leave"]["n"]) == (1, 5)
    # Valid turns: 9. Questions: one simulated (A 4), one real ("c?").
    q = pooled["question_rate"]
    assert (q["real"]["k"], q["simulated"]["k"], q["real"]["n"]) == (1, 1, 9) and q["difference"]["value"] == 0.0
    # "as an AI" is the assistant's voice: D's only turn.
    ooc = pooled["out_of_character"]
    assert (ooc["simulated"]["k"], ooc["real"]["k"], ooc["simulated"]["n"]) == (1, 0, 9)
    assert block["figures"]["ESConv"]["n_turns"] == 1 and block["figures"]["ESConv"]["meter_feedback"]["n"] == 0
    d = pooled["discriminator"]
    assert d["grouped_by"] == "chat" and d["n_turns"] == {"human": 9, "simulator": 9}
    assert d["auc"] is not None and 0 <= d["lo"] <= d["auc"] <= d["hi"] <= 1
    assert pooled["turn_words"]["simulator"]["n"] == 9 and pooled["valence"]["n"] == 9


def test_the_simulator_sees_the_real_conversation(replayed: dict[str, Any]) -> None:
    sent = [r["body"]["messages"] for r in replayed["requests"] if "[+3]" in r["body"]["messages"][-1]["content"]]
    [messages] = sent  # A's fourth seeker turn
    said = [m["content"] for m in messages if m["role"] == "assistant"]
    replies = [m["content"].split(STATE)[0] for m in messages if m["role"] == "user"]
    assert said == ["hi", "ok a", "fine b", "c?"]  # the person's real words, never the simulator's
    assert replies == ["tell me [+4]", "hmm [-2]\nmore [-2]", "ask [+1]", "[+3]"]  # the greeting is left out
    assert "Your meter is 41 out of 100." in messages[-1]["content"]  # 40 + 4 - 4 + 1, its own moves
    assert "Work is piling up." in messages[0]["content"] and "Sam" in messages[0]["content"]
    # Three attempts on the junk turn (two retries), one on each other turn.
    assert len(replayed["requests"]) == 9 + 3


def test_a_rerun_resumes_and_other_blocks_stay(replayed: dict[str, Any]) -> None:
    assert replayed["resumed_requests"] == 0
    again = replayed["again"]
    assert again["fidelity_replay"]["resumed_chats"] == 4
    assert again["fidelity_replay"]["figures"] == replayed["report"]["fidelity_replay"]["figures"]
    assert replayed["report"]["judge_check"] == {"kept": True}
    lines = (replayed["tmp"] / "esconv_replay.jsonl").read_text().splitlines()
    assert len(lines) == 4 and "Work is piling up" not in "".join(lines) and "fine b" not in "".join(lines)


def test_the_result_records_its_provenance(replayed: dict[str, Any]) -> None:
    block = replayed["report"]["fidelity_replay"]
    assert block["user"]["model"] == "fake-sim" and block["user"]["sampling"]["temperature"] == 0.8
    assert block["stand_in"]["file"] == "esconv_seeker.yaml" and len(block["stand_in"]["content_hash"]) == 64
    assert block["data"]["layout"] == "original" and block["splits"] == ["train", "valid"]
    assert block["cost"]["n_calls"] == 12 and block["simulator_retries"] == 2
    assert "fidelity replay (esconv" in replayed["stdout"] and "failed chats only" in replayed["stdout"]


def test_the_page_shows_the_replay(replayed: dict[str, Any], tmp_path: Path) -> None:
    from emobench.publish.html import write_page
    from emobench.publish.leaderboard import build_leaderboard
    from tests.test_validity import _run

    run = _run(tmp_path, True, [0])
    (run / "validity.json").write_text(json.dumps({"fidelity_replay": replayed["report"]["fidelity_replay"]}))
    write_page(build_leaderboard([run], n_boot=200), tmp_path)
    html = (tmp_path / "index.html").read_text()
    assert "Simulator replaying real help-seekers: ESConv, simulator <code>" in html and "fake-sim" in html
    assert "failed chats only" in html and "0.87" in html  # the pooled meter–feedback rho


def test_dry_run_counts_calls_and_calls_nothing(tmp_path: Path) -> None:
    data = _write_data(tmp_path / "data")
    with FakeOpenAIServer(FakeState(responder=_responder)) as fake:
        result = _cli("--fidelity-replay", "esconv", "--data", str(data), "--user", f"openai:fake-sim@{fake.base_url}",
                      "--dry-run", "-o", str(tmp_path / "v.json"))
        assert not fake.state.requests
    assert result.returncode == 0, result.stderr
    assert "4 chat(s), 10 seeker turn(s)" in result.stdout and "30 calls" in result.stdout
    assert not (tmp_path / "v.json").exists()


@pytest.mark.parametrize(("damage", "expected"), [
    ("truncated", "FailedESConv.json: line 1"),
    ("speaker", "chat 0: dialog[0].speaker"),
    ("missing", "--user: missing"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path: Path, damage: str, expected: str) -> None:
    data = _write_data(tmp_path / "data")
    path = data / "FailedESConv.json"
    if damage == "truncated":
        path.write_text(path.read_text()[:200])
    elif damage == "speaker":
        path.write_text(path.read_text().replace('"listener"', '"sys"', 1))
    user = [] if damage == "missing" else ["--user", "openai:m@http://127.0.0.1:9/v1"]
    result = _cli("--fidelity-replay", "esconv", "--data", str(data), *user, "-o", str(tmp_path / "v.json"))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and expected in lines[0], result.stderr
    assert not (tmp_path / "v.json").exists() and not (tmp_path / "esconv_replay.jsonl").exists()


def test_rank_agreement_and_the_chat_bootstrap() -> None:
    # A perfect ranking is 1 in every resample; a constant side has no rho at all.
    perfect = rank_agreement([1, 2, 3, 4], [2, 4, 6, 8], ["a", "a", "b", "c"], n_boot=100, seed=0)
    assert perfect["spearman"] == {"value": 1.0, "lo": 1.0, "hi": 1.0} and perfect["n_chats"] == 3
    flat = rank_agreement([1, 1, 1], [1, 2, 3], ["a", "b", "c"], n_boot=50, seed=0)
    assert flat["spearman"]["value"] is None
    # Resampling whole chats: chat a holds rows 0 and 1 (0, 0), chat b row 2 (1). A resample is
    # {a, a} (mean 0), {b, b} (1) or {a, b} (rows 0, 1, 2: mean 1/3), never a single row.
    values = np.array([0.0, 0.0, 1.0])
    lo, hi = chat_bootstrap(lambda i: float(values[i].mean()), ["a", "a", "b"], 400, 1)
    assert lo == 0.0 and hi == 1.0
    narrow = chat_bootstrap(lambda i: float(values[i].mean()), ["a", "a", "b"], 400, 1)
    assert narrow == (lo, hi)  # the seed pins it
    assert proportion(1, 5)["rate"] == 0.2 and proportion(0, 0)["rate"] is None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(-10, 10), st.integers(1, 5), st.sampled_from("abcde")), min_size=3, max_size=30))
def test_rank_agreement_is_scipys_and_ignores_monotone_rescaling(points: list[tuple[int, int, str]]) -> None:
    x, y, chats = (list(v) for v in zip(*points, strict=True))
    got = rank_agreement(x, y, chats, n_boot=30, seed=0)
    again = rank_agreement([3 * v + 7 for v in x], y, chats, n_boot=30, seed=0)
    assert got == again  # ranks are all that counts, CIs included
    if len(set(x)) < 2 or len(set(y)) < 2:
        assert got["spearman"]["value"] is None
    else:
        assert got["spearman"]["value"] == pytest.approx(scipy.stats.spearmanr(x, y).statistic, abs=1e-4)
        assert got["kendall_tau_b"]["value"] == pytest.approx(scipy.stats.kendalltau(x, y).statistic, abs=1e-4)
    lo, hi = got["spearman"]["lo"], got["spearman"]["hi"]
    assert (lo is None) == (hi is None) and (lo is None or -1 <= lo <= hi <= 1)
