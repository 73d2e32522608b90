"""The regression gate: known groups, false-alarm rate, unusable input, the markdown summary."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from emobench.errors import InputError
from emobench.gate import cli as gate_cli
from emobench.gate.compare import is_regression, run_gate
from emobench.publish import cli as publish_cli
from emobench.scoring.stats import bootstrap_case_means
from tests.synthetic_runs import SubjectTruth, write_run

BASE = SubjectTruth("ckpt-100", epmq=60, success=0.5)
SAME = SubjectTruth("ckpt-200", epmq=60, success=0.5)  # identical truth, fresh noise
WORSE = SubjectTruth("ckpt-300", epmq=56, success=0.4)  # lower per-case means by construction


def _app() -> typer.Typer:
    app = typer.Typer()
    app.add_typer(publish_cli.leaderboard_app, name="leaderboard")
    app.command("gate")(gate_cli.gate)
    return app


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gate")
    return {
        "base": write_run(root / "base", [BASE], n_cases=80, seed=10),
        "same": write_run(root / "same", [SAME], n_cases=80, seed=11),
        "worse": write_run(root / "worse", [WORSE], n_cases=80, seed=12),
    }


def _gate(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(_app(), ["gate", *args])
    return res.exit_code, res.stdout, res.stderr


def test_worse_candidate_fails(runs: dict[str, Path], tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    code, out, _ = _gate("--baseline", str(runs["base"]), "--candidate", str(runs["worse"]),
                         "--tolerance", "1", "--summary", str(summary), "--n-boot", "2000")
    assert code == 1
    text = summary.read_text()
    assert text == out
    assert text.startswith("## emobench gate: **FAIL** (1 of 1 check(s) regressed; `epmq`)")
    assert "larger than the tolerance 1" in text
    assert "| overall | `epmq` |" in text and "| 80 |" in text
    assert "to detect 1 (" in text


def test_worse_candidate_within_tolerance_passes(runs: dict[str, Path]) -> None:
    code, out, _ = _gate("--baseline", str(runs["base"]), "--candidate", str(runs["worse"]),
                         "--tolerance", "10", "--n-boot", "2000")
    assert code == 0 and "within the tolerance 10" in out


def test_identical_candidate_passes(runs: dict[str, Path]) -> None:
    code, out, _ = _gate("--baseline", str(runs["base"]), "--candidate", str(runs["same"]),
                         "--detect", "2", "--n-boot", "2000")
    assert code == 0
    assert "**PASS**" in out and "to detect 2 (" in out


def test_gate_result_numbers(runs: dict[str, Path]) -> None:
    r = run_gate(runs["base"], runs["worse"], n_boot=2000, tolerance={"epmq": 1.0}).results[0]
    assert r.diff.n == 80 and r.baseline.n_episodes == 240
    assert r.diff.lo < r.diff.mean < r.diff.hi < 0
    assert r.diff.mean == pytest.approx(r.candidate.mean - r.baseline.mean)
    assert abs(r.diff.mean - (-4.0)) < 3 * (r.diff.hi - r.diff.lo) / 4
    assert r.needed_cases is not None and r.needed_cases > 80
    success = run_gate(runs["base"], runs["worse"], metrics=["success"], n_boot=500).results[0]
    rate = {k: pd.read_parquet(runs[k] / "scores.parquet").groupby("case_id")["success"].mean() for k in ("base", "worse")}
    assert success.diff.n == 80 and success.diff.mean == pytest.approx((rate["worse"] - rate["base"]).mean(), abs=1e-12)


def test_identical_subjects_false_alarm_rate() -> None:
    """Over 1,000 seeded repetitions of identical baseline and candidate, the gate fails about
    2.5% of the time: one tail of a two-sided 95% interval (tolerance 0)."""
    rng = np.random.default_rng(7)
    reps, cases, seeds = 1000, 60, 3
    case_mean = 60 + rng.normal(0, 8, (cases, reps))  # shared by both: pairing removes it
    base = (case_mean[..., None] + rng.normal(0, 6, (cases, reps, seeds))).mean(axis=2)
    cand = (case_mean[..., None] + rng.normal(0, 6, (cases, reps, seeds))).mean(axis=2)
    est = bootstrap_case_means(cand - base, [np.zeros(cases, dtype=np.intp)], n_boot=1000,
                               seed=3)[0]
    rate = float(is_regression(est.point[0], est.hi[0], 0.0).mean())
    assert 0.01 <= rate <= 0.045, rate
    # And the two-sided error rate is the nominal 5%.
    outside = float(((est.hi[0] < 0) | (est.lo[0] > 0)).mean())
    assert 0.035 <= outside <= 0.065, outside


@pytest.mark.parametrize("seed", range(6))
def test_identical_runs_pass_end_to_end(tmp_path: Path, seed: int) -> None:
    base = write_run(tmp_path / "b", [BASE], n_cases=40, seed=100 + seed, report=False)
    cand = write_run(tmp_path / "c", [SAME], n_cases=40, seed=200 + seed, report=False)
    assert run_gate(base, cand, n_boot=1000).exit_code == 0


def test_unusable_input_exits_2(runs: dict[str, Path], tmp_path: Path) -> None:
    other_reg = write_run(tmp_path / "reg", [WORSE], n_cases=20, registry_version="reg-9")
    disjoint = write_run(tmp_path / "disjoint", [WORSE], n_cases=20, case_prefix="other")
    prompts = write_run(tmp_path / "prompts", [WORSE], n_cases=20,
                        prompt_versions={"simulator": "9"})
    (tmp_path / "empty").mkdir()
    cases = [
        (other_reg, "registry_version"),
        (disjoint, "0 case(s) with epmq in slice 'overall' overlap"),
        (prompts, "prompt_versions"),
        (tmp_path / "missing", "run directory not found"),
        (tmp_path / "empty", "manifest.json: file not found"),
    ]
    for cand, needle in cases:
        code, _, err = _gate("--baseline", str(runs["base"]), "--candidate", str(cand))
        assert code == 2, (cand, err)
        assert err.count("\n") == 1 and needle in err, err
    code, _, err = _gate("--baseline", str(runs["base"]), "--candidate", str(runs["same"]),
                         "--metric", "vibes")
    assert code == 2 and "metric" in err


def test_multi_subject_run_needs_a_subject(runs: dict[str, Path], tmp_path: Path) -> None:
    both = write_run(tmp_path / "both", [SAME, WORSE], n_cases=30)
    with pytest.raises(InputError, match="--candidate-subject"):
        run_gate(runs["base"], both, n_boot=100)
    r = run_gate(runs["base"], both, candidate_subject="ckpt-300", n_boot=100).results[0]
    assert r.candidate.subject == "ckpt-300" and r.diff.n == 30


def test_a_run_with_a_reference_subject_gates_its_model(runs: dict[str, Path], tmp_path: Path) -> None:
    """A config's scripted reference (standard.yaml's `references:`) plays beside the model; the
    gate needs no --candidate-subject to find the model, but still names a second model."""
    with_reference = write_run(tmp_path / "ref", [WORSE, SubjectTruth("scripted:platitude", epmq=20, success=0.1)],
                               n_cases=30)
    r = run_gate(runs["base"], with_reference, n_boot=100).results[0]
    assert r.candidate.subject == "ckpt-300" and r.diff.n == 30
    two = write_run(tmp_path / "two", [SAME, WORSE, SubjectTruth("scripted:platitude", epmq=20, success=0.1)],
                    n_cases=30)
    with pytest.raises(InputError, match="--candidate-subject"):
        run_gate(runs["base"], two, n_boot=100)
