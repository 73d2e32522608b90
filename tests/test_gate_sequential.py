"""`emobench gate --sequential` (docs/adaptive.md) against the fake server: the candidate plays
the baseline's cases in the gate's order and the gate stops as soon as its verdict is certain,
or plays every case and decides as without --sequential. Exit codes as the plain gate's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from emobench.config import RoleConfig
from emobench.errors import InputError
from emobench.gate.sequential import candidate_subject
from emobench.run.adaptive import cell_order
from emobench.rundir import RunDir
from tests.conftest import write_config
from tests.fake_openai import WORSE_MODEL, FakeOpenAIServer, FakeState, scripted_responder
from tests.gate_support import emobench

CASES = [f"test4-{i:02d}" for i in range(1, 7)]
SEEDS = [0, 1]  # the candidate's; the baselines play seed 0 alone
CELLS = [(case, seed) for case in CASES for seed in SEEDS]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(FakeState(responder=scripted_responder)) as srv:
        yield srv


def _config(path: Path, base_url: str, model: str, seeds: list[int] = SEEDS) -> Path:
    return write_config(path, base_url, split="test", cases=CASES, max_turns=1, min_turns=1, seeds=seeds,
                        subjects=[{"binding": f"openai:{model}@{base_url}", "label": model}])


@pytest.fixture(scope="module")
def bundles(server: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The accepted model's published bundle, and a worse model's run (to gate a better candidate against)."""
    root = tmp_path_factory.mktemp("baselines")
    for model in ("fake-model", WORSE_MODEL):
        code, _, err = emobench("run", "--config", str(_config(root / f"{model}.yaml", server.base_url, model, [0])),
                                "--out", str(root / "runs"), "--run-id", model, "--no-progress")
        assert code == 0, err
    code, _, err = emobench("leaderboard", "build", str(root / "runs" / "fake-model"), "-o", str(root / "bundle"),
                            "--n-boot", "50", "--no-html")
    assert code == 0, err
    return {"fake-model": root / "bundle", WORSE_MODEL: root / "runs" / WORSE_MODEL}


def _gate(bundle: Path, candidate: Path, config: Path, *extra: str) -> tuple[int, str, str]:
    return emobench("gate", "--sequential", "--baseline", str(bundle), "--candidate", str(candidate),
                    "--play", str(config), "--tolerance", "2", "--wave", "1", "--n-boot", "200", *extra)


def test_a_certain_regression_fails_before_every_case_is_played(
    server: FakeOpenAIServer, bundles: dict[str, Path], tmp_path: Path
) -> None:
    # The protocol's config, with the candidate bound on the command line as CI pipelines bind it.
    cfg = _config(tmp_path / "c.yaml", server.base_url, "fake-model")
    code, out, err = _gate(bundles["fake-model"], tmp_path / "cand", cfg, "--summary", str(tmp_path / "s.md"),
                           "--subject", f"openai:{WORSE_MODEL}@{server.base_url}")
    assert code == 1, err + out
    rd = RunDir(tmp_path / "cand")
    block = rd.read_manifest()["adaptive"]
    played = block["cells_played"]
    assert block["mode"] == "gate" and block["decision"] == "fail" and block["stopped"] and played < len(CELLS)
    assert block["difference"]["upper"] < -2  # the whole sequence below -tolerance
    # The candidate's (case, seed) episodes in the gate's order (its --seed, 0), and nothing past the stop.
    assert {(e.case_id, e.seed) for e in rd.read_episodes()} == set(cell_order(CELLS, 0)[:played])
    assert f"**FAIL** (sequential: stopped after {played} of {len(CELLS)} episodes" in out
    assert (tmp_path / "s.md").read_text() == out and rd.read_report()["adaptive"] == block


def test_a_certainly_better_candidate_passes_early(
    server: FakeOpenAIServer, bundles: dict[str, Path], tmp_path: Path
) -> None:
    cfg = _config(tmp_path / "c.yaml", server.base_url, "fake-model")
    code, out, err = _gate(bundles[WORSE_MODEL], tmp_path / "cand", cfg)
    assert code == 0, err + out
    block = RunDir(tmp_path / "cand").read_manifest()["adaptive"]
    assert block["decision"] == "pass" and block["stopped"] and block["difference"]["lower"] > -2
    assert f"**PASS** (sequential: stopped after {block['cells_played']} of {len(CELLS)} episodes" in out


def test_an_unchanged_model_plays_every_case_and_decides_as_today(
    server: FakeOpenAIServer, bundles: dict[str, Path], tmp_path: Path
) -> None:
    cfg = _config(tmp_path / "c.yaml", server.base_url, "fake-model")
    code, out, err = _gate(bundles["fake-model"], tmp_path / "cand", cfg)
    assert code == 0, err + out
    block = RunDir(tmp_path / "cand").read_manifest()["adaptive"]
    assert block["decision"] is None and not block["stopped"] and block["cells_played"] == len(CELLS)
    assert "| +0.000 [+0.000, +0.000] |" in out  # the bootstrap table, as without --sequential
    assert f"the candidate played all {len(CELLS)} of its episodes of the baseline's cases" in out
    # Resumed, the finished run plays nothing more and gives the same verdict.
    again = _gate(bundles["fake-model"], tmp_path / "cand", cfg)
    assert again[0] == 0 and len(RunDir(tmp_path / "cand").read_episodes()) == len(CELLS)


@pytest.mark.parametrize(("extra", "needle"), [
    (("--metric", "success"), "--sequential: gates epmq on the overall slice only, not success"),
    (("--slice", "difficulty=hard"), "not difficulty=hard"),
])
def test_what_the_sequential_gate_cannot_stop_on_is_refused(
    extra: tuple[str, ...], needle: str, bundles: dict[str, Path], tmp_path: Path
) -> None:
    code, out, err = _gate(bundles["fake-model"], tmp_path / "cand", tmp_path / "absent.yaml", *extra)
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err, err


def test_without_a_run_or_a_config_to_play_it_is_refused(bundles: dict[str, Path], tmp_path: Path) -> None:
    code, _, err = emobench("gate", "--sequential", "--baseline", str(bundles["fake-model"]),
                              "--candidate", str(tmp_path / "cand"))
    assert code == 2 and err.count("\n") == 1 and "give --play CONFIG" in err, err
    code, _, err = emobench("gate", "--baseline", str(bundles["fake-model"]), "--candidate", str(tmp_path),
                              "--play", "x.yaml")
    assert code == 2 and err.count("\n") == 1 and "--play: plays the candidate only with --sequential" in err, err
    code, _, err = emobench("gate", "--sequential", "--baseline", str(bundles["fake-model"]), "--candidate",
                            str(tmp_path), "--subject", "openai:m@http://127.0.0.1:9/v1")
    assert code == 2 and err.count("\n") == 1 and "--subject: binds a role of the run --play starts" in err, err


@pytest.mark.parametrize(("subjects", "gated"), [
    ([{"binding": "scripted:echo"}], "scripted:echo"),  # a one-subject run gates its subject, scripted or not
    ([{"binding": "openai:m@http://127.0.0.1:9/v1", "label": "m"}, {"binding": "scripted:platitude"}], "m"),
    # A reference with a label of its own is still a reference: told by its binding.
    ([{"binding": "openai:m@http://127.0.0.1:9/v1", "label": "m"}, {"binding": "scripted:platitude", "label": "flat"}], "m"),
])
def test_the_candidate_subject_needs_no_flag_when_the_run_has_one(subjects: list[dict[str, str]], gated: str) -> None:
    assert candidate_subject([RoleConfig.model_validate(s) for s in subjects], None, Path("c.yaml")) == gated


def test_two_model_subjects_need_the_flag() -> None:
    roles = [RoleConfig(binding="openai:a@http://127.0.0.1:9/v1"), RoleConfig(binding="openai:b@http://127.0.0.1:9/v1")]
    with pytest.raises(InputError, match="choose one with --candidate-subject"):
        candidate_subject(roles, None, Path("c.yaml"))
