"""Post-episode judging and rescoring with another panel, against the fake server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from typer.testing import CliRunner

from emobench.cli import app
from emobench.records import EpisodeJudgement
from emobench.rundir import RunDir, read_records
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer

cli = CliRunner()


def _kind(body: dict[str, Any]) -> str:
    return str((body.get("response_format") or {}).get("json_schema", {}).get("name", "text"))


def test_run_judges_episodes_then_a_rescore_replays_only_judges(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    binding = f"openai:fake-model@{fake.base_url}"
    cfg = write_config(tmp_path / "run.yaml", fake.base_url, seeds=[0, 1])
    data = yaml.safe_load(cfg.read_text())
    data["subjects"] = [{"binding": binding, "label": "subject-a"}, {"binding": binding, "label": "subject-b",
                                                                      "sampling": {"temperature": 0.5}}]
    cfg.write_text(yaml.safe_dump(data))
    run = cli.invoke(app, ["run", "--config", str(cfg), "--out", str(tmp_path), "--run-id", "r", "--no-progress"],
                     env={"COLUMNS": "200"})
    assert run.exit_code == 0, run.output
    rd = RunDir(tmp_path / "r")
    judgements = read_records(rd.judgements, EpisodeJudgement)
    assert len(judgements) == 8 and all(len(j.holistic) == 1 and j.holistic[0].valid for j in judgements)
    pairwise = pd.read_parquet(rd.pairwise)
    assert len(pairwise) == 4 * 2 * 4  # 4 (case, seed) pairs x 2 orders x 4 dimensions
    report = json.loads(rd.report.read_text())
    assert report["reliability"]["flip_rate"] is not None
    scores = pd.read_parquet(rd.scores)
    assert scores["empathy"].notna().all() and scores["probe_accuracy"].notna().all()
    assert scores["emotion_path"].map(len).eq(scores["n_turns"]).all()
    assert scores["valence_path"].map(len).eq(scores["n_turns"]).all() and scores["tracker_version"].notna().all()

    before = len(fake.state.requests)
    panel = tmp_path / "pair.yaml"
    panel.write_text(yaml.safe_dump({"name": "pair", "judges": [
        {"binding": binding, "label": "judge-x", "sampling": {"temperature": 0.0}},
        {"binding": binding, "label": "judge-y", "sampling": {"temperature": 0.9}},
    ]}))
    rescored = cli.invoke(app, ["judge", str(rd.path), "--panel", str(panel), "--no-cache"], env={"COLUMNS": "200"})
    assert rescored.exit_code == 0, rescored.output
    kinds = {_kind(r["body"]) for r in fake.state.requests[before:]}
    assert kinds == {"mdep_verdict", "holistic_verdict", "pairwise_verdict"}  # no conversation regenerated
    out = RunDir(rd.path / "panels" / "pair")
    new = read_records(out.judgements, EpisodeJudgement)
    assert len(new) == 8 and all(j.mdep is not None and len(j.holistic) == 2 for j in new)
    episodes = {e.key: e for e in rd.read_episodes()}
    for j in new:
        assert len(j.mdep) == len(episodes[j.key].turns)
        assert {v.judge for t in j.mdep for v in t.verdicts} == {"judge-x", "judge-y"}
    new_report = json.loads(out.report.read_text())
    assert set(new_report["reliability"]["alpha"]) >= {"mdep.C.progress", "holistic.empathy"}
    assert new_report["reliability"]["n_judges"] == 2
    assert len(pd.read_parquet(out.scores)) == 8 and (out.path / "leaderboard.parquet").exists()
    # The run's own judgements and scores are untouched.
    assert read_records(rd.judgements, EpisodeJudgement) == judgements
