"""The validity report: known groups both ways on a hermetic run with reference subjects,
test-retest, judge-tracker and judge-human maths against hand-computed values, the CLI and the page."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import scipy.stats
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from emobench.cli import app
from emobench.publish.html import write_page
from emobench.publish.leaderboard import build_leaderboard
from emobench.rundir import RunDir
from emobench.scoring import validity
from emobench.scoring.validity import human_agreement, judge_tracker, known_groups, retest_agreement
from emobench.validation.cli import print_report
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder
from tests.test_html import chromium  # noqa: F401  (the fixture: skips, or fails under EMOBENCH_REQUIRE_CHROMIUM)

REAL_REPLY = "What part of it weighs on you most?"  # the fake subject's reply (default_responder)
REFERENCES = ["scripted:echo", "scripted:dismissive"]
HUMAN_SAMPLE = Path(__file__).resolve().parents[1] / "validity" / "human_sample.jsonl"
cli = CliRunner()


def _judge(favour_real: bool) -> Any:
    """A fake panel that rates the real subject's replies all progress and the references' all
    regression, or the other way round."""

    def responder(body: dict[str, Any]) -> str:
        fmt = (body.get("response_format") or {}).get("json_schema", {}).get("name")
        if fmt != "mdep_verdict":
            return default_responder(body)
        real = REAL_REPLY in body["messages"][-1]["content"]
        good = {"progress": 2, "regression": 0, "evidence": "x", "reason": "y"}
        bad = {"progress": 0, "regression": 2, "evidence": "x", "reason": "y"}
        axis = good if real == favour_real else bad
        return json.dumps(dict.fromkeys("CAP", axis))

    return responder


def _run(tmp_path: Path, favour_real: bool, seeds: list[int]) -> Path:
    with FakeOpenAIServer(FakeState(responder=_judge(favour_real))) as fake:
        cfg = write_config(tmp_path / "run.yaml", fake.base_url, seeds=seeds, max_turns=10, min_turns=2)
        data = yaml.safe_load(cfg.read_text())
        data["subjects"] += [{"binding": b} for b in REFERENCES]
        cfg.write_text(yaml.safe_dump(data))
        args = ["run", "--config", str(cfg), "--out", str(tmp_path), "--run-id", "r", "--no-progress"]
        result = cli.invoke(app, args, catch_exceptions=False, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return tmp_path / "r"


@pytest.fixture(scope="module")
def favoured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("favoured"), True, [0])


def test_known_groups_pass_when_the_panel_favours_the_real_subject(favoured: Path) -> None:
    report = json.loads((favoured / "report.json").read_text())["validity"]
    assert report["reference_subjects"] == sorted(REFERENCES)
    kg = report["known_groups"]
    assert kg["verdict"] == "pass", kg["summary"]
    assert len(kg["comparisons"]) == 2 * 2  # 1 real x 2 references x (EPM-Q, success)
    assert all(c["verdict"] == "above" and c["lo"] > 0 and c["n_cases"] == 2 for c in kg["comparisons"])


def test_known_groups_fail_plainly_when_the_panel_favours_the_references(tmp_path: Path) -> None:
    run = _run(tmp_path, False, [0])
    kg = json.loads((run / "report.json").read_text())["validity"]["known_groups"]
    assert kg["verdict"] == "fail"
    assert "does NOT rank every real subject above every reference subject" in kg["summary"]
    epmq = [c for c in kg["comparisons"] if c["metric"] == "EPM-Q"]
    assert epmq and all(c["verdict"] == "below" and c["hi"] < 0 for c in epmq)


def test_known_groups_maths_on_a_frame() -> None:
    rows = [("real", c, 0, 60.0 + i, True) for i, c in enumerate("abc")]
    rows += [("scripted:echo", c, 0, 50.0 + 2 * i, False) for i, c in enumerate("abc")]
    frame = pd.DataFrame(rows, columns=["subject", "case_id", "seed", "epmq", "success"])
    kg = known_groups(frame, ["scripted:echo"], n_boot=500)
    epmq = next(c for c in kg["comparisons"] if c["metric"] == "EPM-Q")
    assert epmq["diff"] == pytest.approx(9.0)  # differences 10, 9, 8
    assert kg["verdict"] == "pass"
    assert known_groups(frame[frame.subject == "real"], ["scripted:echo"])["verdict"] == "not run"


def test_retest_ranks_agree_or_reverse() -> None:
    base = [("s1", "a", 10.0), ("s1", "b", 20.0), ("s2", "a", 30.0), ("s2", "b", 40.0), ("s3", "a", 50.0), ("s3", "b", 65.0)]
    same = [(s, c, 0, v) for s, c, v in base] + [(s, c, 1, v + 1) for s, c, v in base]
    frame = pd.DataFrame(same, columns=["subject", "case_id", "seed", "epmq"]).assign(run_id="r")
    out = retest_agreement(frame)
    assert out["subjects"]["rho"] == pytest.approx(1.0) and out["cases"]["rho"] == pytest.approx(1.0)
    flipped = frame.assign(epmq=[v if seed == 0 else -v for v, seed in zip(frame.epmq, frame.seed, strict=True)])
    assert retest_agreement(flipped)["subjects"]["rho"] == pytest.approx(-1.0)
    assert retest_agreement(frame[frame.seed == 0])["subjects"] is None


def test_judge_tracker_pairs_each_judged_turn_with_the_next_valence_change(
    favoured: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    episodes = RunDir(favoured).read_episodes()
    # The fake panel stops each reference by collapse after 5 turns and the real subject by success
    # once E reaches ||P0||: v = (3, 3, 3) gives dE = v.u = 3 (|C| + |A| + |P|) / ||P0|| a turn, so
    # demo4-01, P0 = (-7, -14, -9): 90 / 18.06 = 4.98 a turn, E >= 18.06 after 4 turns;
    # demo4-02, P0 = (-21, -22, -17): 180 / 34.84 = 5.17 a turn, E >= 34.84 after 7 turns
    # (both then past the origin along u). No episode ends on a user who leaves.
    shapes = sorted((e.subject, e.case_id, len(e.turns), e.last_user is None) for e in episodes)
    assert shapes == [("scripted:dismissive", "demo4-01", 5, True), ("scripted:dismissive", "demo4-02", 5, True),
                      ("scripted:echo", "demo4-01", 5, True), ("scripted:echo", "demo4-02", 5, True),
                      ("subject-a", "demo4-01", 4, True), ("subject-a", "demo4-02", 7, True)]
    # Valence of turn k's user message: (k - 1) ** 2, so the change from turn k to k + 1 is 2k - 1.
    position = {t.user.message: float(t.index - 1) ** 2 for e in episodes for t in e.turns}
    monkeypatch.setattr(validity, "valence", lambda texts: [position[x] for x in texts])
    out = judge_tracker(episodes)
    # By hand: each reference turn but the last is judged A = 0 - 2 = -2, each real turn 2 - 0 = +2;
    # the last turn of an episode has no next message, so it pairs with nothing.
    judged = [-2] * 4 * 4 + [2] * (3 + 6)
    change = [1, 3, 5, 7] * 4 + [1, 3, 5] + [1, 3, 5, 7, 9, 11]
    expected = scipy.stats.spearmanr(judged, change)
    assert out["n_turns"] == 25
    assert out["rho"] == pytest.approx(expected.statistic, abs=1e-4)
    assert out["p"] == pytest.approx(expected.pvalue, abs=1e-4)


def test_validate_prints_the_exact_p_of_few_turns(favoured: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It printed rho = 1.000 (p = 0.0000, 4 turns): scipy's t approximation at n = 4."""
    episodes = RunDir(favoured).read_episodes()
    picked = [e for e in episodes if e.case_id == "demo4-01" and e.subject in ("subject-a", "scripted:echo")]
    position = {t.user.message: float(t.index - 1) ** 2 for e in picked for t in e.turns}
    monkeypatch.setattr(validity, "valence", lambda texts: [position[x] for x in texts])
    out = judge_tracker(picked)
    # By hand: the echo's 4 judged turns at -2 with changes 1, 3, 5, 7; the real subject's 3 at +2
    # with 1, 3, 5. Mid-ranks of the changes: 1.5, 3.5, 5.5, 7 and 1.5, 3.5, 5.5. The judged values
    # fall in two groups, so a pairing's rho is fixed by the sum of the change ranks the 3 turns at +2
    # get: the 7! pairings give each of the C(7, 3) = 35 sets alike, and p is the share of sets whose
    # sum lies as far from its mean as the observed 1.5 + 3.5 + 5.5.
    change = [1.5, 3.5, 5.5, 7.0, 1.5, 3.5, 5.5]
    sums = [sum(change[i] for i in pick) for pick in itertools.combinations(range(7), 3)]
    centre = 3 * sum(change) / 7
    observed = abs(1.5 + 3.5 + 5.5 - centre)
    exact = sum(abs(x - centre) >= observed - 1e-9 for x in sums) / len(sums)
    assert out["n_turns"] == 7 and out["p"] == pytest.approx(exact, abs=1e-4)
    console = Console(record=True, width=300)
    print_report({"known_groups": {"verdict": "pass", "summary": "", "comparisons": []},
                  "test_retest": {"subjects": None, "note": "one run", "n_replicates": 1}, "judge_tracker": out}, console)
    assert f"(p = {exact:.4f}, 7 turns)" in console.export_text()


def test_human_agreement_against_hand_computed_values() -> None:
    human = {
        "c1": {"r1": {"empathy": 1}, "r2": {"empathy": 1}},
        "c2": {"r1": {"empathy": 2}, "r2": {"empathy": 2}},
        "c3": {"r1": {"empathy": 3}, "r2": {"empathy": 5}},
    }
    panel = {"c1": {"empathy": 1.0}, "c2": {"empathy": 2.0}, "c3": {"empathy": 3.0}}
    out = human_agreement(panel, human)["empathy"]
    # Human means 1, 2, 4. Interval alpha of (1,2,3) vs (1,2,4): n = 6 values, D_o = 2*1/6,
    # D_e = 2*(6*35 - 13**2)/(6*5) = 82/30, alpha = 1 - (1/3)/(82/30) = 72/82.
    assert out["alpha_panel_vs_human"] == pytest.approx(72 / 82, abs=1e-4)
    assert out["spearman"] == pytest.approx(1.0)
    # Raters (1,2,3) vs (1,2,5): D_o = 2*4/6, D_e = 2*(6*44 - 14**2)/30 = 136/30, alpha = 96/136.
    assert out["alpha_between_humans"] == pytest.approx(96 / 136, abs=1e-4)
    assert out["n"] == 3 and out["n_raters"] == 2
    missing = human_agreement({"c1": {"empathy": None}}, human)["empathy"]
    assert missing["n"] == 0 and missing["spearman"] is None


# A panel's empathy score per conversation of the shipped sample, keyed by a phrase of its first reply.
PANEL_EMPATHY = {"2am after a shift": 7, "In Portugal, changes": 5, "Oh my goodness": 2, "Kids say stuff like": 1,
                 "Six weeks is about usual": 9, "Waiting times vary": 3, "takes a slow breath": 4, "Around six weeks": 6}
HUMAN_EMPATHY = [9, 3, 3, 1, 8, 2, 2, 5]  # author-1's empathy for h01..h08 (validity/human_sample.jsonl)


def _holistic_by_conversation(body: dict[str, Any]) -> str:
    if body["response_format"]["json_schema"]["name"] != "holistic_verdict":
        return default_responder(body)
    text = body["messages"][-1]["content"]
    score = next(v for phrase, v in PANEL_EMPATHY.items() if phrase in text)
    return json.dumps({d: {"score": score, "evidence": "x", "reason": "y"}
                       for d in ("empathy", "humanlikeness", "persona_adaptation", "coherence")})


def test_validate_cli_with_the_shipped_human_sample(favoured: Path, tmp_path: Path) -> None:
    with FakeOpenAIServer(FakeState(responder=_holistic_by_conversation)) as fake:
        # The run's panel points at a server that is gone; point a copy at this one.
        copy = tmp_path / "run"
        subprocess.run(["cp", "-r", str(favoured), str(copy)], check=True)
        manifest = json.loads((copy / "manifest.json").read_text())
        for judge in manifest["config"]["panel"]["judges"]:
            judge["binding"] = f"openai:fake-model@{fake.base_url}"
        (copy / "manifest.json").write_text(json.dumps(manifest))
        out = tmp_path / "v.json"
        result = cli.invoke(app, ["validate", str(copy), "--human", str(HUMAN_SAMPLE), "-o", str(out), "--no-cache"],
                            catch_exceptions=False, env={"COLUMNS": "200"})
        holistic = [r for r in fake.state.requests if r["body"]["response_format"]["json_schema"]["name"] == "holistic_verdict"]
    assert result.exit_code == 0, result.output
    assert "known groups: PASS" in result.output
    report = json.loads(out.read_text())
    assert report["known_groups"]["verdict"] == "pass"
    assert len(holistic) == 8  # one judge x the sample's 8 conversations
    empathy = report["human"]["dimensions"]["empathy"]
    assert empathy["n"] == 8 and empathy["n_raters"] == 1 and empathy["alpha_between_humans"] is None
    expected = scipy.stats.spearmanr(list(PANEL_EMPATHY.values()), HUMAN_EMPATHY).statistic
    assert empathy["spearman"] == pytest.approx(expected, abs=1e-4)


def test_validate_names_the_bad_line_of_a_human_file(favoured: Path, tmp_path: Path) -> None:
    lines = HUMAN_SAMPLE.read_text().splitlines()
    bad = json.loads(lines[1])
    bad["ratings"]["author-1"]["empathy"] = 11
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(bad)]) + "\n")
    result = cli.invoke(app, ["validate", str(favoured), "--human", str(path), "-o", str(tmp_path / "v.json")])
    assert result.exit_code == 2
    assert "bad.jsonl: line 2: ratings.author-1.empathy: 11 is outside 1..10" in result.output
    assert "Traceback" not in result.output


def _validity_section(html: str) -> str:
    section = html[html.index('id="validity"'):]
    return section[: section.index("</section>")]


def _check_validity_section(section: str) -> None:
    # 1 real subject x 2 references x (EPM-Q, success): a header row and 4 rows, each "above".
    assert section.count("<tr>") == 1 + 4
    assert section.count(">above</td>") == 4 and "not separated" not in section
    assert section.count(">scripted:dismissive</td>") == 2 and section.count(">scripted:echo</td>") == 2


def test_the_page_shows_the_validity_section(favoured: Path, tmp_path: Path) -> None:
    write_page(build_leaderboard([favoured], n_boot=200), tmp_path)
    html = (tmp_path / "index.html").read_text()
    assert 'id="validity"' in html and "Known groups: PASS" in html
    assert html.index('id="validity"') < html.index('id="table-mechanism_stress"')  # beside the scores
    _check_validity_section(_validity_section(html))


def test_chromium_renders_the_validity_section(favoured: Path, tmp_path: Path, chromium: Path) -> None:  # noqa: F811
    write_page(build_leaderboard([favoured], n_boot=200), tmp_path)
    dom = subprocess.run(
        [str(chromium), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'p'}",
         "--dump-dom", (tmp_path / "index.html").as_uri()], capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    _check_validity_section(_validity_section(dom))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0, 100, allow_nan=False), min_size=3, max_size=8),
       st.lists(st.floats(-30, 30, allow_nan=False), min_size=3, max_size=8))
def test_known_groups_verdict_mirrors_when_the_groups_swap(real: list[float], shift: list[float]) -> None:
    n = min(len(real), len(shift))
    rows = [("real", f"c{i}", 0, real[i], False) for i in range(n)]
    rows += [("scripted:echo", f"c{i}", 0, real[i] - shift[i], False) for i in range(n)]
    frame = pd.DataFrame(rows, columns=["subject", "case_id", "seed", "epmq", "success"])
    mirrored = frame.assign(epmq=-frame["epmq"])
    one = next(c for c in known_groups(frame, ["scripted:echo"], n_boot=200)["comparisons"] if c["metric"] == "EPM-Q")
    two = next(c for c in known_groups(mirrored, ["scripted:echo"], n_boot=200)["comparisons"] if c["metric"] == "EPM-Q")
    flip = {"above": "below", "below": "above", "not separated": "not separated"}
    assert two["verdict"] == flip[one["verdict"]]
    assert two["diff"] == pytest.approx(-one["diff"], abs=1e-3)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 10), min_size=3, max_size=12).filter(lambda xs: len(set(xs)) > 1))
def test_a_panel_that_matches_the_humans_has_alpha_one(scores: list[int]) -> None:
    human = {f"c{i}": {"r1": {"coherence": s}} for i, s in enumerate(scores)}
    panel = {f"c{i}": {"coherence": float(s)} for i, s in enumerate(scores)}
    out = human_agreement(panel, human)["coherence"]
    assert out["alpha_panel_vs_human"] == pytest.approx(1.0)
    assert out["spearman"] == pytest.approx(1.0)


def test_judge_tracker_reads_only_what_scoring_did_not_store(favoured: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    episodes = RunDir(favoured).read_episodes()[:2]
    position = {t.user.message: float(t.index - 1) ** 2 for e in episodes for t in e.turns}
    read: list[str] = []

    def fake_valence(texts: list[str]) -> list[float]:
        read.extend(texts)
        return [position.get(x, 0.0) for x in texts]

    monkeypatch.setattr(validity, "valence", fake_valence)
    fresh = judge_tracker(episodes)
    paths = {e.key: [position[t.user.message] for t in e.turns] for e in episodes}
    read.clear()
    assert judge_tracker(episodes, paths) == fresh
    assert read == [e.last_user.message for e in episodes if e.last_user]
