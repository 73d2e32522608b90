"""Shared by the gate's end-to-end and CI-example tests: a small protocol and a published baseline.

Runs go through the real CLI in process, against the loopback fake server, so the emotion
tracker loads once per test session.
"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from emobench.cli import app
from tests.conftest import write_config

# Four test-split cases: two defensive personas (high threshold: test4-01, 02) and two receptive
# ones (medium: test4-05, 06), so the example pipelines' `--slice persona_resilience=defensive` has
# cases to pair.
GATE_CASES = ["test4-01", "test4-02", "test4-05", "test4-06"]
BASELINE_SUBJECT = "accepted-model"


def gate_config(path: Path, base_url: str, **extra: object) -> Path:
    return write_config(path, base_url, **{"split": "test", "cases": GATE_CASES, "max_turns": 3,
                                           "min_turns": 2, **extra})


def publish_baseline(root: Path, base_url: str) -> Path:
    """The accepted model's run, published as a bundle: the baseline the pipelines gate against."""
    config = gate_config(root / "baseline.yaml", base_url, subjects=[
        {"binding": f"openai:fake-model@{base_url}", "label": BASELINE_SUBJECT}])
    code, _, err = emobench("run", "--config", str(config), "--out", str(root / "runs"),
                            "--run-id", "accepted", "--no-progress")
    assert code == 0, err
    return publish(root / "runs" / "accepted", root / "published")


def emobench(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


def run(config: Path, out: Path, run_id: str, base_url: str, model: str, *extra: str) -> Path:
    code, _, err = emobench("run", "--config", str(config), "--out", str(out), "--run-id", run_id,
                            "--no-progress", "--subject", f"openai:{model}@{base_url}", *extra)
    assert code == 0, err
    return out / run_id


def publish(run_dir: Path, out: Path) -> Path:
    """`emobench leaderboard build`, as the repository publishes its leaderboard."""
    code, _, err = emobench("leaderboard", "build", str(run_dir), "-o", str(out), "--n-boot", "200")
    assert code == 0, err
    return out
