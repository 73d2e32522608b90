"""Leaderboard build: aggregation, slices, known groups, coverage, parquet readers, provenance."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from emobench.errors import InputError
from emobench.gate import cli as gate_cli
from emobench.publish import cli as publish_cli
from emobench.publish.columns import FAMILIES
from emobench.publish.leaderboard import (
    LEADERBOARD_SCHEMA,
    build_leaderboard,
    read_leaderboard,
    write_leaderboard,
)
from emobench.publish.provenance import read_metadata
from emobench.publish.show import render_table
from tests.synthetic_runs import PROMPT_VERSIONS, SubjectTruth, expected_epmq, write_run

STRONG = SubjectTruth("strong", epmq=64, success=0.65)
WEAK = SubjectTruth("weak", epmq=58, success=0.45, fragility=3)  # worse by construction
OTHER = SubjectTruth("other", epmq=61, success=0.5)


def _app() -> typer.Typer:
    """The mounts the lead adds to emobench/cli.py."""
    app = typer.Typer()
    app.add_typer(publish_cli.leaderboard_app, name="leaderboard")
    app.command("gate")(gate_cli.gate)
    return app


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("runs")
    return [
        write_run(root / "run-a", [STRONG, WEAK], n_cases=80, n_seeds=3, seed=1),
        write_run(root / "run-b", [OTHER], n_cases=80, n_seeds=3, seed=2),
    ]


@pytest.fixture(scope="module")
def table(runs: list[Path]) -> pa.Table:
    return build_leaderboard(runs, n_boot=600, seed=0)


def _rows(table: pa.Table, family: str) -> list[dict[str, Any]]:
    return table.filter(pc.equal(table.column("slice_family"), family)).to_pylist()


def test_schema_families_and_slices(table: pa.Table) -> None:
    assert table.schema.remove_metadata() == LEADERBOARD_SCHEMA
    slices = {f: sorted({r["slice"] for r in _rows(table, f)}) for f in FAMILIES}
    assert slices["overall"] == ["all"]
    assert slices["mechanism_stress"] == sorted(
        f"{a}/{m}" for a in "CAP" for m in ("routine", "challenging"))
    assert slices["persona_resilience"] == sorted(
        f"{a}/{m}" for a in "CAP" for m in ("receptive", "defensive"))
    assert slices["category"] == sorted(
        ["life", "health", "leisure", "values", "relations", "career"])
    assert slices["valence"] == ["mixed", "negative", "positive"]
    keys = list(zip(*(table.column(c).to_pylist() for c in ("slice_family", "slice", "subject")),
                    strict=True))
    assert len(keys) == len(set(keys))
    # Every family partitions the cases: its counts add up to the overall row.
    for fam in FAMILIES[1:]:
        for subject in ("strong", "weak", "other"):
            rows = [r for r in _rows(table, fam) if r["subject"] == subject]
            assert sum(r["n_episodes"] for r in rows) == 240
            assert sum(r["n_cases"] for r in rows) == 80


def test_score_is_mean_over_cases_of_per_case_mean(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", [STRONG], n_cases=30, n_seeds=3, seed=4)
    scores = pq.read_table(run / "scores.parquet")
    # Uneven seeds per case make the pooled mean differ from the mean of per-case means.
    keep = pc.invert(pc.and_(pc.less(pc.cast(pc.utf8_slice_codeunits(
        scores.column("case_id"), 9, 10), pa.int64()), 5), pc.greater(scores.column("seed"), 0)))
    scores = scores.filter(keep)
    pq.write_table(scores, run / "scores.parquet")
    df = scores.select(["case_id", "epmq", "final_meter", "coherence", "success"]).to_pandas()
    per_case = df.groupby("case_id").mean(numeric_only=True)
    row = _rows(build_leaderboard([run], n_boot=200), "overall")[0]
    assert row["epmq"] == pytest.approx(per_case["epmq"].mean())
    assert row["epmq"] != pytest.approx(df["epmq"].mean())
    assert row["coherence"] == pytest.approx(per_case["coherence"].mean())
    assert row["success_rate"] == pytest.approx(per_case["success"].mean())
    assert row["n_episodes"] == len(df) and row["n_cases"] == 30


def test_known_groups_worse_subject_ranks_below(table: pa.Table) -> None:
    overall = _rows(table, "overall")
    assert [r["subject"] for r in overall] == ["strong", "other", "weak"]
    strong, weak = overall[0], overall[2]
    assert weak["epmq_hi"] < strong["epmq_lo"]
    for r in overall:
        assert r["epmq_lo"] < r["epmq"] < r["epmq_hi"]
        assert r["success_rate_lo"] < r["success_rate"] < r["success_rate_hi"]
    # Fragility shows where it was built in: challenging cases cost "weak" more.
    mech = {(r["subject"], r["slice"]): r["epmq"] for r in _rows(table, "mechanism_stress")}
    gap = {s: np.mean([mech[(s, f"{a}/routine")] - mech[(s, f"{a}/challenging")]
                       for a in "CAP"]) for s in ("strong", "weak")}
    assert gap["weak"] > gap["strong"] + 1.5


def test_leaderboard_ci_coverage(tmp_path: Path) -> None:
    """400 independent subjects from known truths: 95% CIs cover 93-97% (seeded)."""
    rng = np.random.default_rng(99)
    truths = [SubjectTruth(f"s{i:03d}", epmq=float(rng.uniform(40, 70)),
                           success=float(rng.uniform(0.2, 0.8))) for i in range(400)]
    run = write_run(tmp_path / "cov", truths, n_cases=100, n_seeds=2, seed=3,
                    case_effects="per_subject", report=False)
    table = build_leaderboard([run], n_boot=1000, seed=1)
    truth = {t.label: t for t in truths}

    def coverage(family: str, metric: str) -> float:
        rows = _rows(table, family)
        want = {r["subject"]: expected_epmq(truth[r["subject"]]) if metric == "epmq"
                else truth[r["subject"]].success for r in rows}
        return float(np.mean([r[f"{metric}_lo"] <= want[r["subject"]] <= r[f"{metric}_hi"]
                              for r in rows]))

    assert 0.93 <= coverage("overall", "epmq") <= 0.97
    assert 0.93 <= coverage("overall", "success_rate") <= 0.97
    # Slices hold ~17 cases each (2,400 intervals per family): small-sample coverage holds too.
    for family in ("mechanism_stress", "persona_resilience", "category"):
        assert 0.93 <= coverage(family, "epmq") <= 0.97, family


def test_parquet_reads_back_identically(table: pa.Table, tmp_path: Path) -> None:
    write_leaderboard(table, tmp_path)
    path = tmp_path / "leaderboard.parquet"
    expected = table.to_pylist()

    def clean(records: list[dict[str, object]]) -> list[dict[str, object]]:
        return [{k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items()}
                for r in records]

    via_pandas = clean(pd.read_parquet(path).astype(object).to_dict("records"))
    via_polars = pl.read_parquet(path).to_dicts()
    con = duckdb.connect()
    cur = con.execute("SELECT * FROM read_parquet(?)", [str(path)])
    names = [d[0] for d in cur.description]
    via_duckdb = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    assert via_pandas == expected
    assert via_polars == expected
    assert via_duckdb == expected
    assert pq.read_schema(path).metadata == table.schema.metadata
    kv = dict(con.execute("SELECT decode(key), decode(value) FROM parquet_kv_metadata(?)",
                          [str(path)]).fetchall())
    assert json.loads(kv["emobench.registry_version"]) == "reg-1"


def test_metadata_holds_provenance(table: pa.Table, runs: list[Path]) -> None:
    meta = read_metadata(table.schema)
    assert meta["schema_version"] == "3"
    assert meta["registry_version"] == "reg-1"
    assert meta["prompt_versions"] == PROMPT_VERSIONS
    assert meta["emobench_version"]
    assert [r["run_id"] for r in meta["source_runs"]] == ["run-a", "run-b"]
    assert meta["forced"] is False and meta["forced_reasons"] == []
    assert meta["bootstrap"] == {"n": 600, "seed": 0, "ci": 0.95, "unit": "case",
                                 "method": "expanded percentile"}
    roles = meta["roles"]["run-a"]
    assert {s["model"] for s in roles["subjects"]} == {"model/strong", "model/weak"}
    for role in (roles["user"], roles["director"], *roles["judges"], *roles["subjects"]):
        assert role["model"] and "temperature" in role["sampling"]
        assert "endpoint" not in role
    assert set(meta["examples"]) == {"strong", "weak", "other"}
    assert len(meta["examples"]["strong"]["path"][0]) == 3
    assert meta["reliability"]["run-a"]["reliability"]["flip_rate"] is not None


def test_build_is_deterministic(runs: list[Path], table: pa.Table) -> None:
    again = build_leaderboard(runs, n_boot=600, seed=0)
    assert again.equals(table, check_metadata=True)
    other = build_leaderboard(runs, n_boot=600, seed=1)
    assert other.column("epmq").equals(table.column("epmq"))
    assert not other.column("epmq_lo").equals(table.column("epmq_lo"))


def test_bradley_terry_null_without_pairwise(table: pa.Table) -> None:
    assert table.column("bt_rating").null_count == table.num_rows


def test_bradley_terry_from_pairwise(tmp_path: Path) -> None:
    pytest.importorskip("emobench.scoring.pairwise")
    run = write_run(tmp_path / "pw", [STRONG, WEAK, OTHER], n_cases=30, pairwise=True)
    t = build_leaderboard([run], n_boot=200)
    overall = _rows(t, "overall")
    assert all(r["bt_rating"] is not None for r in overall)
    assert all(r["bt_rating"] is None for r in t.to_pylist() if r["slice_family"] != "overall")
    bt = {r["subject"]: r["bt_rating"] for r in overall}
    assert bt["strong"] > bt["weak"]
    console = Console(record=True, width=200)
    render_table(t, console)
    assert " BT " in console.export_text()


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"registry_version": "reg-2"}, "registry_version"),
        ({"prompt_versions": {**PROMPT_VERSIONS, "rubric_judge": "3"}}, "rubric_judge"),
    ],
)
def test_merge_refused_unless_forced(
    tmp_path: Path, runs: list[Path], change: dict[str, object], needle: str
) -> None:
    other = write_run(tmp_path / "run-c", [SubjectTruth("c")], n_cases=20, **change)  # type: ignore[arg-type]
    out = tmp_path / "lb"
    res = CliRunner().invoke(_app(), ["leaderboard", "build", str(runs[0]), str(other),
                                      "-o", str(out), "--n-boot", "50"])
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1 and needle in res.stderr and "--force" in res.stderr
    assert not out.exists()
    res = CliRunner().invoke(_app(), ["leaderboard", "build", str(runs[0]), str(other),
                                      "-o", str(out), "--n-boot", "50", "--force", "--no-html"])
    assert res.exit_code == 0, res.output
    meta = read_metadata(read_leaderboard(out).schema)
    assert meta["forced"] is True and needle in meta["forced_reasons"][0]


def test_duplicate_episodes_refused(runs: list[Path], tmp_path: Path) -> None:
    twin = write_run(tmp_path / "twin", [STRONG], n_cases=5, run_id="twin")
    with pytest.raises(InputError, match="duplicate episode"):
        build_leaderboard([runs[0], twin], n_boot=10)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda t: t.drop_columns(["epmq"]), "epmq"),
        (lambda t: t.set_column(t.schema.get_field_index("difficulty"), "difficulty",
                                pa.array(["brutal"] * t.num_rows)), "difficulty"),
    ],
)
def test_bad_scores_name_file_and_field(
    tmp_path: Path, mutate: Callable[[pa.Table], pa.Table], field: str
) -> None:
    run = write_run(tmp_path / "bad", [STRONG], n_cases=5)
    pq.write_table(mutate(pq.read_table(run / "scores.parquet")), run / "scores.parquet")
    res = CliRunner().invoke(_app(), ["leaderboard", "build", str(run), "-o",
                                      str(tmp_path / "o")])
    assert res.exit_code == 2
    assert res.stderr == f"error: {run / 'scores.parquet'}: {field}: " + res.stderr.split(
        f"{field}: ", 1)[1]
    assert res.stderr.count("\n") == 1


def test_cli_build_and_show(runs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "lb"
    res = CliRunner().invoke(_app(), ["leaderboard", "build", *map(str, runs), "-o", str(out),
                                      "--n-boot", "100", "--no-html"])
    assert res.exit_code == 0, res.output
    assert (out / "leaderboard.parquet").exists() and not (out / "index.html").exists()
    res = CliRunner().invoke(_app(), ["leaderboard", "show", str(out), "--family", "category"])
    assert res.exit_code == 0
    assert "Category" in res.stdout and "relations" in res.stdout and "weak" in res.stdout
    res = CliRunner().invoke(_app(), ["leaderboard", "show", str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "file not found" in res.stderr
    (tmp_path / "a-file").write_text("")
    res = CliRunner().invoke(_app(), ["leaderboard", "build", str(runs[1]), "-o",
                                      str(tmp_path / "a-file"), "--n-boot", "10"])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "a-file" in res.stderr


def test_render_table(table: pa.Table) -> None:
    console = Console(record=True, width=160)
    render_table(table, console)
    text = console.export_text()
    lines = [ln for ln in text.splitlines() if ln.strip().startswith(("1 ", "2 ", "3 "))]
    assert [ln.split()[1] for ln in lines] == ["strong", "other", "weak"]
    assert "EPM-Q" in text and "bootstrap by case (600 resamples, seed 0)" in text
    assert "BT" not in text.split("\n")[2]  # no pairwise data: no Bradley-Terry column
    with pytest.raises(InputError):
        render_table(table, console, slice_family="nope")


def test_runs_from_before_the_valence_column_read_as_distress(tmp_path: Path) -> None:
    run = write_run(tmp_path / "old", [STRONG], n_cases=12, seed=5)
    scores = pq.read_table(run / "scores.parquet")
    pq.write_table(scores.drop_columns(["valence"]), run / "scores.parquet")
    table = build_leaderboard([run], n_boot=50)
    rows = _rows(table, "valence")
    assert [(r["slice"], r["n_cases"]) for r in rows] == [("negative", 12)]
    overall = _rows(table, "overall")[0]
    assert rows[0]["epmq"] == pytest.approx(overall["epmq"])
