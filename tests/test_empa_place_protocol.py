"""`external empa-place` places only runs played as configs/empa-protocol.yaml asks: all official
cases of an import of release d59757a, the protocol's settings, its two references, k >= 2; any
other run is one line, exit 2, unless --exploratory, which places it under a banner, not comparable.

The runs are written here: a manifest recording the protocol config as a run records it, and
scores for the fixture's three cases, which stand in for release d59757a's official cases."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from emobench.cli import app
from emobench.importers import empa_release
from emobench.importers.empa_release import Release
from emobench.run.runner import ROOT

cli = CliRunner()
RELEASE = "d59757a" + "0" * 33
CASES = ("empa-script-901", "empa-script-902", "empa-script-903")
# Per subject, per seed, its score on each case: my-model between the references.
SCORES = {"my-model": [(70, 72, 74), (73, 75, 77), (68, 70, 69)], "gemini-2.5-pro": [(80, 82, 84), (83, 85, 82), (78, 81, 80)],
          "gpt-4o": [(30, 28, 33), (33, 31, 32), (27, 29, 30)]}
PUBLISHED = {"Claude 4.6 Opus": 107.19, "Gemini 2.5 Pro": 90.73, "Claude 3.5 Sonnet": 85.12, "DeepSeek V3": 78.44,
             "Llama 3.3 70B": 38.55, "GPT-4o": 33.73, "Qwen 3 8B": 12.16}  # a few rows of EMPA's table, with attribution
REFERENCES = ["--reference", "gemini-2.5-pro=Gemini 2.5 Pro", "--reference", "gpt-4o=GPT-4o"]


@pytest.fixture(autouse=True)
def fixture_cases_are_the_release(monkeypatch: pytest.MonkeyPatch) -> None:
    blobs = {f"empa/data/cases/{c.removeprefix('empa-').replace('-', '_')}.md": "0" * 40 for c in CASES}
    monkeypatch.setattr(empa_release, "known_releases", lambda: (Release(RELEASE, 3, blobs),))


def _manifest(**change: Any) -> dict[str, Any]:
    config = yaml.safe_load((ROOT / "configs" / "empa-protocol.yaml").read_text(encoding="utf-8"))
    manifest = {"split": "empa-zh", "registry_version": "v1", "config": copy.deepcopy(config),
                "templates_language": {"prompts": "zh", "judges": "zh", "judge_language": "case"},
                "local_split": {"split": "empa-zh", "source": {"commit": RELEASE, "release": RELEASE}}}
    for key, value in change.items():
        target, *path = key.split("__")
        node = manifest[target]
        for part in path[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[path[-1]] = value
    return manifest


def _run(folder: Path, manifest: dict[str, Any], cases: tuple[str, ...] = CASES) -> Path:
    folder.mkdir(parents=True)
    rows = [{"subject": s, "case_id": c, "seed": seed, "epmq_empa": v}
            for s, seeds in SCORES.items() for seed, values in enumerate(seeds) for c, v in zip(CASES, values, strict=True)
            if c in cases]
    pd.DataFrame(rows).to_parquet(folder / "scores.parquet")
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def _published(folder: Path) -> Path:
    path = folder / "epmq_summary.csv"
    path.write_text("Model,EPM-Q Score\n" + "".join(f"{m},{v}\n" for m, v in PUBLISHED.items()), encoding="utf-8")
    return path


def _place(tmp_path: Path, run: Path, *extra: str) -> Any:
    return cli.invoke(app, ["external", "empa-place", str(run), *REFERENCES, "--published", str(_published(tmp_path)),
                            "--json", str(tmp_path / "p.json"), *extra], env={"COLUMNS": "200"})


def test_a_full_protocol_run_with_both_references_is_placed_and_comparable(tmp_path: Path) -> None:
    done = _place(tmp_path, _run(tmp_path / "run", _manifest()))
    assert done.exit_code == 0, done.output
    result = json.loads((tmp_path / "p.json").read_text(encoding="utf-8"))
    assert result["comparable"] is True and result["not_comparable"] == [] and "EXPLORATORY" not in done.stdout
    assert [r["subject"] for r in result["references"]] == ["gemini-2.5-pro", "gpt-4o"]
    assert result["offset_test"]["strong"] == "gemini-2.5-pro" and result["method"] in ("offset", "line")
    row = result["placed"][0]
    assert row["subject"] == "my-model" and row["k"] == 3
    # The published models' run noise can only widen the rank range.
    best, worst = row["rank_range"]
    exact_best, exact_worst = row["rank_range_if_published_exact"]
    assert best <= exact_best <= row["rank"] <= exact_worst <= worst
    assert "Conditional on EMPA's 30 official cases" in done.stderr


@pytest.mark.parametrize(("manifest", "cases", "where"), [
    ({"config__max_turns": 12}, CASES, "config.max_turns: 12, the protocol's is 45"),
    ({"config__user__sampling__temperature": 1.0}, CASES, "config.user.sampling: "),
    ({"config__panel__judges__0__binding": "openai:gpt-4o-mini@http://x/v1"}, CASES,
     "config.panel.judges[0].binding: model 'gpt-4o-mini'"),
    ({"config__subject_history": "turns"}, CASES, "config.subject_history: 'turns'"),
    ({"local_split__source__release": None}, CASES,
     "local_split.source.release: the cards are not an import of EMPA release d59757a"),
    ({}, CASES[:2], "episodes: 2 of EMPA's 3 official cases played"),
    ({"config__subjects__2__binding": "openai:gpt-4o-mini@http://127.0.0.1:8000/v1"}, CASES,
     "config.subjects[gpt-4o].binding: model 'gpt-4o-mini'; the reference 'gpt-4o' is 'gpt-4o'"),
    ({"config__subjects__2__binding": "openai:my-model@http://127.0.0.1:8000/v1"}, CASES,
     "config.subjects[gpt-4o].binding: model 'my-model'"),
    ({"config__panel__judges": [{"binding": "openai:gemini-2.5-pro@http://x/v1", "sampling": {
        "temperature": 0.7, "top_p": 1.0, "max_tokens": 1200, "frequency_penalty": 0.7, "presence_penalty": 0.7}}] * 2}, CASES,
     "config.panel.judges: 2 judge(s); EMPA's panel is 1"),
])
def test_a_run_off_the_protocol_is_refused_in_one_line(tmp_path: Path, manifest: dict[str, Any], cases: tuple[str, ...],
                                                       where: str) -> None:
    done = _place(tmp_path, _run(tmp_path / "run", _manifest(**manifest), cases))
    lines = done.stderr.strip().splitlines()
    assert done.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.output
    assert where in lines[0] and "--exploratory places it anyway" in lines[0]
    assert not (tmp_path / "p.json").exists()


def test_a_reference_whose_recorded_model_is_another_is_refused(tmp_path: Path) -> None:
    """The binding says gpt-4o, but the run recorded another model answering as it."""
    manifest = _manifest()
    manifest["roles"] = {"subjects": [{"label": "my-model", "model": "my-model"},
                                      {"label": "gemini-2.5-pro", "model": "gemini-2.5-pro"},
                                      {"label": "gpt-4o", "model": "Qwen/Qwen3-8B"}]}
    done = _place(tmp_path, _run(tmp_path / "run", manifest))
    assert done.exit_code == 2 and "roles.subjects[gpt-4o].model: 'Qwen/Qwen3-8B' answered" in done.stderr, done.output
    manifest["roles"]["subjects"][2]["model"] = "openai/gpt-4o"  # a provider's prefix is the same model
    done = _place(tmp_path / "again", _run(tmp_path / "again" / "run", manifest))
    assert done.exit_code == 0, done.output


def test_one_reference_is_not_the_protocol_and_exploratory_places_it_under_a_banner(tmp_path: Path) -> None:
    args = ["external", "empa-place", str(_run(tmp_path / "run", _manifest())), "--reference",
            "gemini-2.5-pro=Gemini 2.5 Pro", "--published", str(_published(tmp_path)), "--json", str(tmp_path / "p.json")]
    refused = cli.invoke(app, args)
    assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "--reference: gemini-2.5-pro; the protocol plays gemini-2.5-pro, gpt-4o" in refused.stderr
    done = cli.invoke(app, [*args, "--exploratory"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("EXPLORATORY: not EMPA's protocol, not comparable with its leaderboard")
    result = json.loads((tmp_path / "p.json").read_text(encoding="utf-8"))
    assert result["comparable"] is False and len(result["not_comparable"]) == 1
    assert result["method"] == "offset" and "not tested" in result["why"]
