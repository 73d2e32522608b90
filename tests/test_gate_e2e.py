"""End to end: candidate runs against the fake server, gated against a published bundle.

Exit 0 for the accepted model itself, 1 for a model made worse by construction (dismissive
replies, judged so), 2 for a bundle of another split. And the repository's own published bundle
in leaderboard/ must load as a baseline that matches the current case library and prompts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from emobench.config import load_config_data, validate_config
from emobench.gate.baseline import load_side
from emobench.registry import load_registry
from emobench.run.runner import ROOT, load_prompts, manifest
from tests.fake_openai import WORSE_MODEL, FakeOpenAIServer, FakeState, scripted_responder
from tests.gate_support import BASELINE_SUBJECT, GATE_CASES, emobench, gate_config, publish_baseline, run


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(FakeState(responder=scripted_responder)) as srv:
        yield srv


@pytest.fixture(scope="module")
def published(server: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return publish_baseline(tmp_path_factory.mktemp("published"), server.base_url)


def _gate(bundle: Path, candidate: Path, summary: Path) -> tuple[int, str, str]:
    return emobench("gate", "--baseline", str(bundle), "--baseline-subject", BASELINE_SUBJECT,
                    "--candidate", str(candidate), "--metric", "epmq", "--metric", "success",
                    "--tolerance", "epmq=2", "--tolerance", "success=0.05",
                    "--summary", str(summary))


def test_identical_model_passes(server: FakeOpenAIServer, published: Path, tmp_path: Path) -> None:
    cand = run(gate_config(tmp_path / "c.yaml", server.base_url), tmp_path, "same",
               server.base_url, "fake-model")
    code, out, err = _gate(published, cand, tmp_path / "s.md")
    assert code == 0, err + out
    assert "**PASS**" in out and "| overall | `epmq` |" in out and "| +0.000 [+0.000, +0.000] |" in out


def test_worse_model_fails(server: FakeOpenAIServer, published: Path, tmp_path: Path) -> None:
    cand = run(gate_config(tmp_path / "c.yaml", server.base_url), tmp_path, "worse",
               server.base_url, WORSE_MODEL)
    code, out, err = _gate(published, cand, tmp_path / "s.md")
    assert code == 1, err + out
    assert (tmp_path / "s.md").read_text() == out
    epmq = next(line for line in out.splitlines() if line.startswith("| overall | `epmq`"))
    assert "**FAIL**" in epmq


def test_mismatched_bundle_is_refused(
    server: FakeOpenAIServer, published: Path, tmp_path: Path
) -> None:
    """A candidate on the demo split cannot be gated against a test-split bundle."""
    cand = run(gate_config(tmp_path / "c.yaml", server.base_url, cases=None), tmp_path, "demo",
               server.base_url, "fake-model", "--split", "demo")
    code, out, err = _gate(published, cand, tmp_path / "s.md")
    assert code == 2 and out == "" and not (tmp_path / "s.md").exists()
    assert err.count("\n") == 1 and ": split: 'demo' differs from the baseline's 'test'" in err


def test_another_edition_is_refused(server: FakeOpenAIServer, published: Path, tmp_path: Path) -> None:
    """The same four slots of the third edition (archived as test-v3) against an edition-4 bundle:
    their cards, hidden needs and prompts differ, so the gate refuses rather than compares."""
    old_cases = [case.replace("test4-", "test3-") for case in GATE_CASES]
    cand = run(gate_config(tmp_path / "c.yaml", server.base_url, split="test-v3", cases=old_cases), tmp_path,
               "v3", server.base_url, "fake-model")
    code, out, err = _gate(published, cand, tmp_path / "s.md")
    assert code == 2 and out == "" and not (tmp_path / "s.md").exists()
    assert err.count("\n") == 1 and ": split: 'test-v3' differs from the baseline's 'test'" in err


def test_the_repository_bundle_is_a_current_baseline() -> None:
    """leaderboard/ (regenerated from the demo run) loads as a baseline with today's versions.

    Regenerate it with: emobench run --run-id demo && emobench leaderboard build runs/demo -o leaderboard/
    """
    subject = "vllm:embedded"
    side = load_side(ROOT / "leaderboard", subject, "--baseline-subject")
    assert side.cases.num_rows >= 2 and side.source.endswith("leaderboard/cases.parquet")
    prov = side.provenance
    config = validate_config(load_config_data(ROOT / "configs" / "demo.yaml"), "demo.yaml")
    current = manifest(config, "now", "", load_prompts(ROOT, config), {}, ROOT)["prompt_versions"]
    assert prov["split"] == config.split
    assert prov["registry_version"] == load_registry(ROOT).version(config.split)
    assert prov["prompt_versions"] == current
    assert prov["scoring_profile"] == "emobench"
