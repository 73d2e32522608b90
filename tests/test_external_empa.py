"""`emobench external empa`: a small bundle rebuilt from a synthetic EMPA-format folder
(tests/empa_fixture.py, our own writing) and checked against numbers worked out by hand."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats
from typer.testing import CliRunner

from emobench.cli import app
from emobench.external.bundle import bounds_are_min_max
from emobench.external.pairs import sign_flip_pvalue
from emobench.scoring.stats import exact_split, holm_adjust
from tests.empa_fixture import BAD, GOOD, MIXED, TEXT_MARKER, varied_plan, write_empa_results
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
ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "leaderboard" / "external" / "empa-d59757a"
BUNDLE_FILES = ("cases.parquet", "leaderboard.parquet", "pairs.parquet", "index.html", "NOTICE")


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
    # Self-contained: nothing fetched (the licence is a plain link to follow, not a resource).
    assert not re.search(r'src="https?:|<link[^>]*href="https?:', own_page)


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


def test_permutation_p_by_hand(bundle: Path) -> None:
    # d = (1, 2, 3): of the 8 sign patterns only (+, +, +) reaches a mean >= 2, so p = 2 * 1/8.
    assert sign_flip_pvalue(np.array([1.0, 2.0, 3.0]), n_resamples=1000, seed=0) == 0.25
    # d = (1, -2, 3, 4), sum 6: sums >= 6 flip a set of |d| adding to at most 2: {}, {1}, {2}; p = 2 * 3/16.
    assert sign_flip_pvalue(np.array([1.0, -2.0, 3.0, 4.0]), n_resamples=1000, seed=0) == 0.375
    # Past 2**n <= n_resamples it is seeded Monte Carlo: the observed pattern counts, so p >= 1/(n+1).
    far = sign_flip_pvalue(np.full(30, 5.0), n_resamples=999, seed=3)
    assert far == pytest.approx(2 / 1000) and far == sign_flip_pvalue(np.full(30, 5.0), n_resamples=999, seed=3)
    # The fixture's 4 cases, exact over 16 patterns, with x = GOOD - MIXED and y = GOOD - BAD:
    # a - b = (0, x, -x, y): sums >= y: y, y + 2x, y (of 8, twice) -> 2 * 3/8; a - c = (x, y, m - b, y), all
    # positive: 2 * 1/16; b - c = (x, m - b, y, 0): the 0 gives the maximum twice -> 2 * 2/16.
    pairs = pd.read_parquet(bundle / "pairs.parquet")
    empa = pairs[pairs["metric"] == "epmq_empa"].set_index(["subject_a", "subject_b"])
    assert empa["p_perm"].tolist() == [0.75, 0.125, 0.25]
    assert empa["p_perm_holm"].tolist() == pytest.approx([0.75, 3 * 0.125, 2 * 0.25])
    meta = json.loads(pq.read_schema(bundle / "pairs.parquet").metadata[b"emobench.external_bundle"])
    assert meta["pairs"]["epmq_empa"]["separated_perm"] == 0 and meta["pairs"]["epmq_empa"]["p_below_alpha"] == 1
    assert meta["permutation"] == {"test": "sign-flip, mean difference, two-sided", "n": 2000, "seed": 0, "exact_up_to": 10}


def test_tiny_slices_are_labelled_min_max(bundle: Path) -> None:
    # Expanded tail Phi(-sqrt(n/(n-1)) t_{n-1,0.975}) against the mass n**-n on each extreme:
    # n = 4: Phi(-1.1547 * 3.1824) = 1.19e-4 < 1/256; n = 5: Phi(-1.1180 * 2.7764) = 9.54e-4 > 5**-5 = 3.2e-4.
    assert [bounds_are_min_max(n) for n in (1, 2, 3, 4, 5, 6, 30)] == [False, True, True, True, False, False, False]
    board = pd.read_parquet(bundle / "leaderboard.parquet")
    cases = pd.read_parquet(bundle / "cases.parquet")
    for row in board.itertuples():
        inside = cases[cases["subject"] == row.subject]
        if row.slice_family != "overall":
            inside = inside[inside[row.slice_family] == row.slice]
        assert row.ci_is_min_max == (2 <= row.n_cases <= 4)
        if row.ci_is_min_max:  # exactly the slice's lowest and highest case
            assert (row.epmq_empa_lo, row.epmq_empa_hi) == (inside["epmq_empa"].min(), inside["epmq_empa"].max())
            assert (row.epmq_lo, row.epmq_hi) == (inside["epmq"].min(), inside["epmq"].max())
    page = (bundle / "index.html").read_text()
    lo, hi = board.loc[(board["slice_family"] == "dominant_axis") & (board["subject"] == "model-c") & (board["slice"] == "A"),
                       ["epmq_empa_lo", "epmq_empa_hi"]].iloc[0]
    assert f"[min–max {lo:.1f}, {hi:.1f}]" in page and "lowest and highest case" in page
    committed = pd.read_parquet(COMMITTED / "leaderboard.parquet")
    assert set(committed.loc[committed["ci_is_min_max"], "n_cases"]) == {4}  # EMPA's 4 "easy" cases


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 12), st.integers(1, 3)),
                  elements=st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False)),
       st.randoms(use_true_random=False))
def test_bootstrap_sums_are_exact_in_any_order(values: np.ndarray, rnd: object) -> None:
    n = values.shape[0]
    parts = exact_split(values)
    exact = [[Fraction(float(x)) for x in row] for row in values]
    assert [[sum(Fraction(float(p[i, j])) for p in parts) for j in range(values.shape[1])]
            for i in range(n)] == exact  # the parts add up to the values exactly
    # Counts of one resample (rows summing to n): each part's sum is exact, forwards or backwards.
    draws = [rnd.randrange(n) for _ in range(n)]  # type: ignore[attr-defined]
    counts = np.bincount(draws, minlength=n).astype(np.float64)
    for part in parts:
        forward = counts @ part
        backward = counts[::-1] @ part[::-1]
        truth = [sum(Fraction(int(c)) * Fraction(float(v)) for c, v in zip(counts, part[:, j], strict=True))
                 for j in range(part.shape[1])]
        assert [Fraction(float(x)) for x in forward] == truth == [Fraction(float(x)) for x in backward]


def _build(results: Path, out: Path, env: dict[str, str] | None = None) -> None:
    args = ["external", "empa", str(results), "-o", str(out), "--commit", "abc1234", "--n-boot", "2000"]
    if env is None:
        done = cli.invoke(app, args)
        assert done.exit_code == 0, done.output
        return
    subprocess.run([sys.executable, "-m", "emobench", *args], check=True, capture_output=True, cwd=out.parent,
                   env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def test_rebuild_is_byte_identical_on_another_blas_kernel(tmp_path: Path) -> None:
    """Twice in one process, and once in another on OpenBLAS's oldest x86 kernel (SSE, not AVX):
    the kernels add in different orders, so only exact bootstrap sums give the same bytes (the
    float32 sums before them differed here in the CI bounds)."""
    results = write_empa_results(tmp_path / "results", *varied_plan(4, 15, seed=7))
    _build(results, tmp_path / "first")
    _build(results, tmp_path / "again")
    _build(results, tmp_path / "sse", {"OPENBLAS_CORETYPE": "Katmai", "OPENBLAS_NUM_THREADS": "4"})
    board = pd.read_parquet(tmp_path / "first" / "leaderboard.parquet")
    assert board["epmq_empa"].nunique() > 30  # many distinct values, so many roundings to get right
    for name in BUNDLE_FILES:
        first = (tmp_path / "first" / name).read_bytes()
        assert (tmp_path / "again" / name).read_bytes() == first, name
        assert (tmp_path / "sse" / name).read_bytes() == first, name


@pytest.mark.parametrize("folder", ["fixture", "committed"])
def test_notice_and_page_carry_the_attribution(bundle: Path, folder: str) -> None:
    where = bundle if folder == "fixture" else COMMITTED
    for name in ("NOTICE", "index.html"):
        text = (where / name).read_text()
        assert "Copyright 2026 Shiya Zhang" in text, name
        assert "No warranties are given." in text, name
        assert "https://creativecommons.org/licenses/by-nc/4.0/" in text and "CC BY-NC 4.0" in text, name
        assert "@article{zhang2026empa," in text and "arXiv:2603.00552" in text, name
        assert re.search(r"[Mm]odified", text) and "re-scored" in text, name
    page = (where / "index.html").read_text()
    assert '<a href="https://creativecommons.org/licenses/by-nc/4.0/">CC BY-NC 4.0</a>' in page
    assert "not a percentage" in page and "not resolved at these" in page
    assert "tied" not in page and "noise" not in page  # a non-significant difference is "not resolved"
    readme = (ROOT / "README.md").read_text()
    licence = readme[readme.index("## License"):]
    assert "except `leaderboard/external/`" in licence and "CC BY-NC 4.0" in licence
