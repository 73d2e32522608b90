"""The gate's first run: with `--baseline-missing record`, a missing baseline is recorded, not failed."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from emobench.cli import app
from tests.synthetic_runs import SubjectTruth, write_run

ACCEPTED = SubjectTruth("ckpt-100", epmq=60, success=0.5)
WORSE = SubjectTruth("ckpt-300", epmq=50, success=0.3)


def _gate(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, ["gate", *args])
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("record")
    return {"accepted": write_run(root / "accepted", [ACCEPTED], n_cases=40, seed=1),
            "worse": write_run(root / "worse", [WORSE], n_cases=40, seed=2)}


def test_missing_baseline_is_recorded_then_gated_against(runs: dict[str, Path], tmp_path: Path) -> None:
    baseline, summary = tmp_path / "baseline", tmp_path / "summary.md"
    code, out, err = _gate("--baseline", str(baseline), "--candidate", str(runs["accepted"]),
                           "--baseline-missing", "record", "--summary", str(summary), "--n-boot", "500")
    assert code == 0, err
    assert out.count("\n") == 1 and out.startswith(f"no baseline at {baseline} yet: recorded ")
    assert "(ckpt-100) there as the baseline; nothing to compare, the gate passes" in out
    assert summary.read_text() == out
    cases = pq.read_table(baseline / "cases.parquet")
    assert cases.num_rows == 40 and set(cases.column("subject").to_pylist()) == {"ckpt-100"}
    assert (baseline / "leaderboard.parquet").exists()

    # The recorded bundle is now the baseline: the same run is identical, a worse one fails.
    code, out, _ = _gate("--baseline", str(baseline), "--candidate", str(runs["accepted"]),
                         "--baseline-missing", "record", "--n-boot", "500")
    assert code == 0 and "| +0.000 [+0.000, +0.000] |" in out
    code, out, _ = _gate("--baseline", str(baseline), "--candidate", str(runs["worse"]),
                         "--baseline-missing", "record", "--tolerance", "2", "--n-boot", "500")
    assert code == 1 and out.startswith("## emobench gate: **FAIL**")


def test_an_empty_folder_counts_as_missing(runs: dict[str, Path], tmp_path: Path) -> None:
    """A cache restore that found nothing leaves an empty folder, or none."""
    (tmp_path / "restored").mkdir()
    code, out, _ = _gate("--baseline", str(tmp_path / "restored"), "--candidate", str(runs["worse"]),
                         "--baseline-missing", "record")
    assert code == 0 and "(ckpt-300) there as the baseline" in out
    assert (tmp_path / "restored" / "cases.parquet").exists()


def test_missing_baseline_fails_by_default(runs: dict[str, Path], tmp_path: Path) -> None:
    code, out, err = _gate("--baseline", str(tmp_path / "nothing"), "--candidate", str(runs["accepted"]))
    assert code == 2 and out == "" and err.count("\n") == 1 and "nothing" in err
    assert not (tmp_path / "nothing").exists()


def test_record_does_not_replace_a_baseline_that_is_there(runs: dict[str, Path], tmp_path: Path) -> None:
    """A folder with something else in it is an unusable baseline, never overwritten."""
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("not a bundle")
    code, out, err = _gate("--baseline", str(tmp_path / "other"), "--candidate", str(runs["accepted"]),
                           "--baseline-missing", "record")
    assert code == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == ["notes.txt"]


def test_an_unknown_mode_is_a_usage_error(runs: dict[str, Path], tmp_path: Path) -> None:
    code, _, err = _gate("--baseline", str(tmp_path / "b"), "--candidate", str(runs["accepted"]),
                         "--baseline-missing", "overwrite")
    assert code == 2 and "fail" in err and "record" in err
