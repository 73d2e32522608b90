"""verl's side of emobench: its dataset rows here, its agent loop inside .venv-verl.

verl cannot share .venv (its transformers pin conflicts with vLLM's CPU build), so the agent-loop
tests in tests/verl_env/ run in their own environment, built by scripts/setup-verl-env.sh (cached
by a stamp, like scripts/setup-env.sh) and called here as a subprocess.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from emobench.env.verl_data import AGENT_NAME, main, write_dataset
from emobench.run.runner import ROOT
from tests.conftest import write_config

VENV = ROOT / ".venv-verl"


def test_dataset_names_one_episode_per_case_and_seed(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "env.yaml", "http://127.0.0.1:9/v1", seeds=[3, 5], cases=["demo4-02"])
    out = tmp_path / "data" / "train.parquet"
    assert write_dataset(cfg, out) == 2
    rows = pd.read_parquet(out)
    assert list(rows["agent_name"]) == [AGENT_NAME] * 2
    assert [(e["case_id"], e["seed"], e["index"]) for e in rows["extra_info"]] == [("demo4-02", 3, 0), ("demo4-02", 5, 1)]
    prompt = list(rows["prompt"][0])
    assert prompt[-1]["role"] == "user" and prompt[-1]["content"].strip()


def test_dataset_command_refuses_a_bad_config_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path / "env.yaml", "http://127.0.0.1:9/v1", cases=["no-such-case"])
    assert main(["--config", str(cfg), "--out", str(tmp_path / "x.parquet")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cases" in err and "no-such-case" in err
    assert not (tmp_path / "x.parquet").exists()


def test_emobench_imports_without_verl() -> None:
    code = "import sys, emobench.env, emobench.env.verl_data; print('verl' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "False"


@pytest.mark.verl
@pytest.mark.timeout(1800)  # a cold build of .venv-verl downloads about 2 GB
def test_agent_loop_passes_inside_verls_own_environment() -> None:
    setup = subprocess.run(["bash", "scripts/setup-verl-env.sh", str(VENV)], cwd=ROOT, capture_output=True, text=True)
    assert setup.returncode == 0, setup.stderr[-2000:]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    run = subprocess.run([str(VENV / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/verl_env"],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=840)
    tail = run.stdout[-3000:]
    assert run.returncode == 0, tail
    summary = re.search(r"(\d+) passed", tail)
    assert summary and int(summary.group(1)) >= 3 and "skipped" not in tail.splitlines()[-1], tail
