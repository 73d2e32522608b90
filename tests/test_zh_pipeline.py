"""A Chinese run end to end on the loopback fake server: a tiny zh library made here (the test
cards of tests/data/zh_library with the shipped prompts and judges), then records, scores read
back with pandas and duckdb, manifest and report carry the language and name the trackers'
absence; a leaderboard over a Chinese and an English run has a language slice; the gate refuses
a baseline of another language in one line."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow.compute as pc
import pytest
from rich.console import Console
from typer.testing import CliRunner

from emobench.cli import app
from emobench.config import load_config_data, validate_config
from emobench.publish.leaderboard import build_leaderboard
from emobench.publish.provenance import read_metadata
from emobench.publish.show import render_table
from emobench.registry import load_registry
from emobench.run.finalize import finalize_run
from emobench.run.runner import ROOT, run_benchmark
from emobench.rundir import RunDir
from emobench.trackers.languages import tracker_absence
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer

ZH = Path(__file__).parent / "data" / "zh_library"
ABSENT = "trackers: not run for zh (no Chinese tracker meets the bar; docs/trackers.md)"
cli = CliRunner()


def _run(server: FakeOpenAIServer, root: Path, out: Path, split: str) -> RunDir:
    data: dict[str, Any] = load_config_data(write_config(out.with_suffix(".yaml"), server.base_url, split=split))
    result = asyncio.run(run_benchmark(validate_config(data, "run.yaml", root), out, root=root, show_progress=False))
    rd = RunDir(result.run_dir)
    finalize_run(rd, load_registry(root))
    return rd


@pytest.fixture(scope="module")
def runs(fake_module: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[RunDir, RunDir]:
    tmp = tmp_path_factory.mktemp("zh-pipeline")
    root = tmp / "library"
    shutil.copytree(ZH, root)
    for item in ("prompts", "judges", "configs"):
        shutil.copytree(ROOT / item, root / item)
    return _run(fake_module, root, tmp / "zh", "demo-zh"), _run(fake_module, ROOT, tmp / "en", "demo")


@pytest.fixture(scope="module")
def fake_module() -> Any:
    with FakeOpenAIServer() as server:
        yield server


def test_the_absence_is_named_for_chinese_only() -> None:
    assert tracker_absence("en") is None
    assert tracker_absence("zh") == ABSENT


def test_records_and_scores_carry_the_language(runs: tuple[RunDir, RunDir]) -> None:
    zh, en = runs
    episodes = zh.read_episodes()
    assert episodes and {e.language for e in episodes} == {"zh"}
    assert {e.language for e in en.read_episodes()} == {"en"}
    scores = pd.read_parquet(zh.scores)
    assert set(scores["language"]) == {"zh"}
    assert set(scores["trackers_absent"]) == {ABSENT}
    assert scores["valence_path"].isna().all() and scores["tracker_version"].isna().all()
    assert scores["final_meter"].notna().all()  # the meter carries the Chinese rows
    english = duckdb.sql(f"SELECT language, trackers_absent, valence_path FROM read_parquet('{en.scores}')").fetchall()
    assert english and all(lang == "en" and absent is None and path for lang, absent, path in english)
    chinese = duckdb.sql(f"SELECT DISTINCT language, trackers_absent FROM read_parquet('{zh.scores}')").fetchall()
    assert chinese == [("zh", ABSENT)]


def test_manifest_and_report_say_language_and_trackers(runs: tuple[RunDir, RunDir]) -> None:
    zh, en = runs
    for rd, language, trackers in ((zh, "zh", ABSENT), (en, "en", "run")):
        manifest = json.loads(rd.manifest.read_text())
        report = json.loads(rd.report.read_text())
        assert (manifest["language"], manifest["trackers"]) == (language, trackers)
        assert (report["language"], report["trackers"]) == (language, trackers)


def test_the_leaderboard_keeps_languages_apart_by_name(runs: tuple[RunDir, RunDir]) -> None:
    zh, en = runs
    table = build_leaderboard([zh.path, en.path], n_boot=50)
    rows = table.to_pandas()
    by_language = rows[rows["slice_family"] == "language"].set_index("slice")
    assert sorted(by_language.index) == ["en", "zh"]
    assert by_language.loc["zh", "language"] == "zh" and by_language.loc["zh", "trackers"] == ABSENT
    assert by_language.loc["en", "language"] == "en" and by_language.loc["en", "trackers"] == "run"
    assert by_language.loc["zh", "n_cases"] == 1 and by_language.loc["en", "n_cases"] == 2
    overall = rows[rows["slice_family"] == "overall"].iloc[0]
    assert overall["language"] == "en+zh" and overall["trackers"] == ABSENT  # pooled, and says so
    meta = read_metadata(table.schema)
    assert meta["languages"] == {zh.path.name: "zh", en.path.name: "en"} and meta["trackers"] == ABSENT
    assert pc.sum(pc.equal(table.column("slice_family"), "language")).as_py() == 2
    console = Console(width=240, record=True)
    render_table(table, console, "language")
    shown = " ".join(console.export_text().split())
    assert "Languages pooled: en, zh" in shown and ABSENT in shown


def test_the_gate_refuses_a_baseline_of_another_language(runs: tuple[RunDir, RunDir]) -> None:
    zh, en = runs
    result = cli.invoke(app, ["gate", "--baseline", str(en.path), "--candidate", str(zh.path)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert lines[0] == f"error: {zh.path}: language: 'zh' differs from the baseline's 'en'; scores are not comparable"
