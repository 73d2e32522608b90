"""`emobench external empa`: a small bundle rebuilt from a synthetic EMPA-format folder
(tests/empa_fixture.py, our own writing) and checked against numbers worked out by hand."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats
from typer.testing import CliRunner

from emobench.cli import app
from emobench.scoring.stats import holm_adjust
from tests.empa_fixture import BAD, GOOD, MIXED, TEXT_MARKER, write_empa_results
from tests.synthetic_runs import SubjectTruth, write_run

cli = CliRunner()
PLAN = {
    "model-a": {"script_001": GOOD, "script_002": GOOD, "script_003": MIXED, "script_004": GOOD},
    "model-b": {"script_001": GOOD, "script_002": MIXED, "script_003": GOOD, "script_004": BAD},
    "model-c": {"script_001": MIXED, "script_002": BAD, "script_003": BAD, "script_004": BAD},
}
ATTRIBUTES = {"script_001": ("A", "Leisure"), "script_002": ("A", "Health"), "script_003": ("C", "Health"),
              "script_004": ("P", "Life")}
# (EPM-Q under EMPA's definitions, under the emobench profile) of each kind of episode. BAD by
# hand (tests/test_empa_import.py): Outcome 0, Efficiency (0 + 0 + Tau 100) / 3, Stability
# (0 + Align + 0) / 3 with Align = 100 (11 * -0.9816 / 13 + 1) / 2, so 0.2 * 100/3 + 0.4 * Align/3.
EPMQ = {"GOOD": (135.351930, 98.406154), "MIXED": (21.224574, 17.891241),
        "BAD": (0.2 * 100 / 3 + 0.4 * 100 * (11 * -0.9816 / 13 + 1) / 2 / 3, 1.129436)}
KIND = {id(GOOD): "GOOD", id(MIXED): "MIXED", id(BAD): "BAD"}
Z95, Z_SUM = 1.959964, 2.801585  # z_{0.975}; z_{0.975} + z_{0.8}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("empa")
    results = write_empa_results(root / "results", PLAN, ATTRIBUTES)
    out = root / "board" / "external" / "empa-abc1234"
    done = cli.invoke(app, ["external", "empa", str(results), "-o", str(out), "--commit", "abc1234", "--n-boot", "2000"])
    assert done.exit_code == 0, done.output
    assert "0 of 3 pairs separated after Holm" in done.output
    return out


def test_cases_and_leaderboard_match_the_hand_numbers(bundle: Path) -> None:
    cases = pd.read_parquet(bundle / "cases.parquet").set_index(["subject", "case_id"])
    assert len(cases) == 12
    for model, scripts in PLAN.items():
        for script, levels in scripts.items():
            row = cases.loc[(model, f"empa-{script.replace('_', '-')}")]
            empa, ours = EPMQ[KIND[id(levels)]]
            assert row["epmq_empa"] == pytest.approx(empa, abs=2e-4)  # BAD's hand value has 4 digits in cos
            assert row["epmq_empa"] == pytest.approx(row["epmq_empa_published"], abs=1e-6)
            assert row["epmq"] == pytest.approx(ours, abs=1e-5)
            assert row["success"] == (levels is GOOD)
            assert row["lost_judgements"] == (levels is BAD)
    board = pd.read_parquet(bundle / "leaderboard.parquet")
    overall = board[board["slice_family"] == "overall"].set_index("subject")
    assert list(overall.index) == ["model-a", "model-b", "model-c"]  # best EPM-Q (EMPA) first
    good, mixed = EPMQ["GOOD"][0], EPMQ["MIXED"][0]
    assert overall.loc["model-a", "epmq_empa"] == pytest.approx((3 * good + mixed) / 4, abs=2e-4)
    assert (overall["epmq_empa"] - overall["epmq_empa_published"]).abs().max() < 1e-6
    # Wilson for 2 successes in 4 cases: centre 0.5, half-width z/(1+z²/4)·sqrt(1/16+z²/64) = 0.35.
    assert overall.loc["model-b", ["success_rate", "success_rate_lo", "success_rate_hi"]].tolist() == pytest.approx(
        [0.5, 0.15, 0.85], abs=1e-4)
    lo, hi = overall.loc["model-a", ["epmq_empa_lo", "epmq_empa_hi"]]
    assert mixed - 1e-3 <= lo < overall.loc["model-a", "epmq_empa"] < hi <= good + 1e-3
    # The slices: dominant axis, difficulty (emobench's band of P0), category; n_cases adds up.
    assert set(board["slice_family"]) == {"overall", "dominant_axis", "difficulty", "category"}
    axis = board[board["slice_family"] == "dominant_axis"].groupby("slice")["n_cases"].first().to_dict()
    assert axis == {"A": 2, "C": 1, "P": 1}
    category = board[(board["slice_family"] == "category") & (board["subject"] == "model-c")].set_index("slice")
    assert category.loc["health", "epmq_empa"] == pytest.approx(EPMQ["BAD"][0], abs=2e-4)


def test_pairs_use_the_gate_statistics_with_holm(bundle: Path) -> None:
    pairs = pd.read_parquet(bundle / "pairs.parquet")
    empa = pairs[pairs["metric"] == "epmq_empa"].set_index(["subject_a", "subject_b"])
    assert sorted(empa.index) == [("model-a", "model-b"), ("model-a", "model-c"), ("model-b", "model-c")]
    cases = pd.read_parquet(bundle / "cases.parquet").pivot(index="case_id", columns="subject", values="epmq_empa")
    for (a, b), row in empa.iterrows():
        d = cases[a] - cases[b]
        assert row["diff"] == pytest.approx(d.mean(), abs=1e-9)
        assert row["p"] == pytest.approx(stats.ttest_rel(cases[a], cases[b]).pvalue, rel=1e-9)
        assert row["mdd"] == pytest.approx(Z_SUM * d.std(ddof=1) / 2, rel=1e-5)  # sqrt(4 cases)
        assert row["diff_lo"] <= row["diff"] <= row["diff_hi"]
    # Stored: raw p 0.611684, 0.040439, 0.150256; Holm multiplies the smallest by 3, the next by 2.
    assert empa["p"].tolist() == pytest.approx([0.611684, 0.040439, 0.150256], abs=1e-6)
    assert empa["p_holm"].tolist() == pytest.approx([0.611684, 3 * 0.040439, 2 * 0.150256], abs=1e-5)
    assert not empa["separated"].any()
    assert empa.loc[("model-a", "model-c"), "mdd"] == pytest.approx(77.3095, abs=1e-3)
    # Cases to separate a - c at alpha/3: ((z_{1-0.05/6} + z_{0.8}) sd / diff)^2, rounded up.
    row = empa.loc[("model-a", "model-c")]
    z = stats.norm.ppf(1 - 0.05 / 6) + stats.norm.ppf(0.8)
    assert row["cases_needed"] == math.ceil((z * row["sd"] / row["diff"]) ** 2) == 4
    meta = json.loads(pq.read_schema(bundle / "pairs.parquet").metadata[b"emobench.external_bundle"])
    summary = meta["pairs"]["epmq_empa"]
    assert summary["n_pairs"] == 3 and summary["separated"] == 0 and summary["correction"] == "holm"
    assert summary["median_mdd"] == pytest.approx(float(np.median(empa["mdd"])))


def test_readable_by_duckdb_with_provenance(bundle: Path) -> None:
    con = duckdb.connect()
    for name, rows in (("leaderboard", 24), ("cases", 12), ("pairs", 6)):
        path = str(bundle / f"{name}.parquet")
        assert con.execute("select count(*) from read_parquet(?)", [path]).fetchone() == (rows,)
        meta = con.execute("select value from parquet_kv_metadata(?) where key = 'emobench.external_bundle'",
                           [path]).fetchone()
        assert meta is not None
        data = json.loads(meta[0])
        assert data["repository"] == "KAYA-HAI/EMPA-Benchmark-EPMSandbox" and data["commit"] == "abc1234"
        assert data["licence"] == "CC BY-NC 4.0" and data["episodes_per_case"] == 1
    separated = con.execute(f"select count(*) from read_parquet('{bundle / 'pairs.parquet'}') "
                            "where metric = 'epmq_empa' and p_holm < 0.05").fetchone()
    assert separated == (0,)
    notice = (bundle / "NOTICE").read_text()
    assert "KAYA-HAI/EMPA-Benchmark-EPMSandbox" in notice and "abc1234" in notice and "CC BY-NC 4.0" in notice


def test_no_text_from_transcripts_or_cards_reaches_the_bundle(bundle: Path) -> None:
    results = bundle.parents[2] / "results"
    texts: set[str] = set()

    def collect(value: object) -> None:
        if isinstance(value, str) and TEXT_MARKER in value:
            texts.add(value)
        elif isinstance(value, dict):
            for v in value.values():
                collect(v)
        elif isinstance(value, list):
            for v in value:
                collect(v)

    for file in results.glob("*/script_*_result.json"):
        collect(json.loads(file.read_text()))
    assert len(texts) > 100  # transcript, evidence, reasoning, story, outcome, interlude, IEDR reasoning
    allowed = {"subject", "case_id", "dominant_axis", "difficulty", "difficulty_empa", "category", "threshold",
               "stop_reason", "slice_family", "slice", "metric", "subject_a", "subject_b"}
    for file in bundle.glob("*.parquet"):
        table = pq.read_table(file)
        for name in table.column_names:
            values = table.column(name).to_pylist()
            if any(isinstance(v, str) for v in values):
                assert name in allowed, f"{file.name}: text column {name}"
            for v in values:
                assert not isinstance(v, (list, dict)), f"{file.name}: nested column {name}"
                assert not (isinstance(v, str) and len(v) > 40), f"{file.name}: {name} holds {v[:40]!r}"
        published = [json.dumps(table.schema.metadata[k].decode()) for k in table.schema.metadata]
        for blob in [*published, *(str(v) for c in table.columns for v in c.to_pylist())]:
            assert TEXT_MARKER not in blob
    for file in (bundle / "index.html", bundle / "NOTICE"):
        page = file.read_text()
        assert TEXT_MARKER not in page and not any(t in page for t in texts)
        assert "fixture-model" not in page and "judge-model" not in page


def test_main_page_links_the_external_bundle(bundle: Path, tmp_path: Path) -> None:
    board = bundle.parents[1]
    own = write_run(tmp_path / "own", [SubjectTruth("ours")], n_cases=4, n_seeds=1)
    done = cli.invoke(app, ["leaderboard", "build", str(own), "-o", str(board), "--n-boot", "20"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    page = (board / "index.html").read_text()
    assert 'id="external"' in page and 'href="external/empa-abc1234/index.html"' in page
    assert "0 of 3" in page and "CC BY-NC 4.0" in page
    own_page = (bundle / "index.html").read_text()
    assert 'href="../../index.html"' in own_page and 'id="pairs-table"' in own_page and "<script" in own_page
    assert not re.search(r'(src|href)="https?:', own_page)  # self-contained: nothing fetched


def test_bad_results_dir_is_one_line_exit_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    tampered = write_empa_results(tmp_path / "tampered", {"m": {"script_001": GOOD, "script_002": BAD}},
                                  {"script_001": ("A", "Life"), "script_002": ("C", "Life")})
    stats_file = tampered / "m" / "descriptive_statistics.csv"
    stats_file.write_text(stats_file.read_text().replace("Idx_Pen", "Idx_Pen_renamed"))
    missing = write_empa_results(tmp_path / "missing", {"m": {"script_001": GOOD, "script_002": BAD},
                                                        "n": {"script_001": GOOD}},
                                 {"script_001": ("A", "Life"), "script_002": ("C", "Life")})
    cases = [
        (tmp_path / "nowhere", "not a directory"),
        (empty, "no EMPA result files"),
        (tampered, "Idx_Pen"),
    ]
    for path, words in cases:
        done = cli.invoke(app, ["external", "empa", str(path), "-o", str(tmp_path / "out")])
        assert done.exit_code == 2, done.output
        assert len(done.output.strip().splitlines()) == 1 and words in done.output and "Traceback" not in done.output
    done = cli.invoke(app, ["external", "empa", str(missing), "-o", str(tmp_path / "out")])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1, done.output
    assert "1 of the 2 cases recorded" in done.output and not (tmp_path / "out").exists()


@given(st.lists(st.floats(min_value=0.0, max_value=1.0, allow_nan=False), min_size=1, max_size=40))
def test_holm_is_monotone_at_least_raw_and_at_most_one(p: list[float]) -> None:
    raw = np.array(p)
    adjusted = holm_adjust(raw)
    assert ((adjusted >= raw - 1e-15) & (adjusted <= 1.0)).all()
    order = np.argsort(raw, kind="stable")
    assert (np.diff(adjusted[order]) >= 0).all()  # the order of the raw p-values is kept
    assert adjusted.min() == pytest.approx(min(1.0, len(p) * raw.min()))  # the first step is Bonferroni's
