"""The example pipelines in docs/ci/ run, step by step, against the loopback fake server.

Each YAML file is parsed, its shell steps taken in order and run with bash in a scratch
workspace, with the secrets and variables pointing at the fake server. Only the step that
installs emobench is replaced: it clones from the network, which tests cannot reach, so the
workspace gets what it would leave behind (the checkout at .emobench and `emobench` on PATH).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fake_openai import WORSE_MODEL, FakeOpenAIServer, FakeState, scripted_responder
from tests.gate_support import BASELINE_SUBJECT, gate_config, publish_baseline

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "ci"


@dataclass(frozen=True)
class Step:
    name: str
    script: str
    env: dict[str, str]
    always: bool  # runs after an earlier step failed


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(FakeState(responder=scripted_responder)) as srv:
        yield srv


@pytest.fixture(scope="module")
def baseline(server: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("published")
    return {"bundle": publish_baseline(root, server.base_url),
            "config": gate_config(root / "protocol.yaml", server.base_url)}


def _workspace(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A fresh checkout of the user's repository, and the environment after the install step."""
    ws = tmp / "ws"
    ws.mkdir(parents=True)
    (ws / ".emobench").symlink_to(ROOT)
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "emobench"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m emobench "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMOBENCH_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", HF_HUB_OFFLINE="1")
    return ws, env


def _settings(server: FakeOpenAIServer, baseline: dict[str, Path], model: str) -> dict[str, str]:
    """What a user puts in the CI settings; here every endpoint is the fake server."""
    return {
        "EMOBENCH_SUBJECT_URL": server.base_url,
        "EMOBENCH_USER_URL": server.base_url,
        "EMOBENCH_JUDGE_URL": server.base_url,
        "OPENAI_API_KEY": "sk-test-not-written",
        "EMOBENCH_REPO": "https://example.invalid/emobench.git",
        "EMOBENCH_SUBJECT_MODEL": model,
        "EMOBENCH_USER_MODEL": "fake-model",
        "EMOBENCH_JUDGE_MODEL": "fake-model",
        "EMOBENCH_BASELINE_SUBJECT": BASELINE_SUBJECT,
    }


def _overrides(baseline: dict[str, Path]) -> dict[str, str]:
    # The example's protocol is the full test split; a four-case version keeps the test short.
    return {"EMOBENCH_CONFIG": str(baseline["config"]), "EMOBENCH_BASELINE": str(baseline["bundle"])}


def _is_install(script: str) -> bool:
    return "pip install" in script or "git clone" in script


def _skip(script: str) -> bool:
    return _is_install(script)


def _run_steps(steps: list[Step], ws: Path, env: dict[str, str]) -> list[tuple[str, int]]:
    failed, ran = False, []
    for step in steps:
        if (failed and not step.always) or _skip(step.script):
            continue
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step.script],
                              cwd=ws, env={**env, **step.env}, capture_output=True, text=True,
                              timeout=600)
        ran.append((step.name, proc.returncode))
        assert proc.returncode in (0, 1), f"{step.name}: {proc.stderr[-2000:]}"
        failed = failed or proc.returncode != 0
    return ran


# --- GitHub Actions -------------------------------------------------------------------------

_EXPR = re.compile(r"\$\{\{\s*(\w+)\.(\w+)\s*\}\}")


def _github(doc: dict[str, Any], context: dict[str, dict[str, str]]) -> tuple[list[Step], list[dict[str, Any]]]:
    """The job's shell steps with every ${{ ctx.name }} expanded, and its action steps."""

    def expand(text: str, env: dict[str, str]) -> str:
        return _EXPR.sub(lambda m: {**context, "env": env}[m.group(1)][m.group(2)], str(text))

    (job,) = doc["jobs"].values()
    top = {k: expand(v, {}) for k, v in doc.get("env", {}).items()}
    context["env"] = top
    steps, actions = [], []
    for raw in job["steps"]:
        if "uses" in raw:
            actions.append(raw)
            continue
        env = {**top, **{k: expand(v, top) for k, v in raw.get("env", {}).items()}}
        steps.append(Step(raw["name"], expand(raw["run"], env), env, raw.get("if") == "always()"))
    return steps, actions


def _github_run(server: FakeOpenAIServer, baseline: dict[str, Path], tmp: Path, model: str,
                ws_env: tuple[Path, dict[str, str]] | None = None) -> dict[str, Any]:
    doc = yaml.safe_load((DOCS / "github-actions.yml").read_text())
    ws, env = ws_env or _workspace(tmp)
    settings = _settings(server, baseline, model)
    context = {"secrets": settings, "vars": settings, "github": {"workspace": str(ws), "sha": "abc"}}
    steps, actions = _github(doc, context)
    summary = tmp / "step-summary.md"
    summary.write_text("")
    env = {**env, "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(ws)}
    steps = [Step(s.name, s.script, {**s.env, **_overrides(baseline)}, s.always) for s in steps]
    before = len(server.state.requests)
    ran = _run_steps(steps, ws, env)
    return {"ws": ws, "env": {**env, **steps[0].env}, "ran": dict(ran), "actions": actions, "summary": summary,
            "requests": len(server.state.requests) - before, "steps": steps}


def test_github_actions_example(server: FakeOpenAIServer, baseline: dict[str, Path], tmp_path: Path) -> None:
    first = _github_run(server, baseline, tmp_path / "1", "fake-model")
    assert first["env"]["EMOBENCH_RESPONSE_CACHE"] == str(first["ws"] / ".emobench-cache/responses.sqlite")
    assert sum(_is_install(s.script) for s in first["steps"]) == 1
    assert set(first["ran"].values()) == {0}, first["ran"]
    assert "Gate against the baseline" in first["ran"] and "Job summary" in first["ran"]
    ws: Path = first["ws"]
    assert first["summary"].read_text().startswith("## emobench gate: **PASS**")
    by_name = {a.get("name", a["uses"]): a for a in first["actions"]}
    uploaded = ws / by_name["Upload the run"]["with"]["path"]
    assert by_name["Upload the run"]["if"] == "always()"
    assert {"manifest.json", "scores.parquet", "report.json", "gate-summary.md"} <= {
        p.name for p in uploaded.iterdir()}
    assert (uploaded / "report.html").exists()
    # The response cache lies inside the cached folder, and both cache steps use one key.
    cached = ws / by_name["Restore the response cache"]["with"]["path"]
    assert Path(first["env"]["EMOBENCH_RESPONSE_CACHE"]).parent == cached
    assert (cached / "responses.sqlite").stat().st_size > 0
    assert by_name["Save the response cache"]["with"] == by_name["Restore the response cache"]["with"]
    assert first["requests"] > 0 and "sk-test" not in (uploaded / "manifest.json").read_text()
    # The endpoint (a secret) stays out of the job summary.
    assert server.base_url not in first["summary"].read_text()

    # A rerun of the commit on a fresh checkout, with the cache restored: no model calls.
    ws2, env2 = _workspace(tmp_path / "2")
    (ws2 / ".emobench-cache").mkdir()
    (ws2 / ".emobench-cache" / "responses.sqlite").write_bytes((cached / "responses.sqlite").read_bytes())
    second = _github_run(server, baseline, tmp_path / "2", "fake-model", (ws2, env2))
    assert set(second["ran"].values()) == {0} and second["requests"] == 0


def test_github_actions_example_fails_a_worse_model(
    server: FakeOpenAIServer, baseline: dict[str, Path], tmp_path: Path
) -> None:
    res = _github_run(server, baseline, tmp_path, WORSE_MODEL)
    assert res["ran"]["Gate against the baseline"] == 1
    assert res["ran"]["Job summary"] == 0  # runs after the failure, `if: always()`
    assert "**FAIL**" in res["summary"].read_text()
    assert (res["ws"] / "runs" / "candidate" / "gate-summary.md").exists()


# --- GitLab CI ------------------------------------------------------------------------------

_VAR = re.compile(r"\$\{?(\w+)\}?")


def test_gitlab_ci_example(server: FakeOpenAIServer, baseline: dict[str, Path], tmp_path: Path) -> None:
    doc = yaml.safe_load((DOCS / "gitlab-ci.yml").read_text())
    (job,) = (v for k, v in doc.items() if isinstance(v, dict) and "script" in v)
    ws, env = _workspace(tmp_path)
    predefined = {"CI_PROJECT_DIR": str(ws), "CI_COMMIT_SHA": "abc"}
    # GitLab expands $VARS inside `variables:` values; the shell expands the rest.
    variables = {k: _VAR.sub(lambda m: predefined.get(m.group(1), m.group(0)), str(v))
                 for k, v in job["variables"].items()}
    env = {**env, **predefined, **_settings(server, baseline, "fake-model"), **variables,
           **_overrides(baseline)}
    lines = [*job["before_script"], *job["script"]]
    assert sum(_is_install(line) for line in lines) == 2  # the clone and the pip install
    steps = [Step(f"line {i}", line, {}, False) for i, line in enumerate(lines)]
    ran = _run_steps(steps, ws, env)
    assert [code for _, code in ran] == [0] * len(ran) and len(ran) >= 2
    run_dir = ws / "runs" / "candidate"
    assert (run_dir / "gate-summary.md").read_text().startswith("## emobench gate: **PASS**")
    assert job["artifacts"]["when"] == "always" and job["artifacts"]["paths"] == ["runs/candidate/"]
    assert job["cache"]["when"] == "always"
    cached = ws / job["cache"]["paths"][0]
    assert Path(env["EMOBENCH_RESPONSE_CACHE"]).parent == cached.resolve()
    assert (cached / "responses.sqlite").stat().st_size > 0
