"""The example pipelines in docs/ci/, run as a user copies them: every shell step as written.

Each YAML file is parsed and its shell steps run with bash in a scratch workspace, in order,
including the install step (into one fresh venv for the module). The user's settings point
every endpoint at the loopback fake server, and the emobench repository variable at a git
clone of this checkout (a file URL); nothing else differs from a user's pipeline. The hosted
parts are stood in for: checkout (an empty workspace), setup-python (the venv on PATH), the
cache (saved by key, restored by key or else the newest key with a restore-keys prefix), the
artifact upload (a copy), and GitLab's job-artifacts API (a loopback server).

Slow by design (full standard protocol, 90 episodes per candidate run): it runs in CI.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from tests.fake_openai import WORSE_MODEL, FakeOpenAIServer, FakeState, scripted_responder
from tests.wheel_support import commit, sources

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "ci"
DEFAULT_BRANCH = "main"
STEP_TIMEOUT_S = 1500
pytestmark = [pytest.mark.timeout(1800), pytest.mark.install]  # a fresh venv, installed by the pipelines' own step

_GATE_LINE = "Gate against the baseline"


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(FakeState(responder=scripted_responder)) as srv:
        yield srv


@pytest.fixture(scope="module")
def repo_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A git repository holding this checkout's files on branch main, as a file URL."""
    repo = tmp_path_factory.mktemp("emobench-repo")
    commit(sources(repo), DEFAULT_BRANCH)
    return repo.as_uri()


@pytest.fixture(scope="module")
def python_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What setup-python leaves: a clean Python on PATH (shared by the module's runs)."""
    venv = tmp_path_factory.mktemp("python") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("EMOBENCH_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    return env


def _settings(server: FakeOpenAIServer, repo_url: str, model: str) -> dict[str, str]:
    """What a user puts in the CI settings; here every endpoint is the fake server."""
    return {
        "EMOBENCH_SUBJECT_URL": server.base_url,
        "EMOBENCH_USER_URL": server.base_url,
        "EMOBENCH_JUDGE_URL": server.base_url,
        "OPENAI_API_KEY": "sk-test-not-written",
        "EMOBENCH_REPO": repo_url,
        "EMOBENCH_SUBJECT_MODEL": model,
        "EMOBENCH_USER_MODEL": "fake-model",
        "EMOBENCH_JUDGE_MODEL": "fake-model",
    }


def _bash(script: str, ws: Path, env: dict[str, str]) -> Outcome:
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=ws,
                          env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
    return Outcome(proc.returncode, proc.stdout, proc.stderr)


def _all_passed(ran: dict[str, Outcome] | list[tuple[str, Outcome]]) -> bool:
    """True when every step exited 0; else fails with the first failing step's own words."""
    items = list(ran.items()) if isinstance(ran, dict) else ran
    failed = [(name, o) for name, o in items if o.code != 0]
    assert not failed, f"{failed[0][0]!r} exited {failed[0][1].code}: {failed[0][1].err[-1500:]}"
    return bool(items)


def _copy(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)


# --- GitHub Actions -------------------------------------------------------------------------

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class GitHub:
    """Runs docs/ci/github-actions.yml's one job on a fresh runner, with caches kept between runs."""

    settings: dict[str, str]
    python_env: dict[str, str]
    caches: dict[str, Path] = field(default_factory=dict)  # key -> saved folder, oldest first
    runs: int = 0

    def run(self, tmp: Path, *, ref_name: str, model: str) -> dict[str, Any]:
        doc = yaml.safe_load((DOCS / "github-actions.yml").read_text())
        (job,) = doc["jobs"].values()
        self.runs += 1
        ws = tmp / "ws"
        ws.mkdir(parents=True)  # actions/checkout: the user's repository
        summary = tmp / "step-summary.md"
        summary.write_text("")
        sha = hashlib.sha1(f"{tmp}{self.runs}".encode()).hexdigest()
        secret = {k: v for k, v in self.settings.items() if k.endswith(("_URL", "_KEY"))}
        context: dict[str, Any] = {
            "secrets": secret,
            "vars": {k: v for k, v in self.settings.items() if k not in secret},
            "github": {"workspace": str(ws), "sha": sha, "ref_name": ref_name,
                       "event": {"repository": {"default_branch": DEFAULT_BRANCH}}},
        }
        top = {k: _expand(str(v), context) for k, v in doc["env"].items()}
        context["env"] = top
        env = {**self.python_env, **top, "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(ws),
               "GITHUB_SHA": sha, "CI": "true"}
        failed, ran, uploads = False, {}, {}
        for step in job["steps"]:
            name = step.get("name", step.get("uses"))
            if not _should_run(step.get("if"), failed, context):
                continue
            if "uses" in step:
                uploads.update(self._action(step, ws, context))
                continue
            step_env = {**env, **{k: _expand(str(v), context) for k, v in step.get("env", {}).items()}}
            ran[name] = outcome = _bash(_expand(step["run"], context), ws, step_env)
            failed = failed or outcome.code != 0
        return {"ws": ws, "ran": ran, "summary": summary.read_text(), "uploads": uploads, "env": env}

    def _action(self, step: dict[str, Any], ws: Path, context: dict[str, Any]) -> dict[str, Path]:
        uses, args = step["uses"], {k: _expand(str(v), context) for k, v in step.get("with", {}).items()}
        if uses.startswith(("actions/checkout@", "actions/setup-python@")):
            return {}  # done before the first step: the workspace, and python_env's PATH
        if uses.startswith("actions/cache/restore@"):
            prefixes = args.get("restore-keys", "").split()
            hit = args["key"] if args["key"] in self.caches else next(
                (k for k in reversed(self.caches) if any(k.startswith(p) for p in prefixes)), None)
            if hit is not None:
                _copy(self.caches[hit], ws / args["path"])
            return {}
        if uses.startswith("actions/cache/save@"):
            if args["key"] not in self.caches and (ws / args["path"]).exists():  # cache entries never change
                self.caches[args["key"]] = ws.parent / f"saved-{args['key']}"
                _copy(ws / args["path"], self.caches[args["key"]])
            return {}
        if uses.startswith("actions/upload-artifact@"):
            return {args["name"]: ws / args["path"]}
        raise AssertionError(f"no stand-in for {uses}")


def _lookup(path: str, context: dict[str, Any]) -> Any:
    value: Any = context
    for part in path.split("."):
        value = value[part]
    return value


def _expand(text: str, context: dict[str, Any]) -> str:
    return _EXPR.sub(lambda m: str(_lookup(m.group(1), context)), text)


def _should_run(condition: str | None, failed: bool, context: dict[str, Any]) -> bool:
    """`if:` as GitHub reads it: always(), or a comparison that also needs every step before to pass."""
    if condition == "always()":
        return True
    if failed:
        return False
    if condition is None:
        return True
    left, op, right = condition.partition(" == ")
    assert op, f"no stand-in for the condition {condition!r}"
    return bool(_lookup(left.strip(), context) == _lookup(right.strip(), context))


@pytest.fixture(scope="module")
def github(server: FakeOpenAIServer, repo_url: str, python_env: dict[str, str],
           tmp_path_factory: pytest.TempPathFactory) -> tuple[GitHub, dict[str, Any]]:
    """The first run on the default branch: no baseline yet."""
    runner = GitHub(_settings(server, repo_url, "fake-model"), python_env)
    first = runner.run(tmp_path_factory.mktemp("gh-first"), ref_name=DEFAULT_BRANCH, model="fake-model")
    return runner, first


def test_github_first_run_records_the_baseline(github: tuple[GitHub, dict[str, Any]]) -> None:
    runner, first = github
    assert _all_passed(first["ran"])
    gate = first["ran"][_GATE_LINE]
    assert gate.out.count("\n") == 1 and gate.out.startswith("no baseline at .emobench-baseline yet: recorded ")
    assert first["summary"] == gate.out  # the job summary says so too
    assert "Accept the candidate as the baseline" in first["ran"]
    (baseline_key,) = (k for k in runner.caches if k.startswith("emobench-baseline-"))
    assert (runner.caches[baseline_key] / "cases.parquet").exists()
    uploaded = first["uploads"]["emobench-candidate"]
    assert {"manifest.json", "scores.parquet", "report.json", "report.html", "gate-summary.md"} <= {
        p.name for p in uploaded.iterdir()}
    assert "sk-test" not in (uploaded / "manifest.json").read_text()
    cache = Path(first["env"]["EMOBENCH_RESPONSE_CACHE"])
    assert cache.is_file() and cache.parent == first["ws"] / ".emobench-cache"


def test_github_unchanged_model_passes(github: tuple[GitHub, dict[str, Any]], server: FakeOpenAIServer,
                                       tmp_path: Path) -> None:
    """A pull request with the accepted model: answered from the restored response cache, and equal."""
    runner, _ = github
    before = len(server.state.requests)
    res = runner.run(tmp_path, ref_name="7/merge", model="fake-model")
    assert _all_passed(res["ran"])
    assert len(server.state.requests) == before  # every model call came from the response cache
    assert res["summary"].startswith("## emobench gate: **PASS**")
    assert "| overall | `epmq` |" in res["summary"] and "| +0.000 [+0.000, +0.000] |" in res["summary"]
    assert "Accept the candidate as the baseline" not in res["ran"]  # a pull request never replaces it
    assert server.base_url not in res["summary"]  # the endpoint (a secret) stays out of the summary


def test_github_worse_model_fails(github: tuple[GitHub, dict[str, Any]], server: FakeOpenAIServer,
                                  tmp_path: Path) -> None:
    runner, _ = github
    worse = GitHub({**runner.settings, "EMOBENCH_SUBJECT_MODEL": WORSE_MODEL}, runner.python_env,
                   dict(runner.caches))
    res = worse.run(tmp_path, ref_name="8/merge", model=WORSE_MODEL)
    assert res["ran"][_GATE_LINE].code == 1
    assert "Run report page" in res["ran"] and res["ran"]["Job summary"].code == 0  # `if: always()`
    assert res["summary"].startswith("## emobench gate: **FAIL**")
    epmq = next(line for line in res["summary"].splitlines() if line.startswith("| overall | `epmq`"))
    assert "**FAIL**" in epmq
    assert (res["uploads"]["emobench-candidate"] / "gate-summary.md").exists()


def test_github_refused_comparison_says_why(github: tuple[GitHub, dict[str, Any]], demo_bundle: Path,
                                            tmp_path: Path) -> None:
    """The newest saved baseline was run on another split: refused, in one line, exit 2."""
    runner, _ = github
    caches = {**runner.caches, "emobench-baseline-other-protocol": demo_bundle}
    res = GitHub(runner.settings, runner.python_env, caches).run(tmp_path, ref_name="9/merge", model="fake-model")
    gate = res["ran"][_GATE_LINE]
    assert gate.code == 2 and gate.out == "" and gate.err.count("\n") == 1
    assert "split: 'test' differs from the baseline's 'demo'; scores are not comparable" in gate.err


@pytest.fixture(scope="module")
def demo_bundle(server: FakeOpenAIServer, python_env: dict[str, str], github: tuple[GitHub, dict[str, Any]],
                tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle published from a run of another protocol (the demo split), with the installed CLI."""
    ws = tmp_path_factory.mktemp("demo-protocol")
    url = server.base_url
    script = (f'emobench run --config "{github[1]["ws"]}/.emobench/configs/demo.yaml" --out runs --run-id demo '
              f"--no-progress --subject openai:fake-model@{url} --user openai:fake-model@{url} "
              f"--judge openai:fake-model@{url} && emobench leaderboard build runs/demo -o bundle --no-html")
    done = _bash(script, ws, {**python_env, "OPENAI_API_KEY": "sk-test"})
    assert done.code == 0, done.err
    return ws / "bundle"


# --- GitLab CI ------------------------------------------------------------------------------

_VAR = re.compile(r"\$\{?(\w+)\}?")
JOB_TOKEN = "job-token-for-tests"


class ArtifactsAPI:
    """GitLab's job-artifacts API on loopback: the latest successful job's artifacts per (ref, job)."""

    def __init__(self) -> None:
        self.latest: dict[tuple[str, str], bytes] = {}
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                url = urlparse(self.path)
                found = re.fullmatch(r"/api/v4/projects/42/jobs/artifacts/([^/]+)/download", url.path)
                job = parse_qs(url.query).get("job", [""])[0]
                body = api.latest.get((found.group(1), job)) if found else None
                ok = self.headers.get("JOB-TOKEN") == JOB_TOKEN
                self.send_response(200 if ok and body else 401 if not ok else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/api/v4"
        Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass
class GitLab:
    """Runs docs/ci/gitlab-ci.yml's job on a fresh runner, keeping its cache and artifacts."""

    settings: dict[str, str]
    python_env: dict[str, str]
    api: ArtifactsAPI
    caches: dict[str, Path] = field(default_factory=dict)
    runs: int = 0

    def run(self, tmp: Path, *, branch: str) -> dict[str, Any]:
        doc = yaml.safe_load((DOCS / "gitlab-ci.yml").read_text())
        (name, job), = ((k, v) for k, v in doc.items() if isinstance(v, dict) and "script" in v)
        self.runs += 1
        ws = tmp / "ws"
        ws.mkdir(parents=True)
        predefined = {"CI_PROJECT_DIR": str(ws), "CI_COMMIT_SHA": hashlib.sha1(f"{tmp}{self.runs}".encode()).hexdigest(),
                      "CI_COMMIT_BRANCH": branch, "CI_DEFAULT_BRANCH": DEFAULT_BRANCH, "CI_JOB_NAME": name,
                      "CI_JOB_TOKEN": JOB_TOKEN, "CI_API_V4_URL": self.api.url, "CI_PROJECT_ID": "42", "CI": "true"}
        # GitLab expands $VARS inside `variables:` values; the shell expands the rest.
        variables = {k: _VAR.sub(lambda m: predefined.get(m.group(1), m.group(0)), str(v))
                     for k, v in job["variables"].items()}
        env = {**self.python_env, **predefined, **self.settings, **variables}
        key = job["cache"]["key"]
        if key in self.caches:
            for path in job["cache"]["paths"]:
                _copy(self.caches[key] / path, ws / path)
        ran: list[tuple[str, Outcome]] = []
        for line in [*job["before_script"], *job["script"]]:
            ran.append((line, _bash(line, ws, env)))
            if ran[-1][1].code != 0:
                break
        assert job["cache"]["when"] == "always"
        self.caches[key] = saved = tmp / "cache"
        for path in job["cache"]["paths"]:
            if (ws / path).exists():
                _copy(ws / path, saved / path)
        assert job["artifacts"]["when"] == "always"
        artifacts = tmp / "artifacts.zip"
        with zipfile.ZipFile(artifacts, "w") as zf:
            for path in job["artifacts"]["paths"]:
                for file in sorted((ws / path).rglob("*")) if (ws / path).exists() else []:
                    zf.write(file, file.relative_to(ws).as_posix())
        if ran[-1][1].code == 0:
            self.api.latest[(branch, name)] = artifacts.read_bytes()
        return {"ws": ws, "ran": ran, "env": env, "artifacts": artifacts}


@pytest.fixture(scope="module")
def gitlab(server: FakeOpenAIServer, repo_url: str, python_env: dict[str, str],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GitLab, dict[str, Any]]]:
    """The first pipeline on the default branch: no baseline yet."""
    api = ArtifactsAPI()
    runner = GitLab(_settings(server, repo_url, "fake-model"), python_env, api)
    yield runner, runner.run(tmp_path_factory.mktemp("gl-first"), branch=DEFAULT_BRANCH)
    api.close()


def _gate(ran: list[tuple[str, Outcome]]) -> Outcome:
    return next(outcome for line, outcome in ran if line.startswith("emobench gate "))


def test_gitlab_first_run_records_and_publishes_the_baseline(gitlab: tuple[GitLab, dict[str, Any]]) -> None:
    runner, first = gitlab
    assert _all_passed(first["ran"])
    assert "no baseline published on main yet" in first["ran"][3][1].out
    gate = _gate(first["ran"])
    assert gate.out.count("\n") == 1
    assert gate.out.startswith("no baseline at default-branch/emobench-baseline yet: recorded ")
    with zipfile.ZipFile(first["artifacts"]) as zf:
        names = set(zf.namelist())
    assert {"emobench-baseline/cases.parquet", "runs/candidate/gate-summary.md",
            "runs/candidate/report.html"} <= names
    assert Path(first["env"]["EMOBENCH_RESPONSE_CACHE"]).is_file()
    assert (DEFAULT_BRANCH, "emobench-gate") in runner.api.latest  # what later pipelines download


def test_gitlab_unchanged_model_passes(gitlab: tuple[GitLab, dict[str, Any]], server: FakeOpenAIServer,
                                       tmp_path: Path) -> None:
    runner, _ = gitlab
    before = len(server.state.requests)
    res = runner.run(tmp_path, branch="feature")
    assert _all_passed(res["ran"])
    assert len(server.state.requests) == before
    assert _gate(res["ran"]).out.startswith("## emobench gate: **PASS**")
    with zipfile.ZipFile(res["artifacts"]) as zf:  # a branch publishes no baseline
        assert not any(n.startswith("emobench-baseline/") for n in zf.namelist())


def test_gitlab_worse_model_fails(gitlab: tuple[GitLab, dict[str, Any]], tmp_path: Path) -> None:
    runner, _ = gitlab
    worse = GitLab({**runner.settings, "EMOBENCH_SUBJECT_MODEL": WORSE_MODEL}, runner.python_env, runner.api,
                   dict(runner.caches))
    res = worse.run(tmp_path, branch="feature-worse")
    gate = _gate(res["ran"])
    assert gate.code == 1 and gate.out.startswith("## emobench gate: **FAIL**")
    assert res["ran"][-1][1] is gate  # the job stops at the failing gate
    assert (res["ws"] / "runs" / "candidate" / "gate-summary.md").exists()


def test_gitlab_refused_comparison_says_why(gitlab: tuple[GitLab, dict[str, Any]], demo_bundle: Path,
                                           tmp_path: Path) -> None:
    """The default branch's last baseline was run on another split: refused, in one line, exit 2."""
    runner, _ = gitlab
    api = ArtifactsAPI()
    try:
        other = tmp_path / "other.zip"
        with zipfile.ZipFile(other, "w") as zf:
            for file in sorted(demo_bundle.rglob("*")):
                zf.write(file, f"emobench-baseline/{file.relative_to(demo_bundle).as_posix()}")
        api.latest[(DEFAULT_BRANCH, "emobench-gate")] = other.read_bytes()
        res = GitLab(runner.settings, runner.python_env, api, dict(runner.caches)).run(tmp_path, branch="feature")
    finally:
        api.close()
    gate = _gate(res["ran"])
    assert gate.code == 2 and gate.out == "" and gate.err.count("\n") == 1
    assert "split: 'test' differs from the baseline's 'demo'; scores are not comparable" in gate.err
