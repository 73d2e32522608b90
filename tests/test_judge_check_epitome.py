"""`emobench validate --judge-check epitome`: the panel against human levels, on our own fixture
in EPITOME's format (tests/data/epitome, no EPITOME text). The statistics against values worked
out by hand, the join, stratified sampling, one-line errors for a bad --data folder, and the page."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.publish.html import write_page
from emobench.publish.leaderboard import build_leaderboard
from emobench.validation.agreement.stats import level_agreement
from emobench.validation.epitome.data import FILES, MECHANISMS, Pair, read_epitome, stratified_sample
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "epitome"
# The fake panel's levels per pair, keyed by a phrase of the response: (C, A, P) progress, holistic empathy.
PANEL = {"buy bread": ((0, 0, 0), 2), "quiet hits hardest": ((2, 1, 0), 5), "that would sting": ((1, 1, 0), 4),
         "deflating": ((2, 1, 2), 7), "waiting like that": ((0, 2, 1), 8), "guilt like that": ((0, 0, 2), 6),
         "UNPARSEABLE-MARKER": (None, 3)}


def _responder(body: dict[str, Any]) -> str:
    fmt = body["response_format"]["json_schema"]["name"]
    text = body["messages"][-1]["content"]
    levels, empathy = next(v for phrase, v in PANEL.items() if phrase in text)
    if fmt == "holistic_verdict":
        return json.dumps({d: {"score": empathy, "evidence": "x", "reason": "y"}
                           for d in ("empathy", "humanlikeness", "persona_adaptation", "coherence")})
    if fmt != "mdep_verdict":
        return default_responder(body)
    if levels is None:
        return "not json at all"  # every attempt: the pair's verdict is invalid
    return json.dumps({axis: {"progress": lv, "regression": 0, "evidence": "x" if lv else "", "reason": "y"}
                       for axis, lv in zip("CAP", levels, strict=True)})


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "emobench", "validate", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "COLUMNS": "220", **(env or {})}, timeout=300)


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], subprocess.CompletedProcess[str], int]:
    tmp = tmp_path_factory.mktemp("epitome")
    with FakeOpenAIServer(FakeState(responder=_responder)) as fake:
        panels = []
        for name in ("panel-a", "panel-b"):
            path = tmp / f"{name}.yaml"
            path.write_text(f"name: {name}\njudges:\n  - binding: openai:fake-model@{fake.base_url}\n    label: {name}-judge\n")
            panels += ["--panel", str(path)]
        result = _cli("--judge-check", "epitome", "--data", str(FIXTURE), *panels, "--no-cache",
                      "--n-boot", "200", "-o", str(tmp / "validity.json"))
        n_requests = len(fake.state.requests)
    assert result.returncode == 0, result.stderr
    return json.loads((tmp / "validity.json").read_text()), result, n_requests


def test_the_join_survives_whitespace_and_leaves_out_conflicting_ratings() -> None:
    data = read_epitome(FIXTURE)
    assert [p.key for p in data.pairs] == [f"s0{i}/r0{i}" for i in range(1, 8)]  # s08 rated 0 and 1 in one file
    assert data.conflicting == 1 and data.unmatched == 0
    assert data.rows == {"emotional-reactions-reddit.csv": 9, "interpretations-reddit.csv": 9, "explorations-reddit.csv": 8}
    s04 = data.pairs[3]
    assert s04.levels == {"emotional_reactions": 1, "interpretations": 2, "explorations": 2}
    assert "\n" not in s04.response_post and "  " not in s04.seeker_post


def test_emotional_reactions_statistics_match_the_hand_computed_values(checked: Any) -> None:
    report, _, _ = checked
    er = report["judge_check"]["panels"]["panel-a"]["mechanisms"]["emotional_reactions"]
    # Valid pairs (human ER, panel A): (0,0) (0,1) (1,1) (1,1) (2,2) (2,0); s07's verdict is invalid.
    assert er["n"] == 7 and er["n_valid"] == 6 and er["invalid_share"]["value"] == pytest.approx(1 / 7, abs=1e-4)
    assert er["confusion"] == [[1, 1, 0], [0, 2, 0], [1, 0, 1]]
    assert er["exact_agreement"]["value"] == pytest.approx(4 / 6, abs=1e-4)
    # Spearman: ranks h = 1.5 1.5 3.5 3.5 5.5 5.5, p = 1.5 4 4 4 6 1.5; deviations from 3.5 give
    # sum dh*dp = 4, sum dh^2 = 16, sum dp^2 = 15, so rho = 4 / sqrt(240).
    assert er["spearman"]["value"] == pytest.approx(4 / 240**0.5, abs=1e-4)
    # Ordinal alpha: coincidences o00=2 o11=4 o22=2 o01=o10=1 o02=o20=1, so n0=4 n1=5 n2=3, n=12;
    # delta^2: (0,1) 4.5^2, (0,2) 8.5^2, (1,2) 4^2. Observed sum o*d = 2(20.25 + 72.25) = 185,
    # expected sum n_c n_k d = 2(20*20.25 + 12*72.25 + 15*16) = 3024; alpha = 1 - 11*185/3024 = 989/3024.
    assert er["alpha_ordinal"]["value"] == pytest.approx(989 / 3024, abs=1e-4)
    assert er["alpha_ordinal"]["lo"] <= er["alpha_ordinal"]["value"] <= er["alpha_ordinal"]["hi"]
    # Human levels 0,0,1,1,2,2: majority (first of the tied) level 0 agrees on 1/3, chance on 3*(1/3)^2.
    # The majority rater's alpha: o00=4 o01=o10=2 o02=o20=2, so n0=8 n1=2 n2=2; delta^2: (0,1) 25,
    # (0,2) 49, (1,2) 4; observed 2(2*25 + 2*49) = 296, expected 2(16*25 + 16*49 + 4*4) = 2400;
    # alpha = 1 - 11*296/2400 = -856/2400.
    assert er["baselines"]["majority"] == {"level": 0, "exact_agreement": pytest.approx(1 / 3, abs=1e-4),
                                           "spearman": None, "alpha": pytest.approx(-856 / 2400, abs=1e-4)}
    assert er["baselines"]["chance"]["exact_agreement"] == pytest.approx(1 / 3, abs=1e-4)
    assert abs(er["baselines"]["chance"]["alpha"]["mean"]) < 0.2


def test_every_mechanism_and_the_holistic_empathy_are_reported(checked: Any) -> None:
    report, _, _ = checked
    panel = report["judge_check"]["panels"]["panel-a"]
    ip = panel["mechanisms"]["interpretations"]  # human IP 0 2 0 2 2 0 against panel C 0 2 1 2 0 0
    assert ip["confusion"] == [[2, 1, 0], [0, 0, 0], [1, 0, 2]]
    expected = scipy.stats.spearmanr([0, 3, 1, 5, 4, 4, 2], [2, 5, 4, 7, 8, 6, 3]).statistic
    assert panel["holistic_empathy"]["n_valid"] == 7
    assert panel["holistic_empathy"]["spearman"]["value"] == pytest.approx(expected, abs=1e-4)


def test_the_result_records_its_provenance_and_no_text(checked: Any) -> None:
    report, _, n_requests = checked
    block = report["judge_check"]
    assert block["mapping"] == {"emotional_reactions": "A.progress", "interpretations": "C.progress",
                                "explorations": "P.progress"}
    assert block["stand_in"]["card"]["hidden_need"] and len(block["stand_in"]["content_hash"]) == 64
    assert set(block["data"]["sha256"]) == set(FILES.values()) and block["limit"] is None
    panel = block["panels"]["panel-b"]
    assert panel["judges"][0]["label"] == "panel-b-judge" and set(panel["prompt_versions"]) == {"mdep", "holistic"}
    # 7 pairs x (MDEP + holistic) per panel, plus 2 retries of s07's MDEP verdict.
    assert panel["cost"]["n_calls"] == 16 and n_requests == 32
    text = json.dumps(report)
    for row in read_epitome(FIXTURE).pairs:
        assert row.response_post not in text and row.seeker_post not in text


def test_several_panels_print_side_by_side(checked: Any) -> None:
    _, result, _ = checked
    header = next(line for line in result.stdout.splitlines() if "panel-a" in line)
    assert "panel-b" in header and "majority" in header and "chance" in header
    assert "0.33" in result.stdout  # ER's alpha 989/3024


def test_the_page_shows_the_judge_check_with_its_panel(checked: Any, tmp_path: Path) -> None:
    from tests.test_validity import _run

    run = _run(tmp_path, True, [0])
    report, _, _ = checked
    (run / "validity.json").write_text(json.dumps(report))
    write_page(build_leaderboard([run], n_boot=200), tmp_path)
    html = (tmp_path / "index.html").read_text()
    assert "Judges against people: EPITOME, panel <code>panel-a</code>" in html
    assert "emotional reactions (A.progress)" in html


@pytest.mark.parametrize(("damage", "expected"), [
    ("no-folder", "nowhere: not a folder"),
    ("no-file", "explorations-reddit.csv: file not found"),
    ("no-column", "interpretations-reddit.csv: level: missing column"),
    ("bad-level", "emotional-reactions-reddit.csv: row 3: level: '3' is not 0, 1 or 2"),
])
def test_a_bad_data_folder_is_one_line_and_exit_2(tmp_path: Path, damage: str, expected: str) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    for name in FILES.values():
        (folder / name).write_bytes((FIXTURE / name).read_bytes())
    if damage == "no-folder":
        folder = tmp_path / "nowhere"
    elif damage == "no-file":
        (folder / "explorations-reddit.csv").unlink()
    elif damage == "no-column":
        path = folder / "interpretations-reddit.csv"
        path.write_text(path.read_text().replace(",level,", ",lvl,", 1))
    else:
        path = folder / "emotional-reactions-reddit.csv"
        rows = list(csv.reader(path.open()))
        rows[3][4] = "3"
        with path.open("w", newline="") as f:
            csv.writer(f).writerows(rows)
    result = _cli("--judge-check", "epitome", "--data", str(folder), "-o", str(tmp_path / "v.json"))
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in result.stderr


def test_judge_check_needs_data_and_a_known_set(tmp_path: Path) -> None:
    result = _cli()
    assert result.returncode == 2 and "give scored run directories, --fidelity, --judge-check, or several" in result.stderr
    result = _cli("--human", "h.jsonl", "--judge-check", "epitome", "--data", str(FIXTURE), "-o", str(tmp_path / "v.json"))
    assert result.returncode == 2 and "--human: needs a run directory" in result.stderr
    result = _cli("--judge-check", "epitome", "-o", str(tmp_path / "v.json"))
    assert result.returncode == 2 and "--data: missing" in result.stderr
    result = _cli("--judge-check", "empathy-bench", "--data", str(FIXTURE), "-o", str(tmp_path / "v.json"))
    assert result.returncode == 2 and "unknown data set 'empathy-bench'" in result.stderr


def _pairs(levels: list[int]) -> list[Pair]:
    return [Pair(f"s{i}", f"r{i}", "post", "reply", dict.fromkeys(MECHANISMS, lv)) for i, lv in enumerate(levels)]


def test_stratified_sampling_is_deterministic_and_keeps_the_level_shares() -> None:
    pairs = _pairs([0] * 60 + [1] * 30 + [2] * 10)
    first = stratified_sample(pairs, "interpretations", 20, seed=7)
    assert first == stratified_sample(pairs, "interpretations", 20, seed=7)
    assert first != stratified_sample(pairs, "interpretations", 20, seed=8)
    counts = [sum(p.levels["interpretations"] == lv for p in first) for lv in (0, 1, 2)]
    assert counts == [12, 6, 2]
    rare = stratified_sample(_pairs([0] * 98 + [2] * 2), "explorations", 5, seed=0)
    assert sorted(p.levels["explorations"] for p in rare) == [0, 0, 0, 0, 2]  # a rare level keeps a pair


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=1, max_size=80), st.integers(1, 100), st.integers(0, 2**32 - 1))
def test_a_sample_has_the_asked_size_and_every_level_it_can(levels: list[int], n: int, seed: int) -> None:
    sample = stratified_sample(_pairs(levels), "emotional_reactions", n, seed)
    assert len(sample) == min(n, len(levels)) and len({p.key for p in sample}) == len(sample)
    present = set(levels)
    if n >= len(present):
        assert {p.levels["emotional_reactions"] for p in sample} == present


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.one_of(st.none(), st.integers(0, 2))), min_size=1, max_size=40))
def test_agreement_counts_add_up_and_a_perfect_panel_scores_one(pairs: list[tuple[int, int | None]]) -> None:
    human, panel = [h for h, _ in pairs], [p for _, p in pairs]
    out = level_agreement(human, panel, (0, 1, 2), n_boot=20, seed=0)
    valid = [(h, p) for h, p in pairs if p is not None]
    assert sum(map(sum, out["confusion"])) == out["n_valid"] == len(valid)
    assert out["invalid_share"]["value"] == pytest.approx((len(pairs) - len(valid)) / len(pairs), abs=1e-4)
    if valid:
        assert out["exact_agreement"]["value"] == pytest.approx(np.mean([h == p for h, p in valid]), abs=1e-4)
    perfect = level_agreement(human, human, (0, 1, 2), n_boot=20, seed=0)
    assert perfect["exact_agreement"]["value"] == 1.0
    assert perfect["alpha_ordinal"]["value"] in (1.0, None)  # None: a single level, alpha undefined


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=15, unique=True),
       st.lists(st.sampled_from([" ", "  ", "\n", "\t"]), min_size=3, max_size=3))
def test_the_reader_returns_the_levels_written_whatever_the_whitespace(
    rows: list[tuple[int, int, int]], spaces: list[str]
) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for k, (mechanism, name) in enumerate(FILES.items()):
            with (Path(tmp) / name).open("w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["sp_id", "rp_id", "seeker_post", "response_post", "level", "rationales"])
                for i, levels in enumerate(rows):
                    w.writerow([f"s{i}", f"r{i}", f"a{spaces[k]}post", f"{spaces[k]}a reply", levels[k], ""])
                del mechanism
        data = read_epitome(Path(tmp))
    assert [tuple(p.levels[m] for m in MECHANISMS) for p in sorted(data.pairs, key=lambda p: int(p.sp_id[1:]))] == rows
    assert {p.seeker_post for p in data.pairs} == {"a post"} and {p.response_post for p in data.pairs} == {"a reply"}
