"""The published bundle as the gate's baseline: cases.parquet, several metrics, slices, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from emobench.gate import cli as gate_cli
from emobench.gate.compare import run_gate
from emobench.publish import cli as publish_cli
from emobench.publish.case_scores import CASES_SCHEMA, read_cases
from tests.synthetic_runs import SubjectTruth, write_run

BASE = SubjectTruth("ckpt-100", epmq=60, success=0.5)
OTHER = SubjectTruth("ckpt-050", epmq=50, success=0.3)
SAME = SubjectTruth("ckpt-200", epmq=60, success=0.5)
# Worse only where the persona is defensive or the case challenging.
FRAGILE = SubjectTruth("ckpt-300", epmq=60, success=0.5, fragility=8)


def _app() -> typer.Typer:
    app = typer.Typer()
    app.add_typer(publish_cli.leaderboard_app, name="leaderboard")
    app.command("gate")(gate_cli.gate)
    return app


def _cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(_app(), list(args))
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bundle")
    base = write_run(root / "base", [BASE, OTHER], n_cases=60, seed=1)
    code, _, err = _cli("leaderboard", "build", str(base), "-o", str(root / "published"),
                        "--no-html", "--n-boot", "200")
    assert code == 0, err
    return {
        "base": base,
        "bundle": root / "published",
        "same": write_run(root / "same", [SAME], n_cases=60, seed=2),
        "fragile": write_run(root / "fragile", [FRAGILE], n_cases=60, seed=3),
    }


def test_cases_parquet_schema_and_readers(bundle: dict[str, Path]) -> None:
    file = bundle["bundle"] / "cases.parquet"
    table, meta, _ = read_cases(bundle["bundle"])
    assert table.schema.remove_metadata() == CASES_SCHEMA
    assert table.num_rows == 2 * 60
    prov = meta["subjects"]["ckpt-100"]
    assert prov["registry_version"] == "reg-1" and prov["split"] == "test"
    assert prov["scoring_profile"] == "emobench" and prov["run_ids"] == ["base"]
    assert prov["config_hashes"] == ["cfg-base"] and prov["prompt_versions"]["simulator"] == "3"
    # The per-case means are the means over seeds of the run's episodes.
    scores = pd.read_parquet(bundle["base"] / "scores.parquet")
    expected = scores.groupby(["subject", "case_id"])["epmq"].mean()
    df = pd.read_parquet(file)
    got = df.set_index(["subject", "case_id"])["epmq"]
    np.testing.assert_allclose(got.sort_index(), expected.sort_index())
    assert (df["n_episodes"] == 3).all() and all(list(s) == [0, 1, 2] for s in df["seeds"])
    con = duckdb.connect()
    n, mean = con.execute(
        f"SELECT count(*), avg(success) FROM read_parquet('{file}') WHERE subject = 'ckpt-050'"
    ).fetchone()
    assert n == 60 and mean == pytest.approx(
        scores[scores.subject == "ckpt-050"].groupby("case_id")["success"].mean().mean())
    kv = dict(con.execute("SELECT decode(key), decode(value) FROM parquet_kv_metadata(?)",
                          [str(file)]).fetchall())
    assert json.loads(kv["emobench.subjects"])["ckpt-050"]["split"] == "test"


def test_bundle_gives_the_same_verdict_as_the_run(bundle: dict[str, Path]) -> None:
    from_run = run_gate(bundle["base"], bundle["fragile"], baseline_subject="ckpt-100",
                        n_boot=500).results[0]
    from_bundle = run_gate(bundle["bundle"], bundle["fragile"], baseline_subject="ckpt-100",
                           n_boot=500).results[0]
    assert from_bundle.diff == from_run.diff
    assert from_bundle.baseline.n_episodes == from_run.baseline.n_episodes == 180
    assert from_bundle.baseline.source.endswith("cases.parquet")


def test_metrics_and_slices(bundle: dict[str, Path], tmp_path: Path) -> None:
    summary = tmp_path / "s.md"
    code, out, err = _cli(
        "gate", "--baseline", str(bundle["bundle"]), "--baseline-subject", "ckpt-100",
        "--candidate", str(bundle["fragile"]), "--metric", "epmq", "--metric", "success",
        "--slice", "persona_resilience=defensive", "--slice", "mechanism_stress=A/routine",
        "--tolerance", "epmq=2", "--tolerance", "success=0.1", "--n-boot", "1000",
        "--summary", str(summary),
    )
    assert code == 1, err
    rows = [line for line in out.splitlines() if line.startswith("| ") and "`" in line]
    assert len(rows) == 6  # 3 slices x 2 metrics
    report = run_gate(bundle["bundle"], bundle["fragile"], baseline_subject="ckpt-100",
                      metrics=["epmq", "success"], n_boot=1000, tolerance={"epmq": 2},
                      slices=["overall", "persona_resilience=defensive",
                              "mechanism_stress=A/routine"])
    by = {(r.slice, r.metric): r for r in report.results}
    # Defensive cases lose fragility (+ fragility on challenging ones): a clear regression.
    assert by[("persona_resilience=defensive", "epmq")].regression
    # A-dominant routine cases lose nothing (fragility hits only challenging/defensive ones),
    # except the defensive ones among them.
    routine = by[("mechanism_stress=A/routine", "epmq")]
    assert routine.diff.n < by[("overall", "epmq")].diff.n
    assert not by[("overall", "success")].regression  # success rate is unchanged by construction
    defensive = by[("persona_resilience=defensive", "epmq")]
    cases = pd.read_parquet(bundle["bundle"] / "cases.parquet")
    assert defensive.diff.n == (cases[cases.subject == "ckpt-100"].threshold == "high").sum()
    text = summary.read_text()
    assert "| persona_resilience=defensive | `epmq` |" in text and "FAIL" in text
    assert "to detect 0.1 (" in text and "to detect 2 (" in text


def test_identical_model_passes_against_the_bundle(bundle: dict[str, Path]) -> None:
    code, out, err = _cli("gate", "--baseline", str(bundle["bundle"]), "--baseline-subject",
                          "ckpt-100", "--candidate", str(bundle["same"]), "--metric", "epmq",
                          "--metric", "success", "--n-boot", "1000")
    assert code == 0, err
    assert out.startswith("## emobench gate: **PASS** (2 check(s); `epmq`, `success`)")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"split": "dev"}, "split"),
        ({"registry_version": "reg-2"}, "registry_version"),
        ({"prompt_versions": {"simulator": "9"}}, "prompt_versions"),
        ({"scoring_profile": "empa"}, "scoring_profile"),
    ],
)
def test_mismatched_bundle_is_refused(
    bundle: dict[str, Path], tmp_path: Path, change: dict[str, object], field: str
) -> None:
    kwargs = {k: v for k, v in change.items() if k != "scoring_profile"}
    cand = write_run(tmp_path / "cand", [SAME], n_cases=60, seed=4, **kwargs)  # type: ignore[arg-type]
    if "scoring_profile" in change:
        # As issue-10 runs record it: the config's profile in the manifest.
        man = json.loads((cand / "manifest.json").read_text())
        man["config"] = {"scoring_profile": change["scoring_profile"]}
        (cand / "manifest.json").write_text(json.dumps(man))
    code, out, err = _cli("gate", "--baseline", str(bundle["bundle"]), "--baseline-subject",
                          "ckpt-100", "--candidate", str(cand))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and f": {field}: " in err and "not comparable" in err, err


def test_unusable_bundles_and_options(bundle: dict[str, Path], tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir()
    (old / "leaderboard.parquet").write_bytes((bundle["bundle"] / "leaderboard.parquet").read_bytes())
    cases = [
        (["--baseline", str(old)], "rebuild it with emobench leaderboard build"),
        (["--baseline", str(bundle["bundle"])], "choose one with --baseline-subject"),
        (["--baseline", str(bundle["bundle"]), "--baseline-subject", "nope"], "'nope' not found"),
        (["--baseline", str(bundle["base"]), "--baseline-subject", "ckpt-100",
          "--slice", "persona_resilience=stubborn"], "slice"),
        (["--baseline", str(bundle["base"]), "--baseline-subject", "ckpt-100",
          "--slice", "category=astrology"], "--slice: category=astrology: unknown category 'astrology' (known: "),
        (["--baseline", str(bundle["base"]), "--baseline-subject", "ckpt-100",
          "--tolerance", "vibes=1"], "not a gated metric"),
    ]
    for args, needle in cases:
        code, _, err = _cli("gate", *args, "--candidate", str(bundle["same"]))
        assert code == 2, (args, err)
        assert err.count("\n") == 1 and needle in err, err
