"""`emobench import empa` end to end on a small synthetic EMPA-format results folder (written here,
not copied), then `leaderboard build` beside a run of our own and `judge --panel` on the fake server."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from emobench.cli import app
from emobench.rundir import RunDir
from tests.fake_openai import FakeOpenAIServer
from tests.synthetic_runs import SubjectTruth, write_run

cli = CliRunner()
P0_LEVELS = {"C.1": 2, "C.2": 2, "C.3": 3, "A.1": 2, "A.2": 2, "A.3": 2, "P.1": 1, "P.2": 2, "P.3": 1}  # P0 (-17,-18,-13)
POINTS = {"C": (0, -2, -4), "A": (0, -2, -5), "P": (0, -2, -5)}


def _analysis(prog: int, reg: int, mistype: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for axis in "CAP":
        out[f"{axis}_Prog_level"] = prog
        out[f"{axis}_Prog_evidence"] = f"quoted span for {axis}"
        out[f"{axis}_Prog_reasoning"] = "a synthetic reason"
        key = f"{axis}Neg_level" if mistype and axis == "P" else f"{axis}_Neg_level"
        out[key] = -reg  # EMPA writes regression levels as 0/-1/-2
    return out


def _result(script: str, levels: list[tuple[int, int] | None], stop: str, mistype_turn: int | None) -> dict[str, Any]:
    p = [-17, -18, -13]
    trajectory: list[dict[str, Any]] = [{"turn": 0, "P_t": list(p), "v_t": [0, 0, 0]}]
    history = []
    for t, lv in enumerate(levels, start=1):
        step: dict[str, Any] = {"turn": t}
        if lv is None:
            v = [0, 0, 0]  # a lost judgement: EMPA records v = 0 and no analysis
        else:
            prog, reg = lv
            mistype = t == mistype_turn
            v = [(0, 1, 3)[prog] + POINTS[a][0 if (mistype and a == "P") else reg] for a in "CAP"]
            step["mdep_analysis"] = _analysis(prog, reg, mistype)
        p = [x + y for x, y in zip(p, v, strict=True)]
        step.update({"P_t": list(p), "v_t": v})
        trajectory.append(step)
        history += [{"role": "actor", "content": f"user message {t}"}, {"role": "test_model", "content": f"reply {t}"}]
    return {
        "script_id": script,
        "total_turns": len(levels),
        "termination_reason": stop,
        "scenario": {
            "script_id": script,
            "story_progression": {f"phase_{i}": {"title": "t", "content": f"stage {i}"} for i in (1, 2, 3)},
            "story_outcome": "wants to be heard",
            "story_interlude": "an old memory",
        },
        "history": history,
        "test_model_name": "Custom-x",
        "actor_model": "actor-model",
        "judger_model": "judge-model",
        "director_model": "director-model",
        "epj": {
            "P_0_initial_deficit": [-17, -18, -13],
            "trajectory": trajectory,
            "iedr_details": {"filled_iedr": {**P0_LEVELS, "_detailed": {"C.3_reasoning": "needs a plan"}}},
        },
        "timestamp": "2025-12-24T00:00:00",
    }


def _write_results(root: Path) -> Path:
    good = [(2, 0)] * 12  # v = (3,3,3) each turn: success at turn 12
    bad = [(0, 2)] * 11 + [None]  # regression every turn, then a lost judgement (v = 0): no collapse at 12
    cases = {
        "model-a": {
            "script_001": (good, "EPM v2.0 Success: Positional Victory", None),
            "script_002": ([(1, 0)] * 3 + [(1, 1)] * 9, "EPM v2.0 Failure: Direction Collapse", 5),
        },
        "model-b": {
            "script_001": (good, "EPM v2.0 Success: Geometric Victory", None),
            "script_002": (bad, "Reached max turns (12), timeout", None),
        },
    }
    for model, scripts in cases.items():
        folder = root / model
        folder.mkdir(parents=True)
        with (folder / "descriptive_statistics.csv").open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(
                [
                    "Case_ID",
                    "Dominant_Axis",
                    "Category",
                    "SP_Empathy_Threshold",
                    "SP_Emotional_Priority",
                    "SP_Motivational_Priority",
                    "SP_Cognitive_Priority",
                ]
            )
            for script in scripts:
                writer.writerow([script, "A", "Leisure", "Low", "Medium", "Low", "High"])
        for script, (levels, stop, mistype) in scripts.items():
            data = _result(script, levels, stop, mistype)
            (folder / f"{script}_result.json").write_text(json.dumps(data), encoding="utf-8")
    return root


def test_import_then_leaderboard_then_judge_panel(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    results = _write_results(tmp_path / "empa")
    run = tmp_path / "runs" / "empa"
    done = cli.invoke(app, ["import", "empa", str(results), "-o", str(run), "--commit", "abc1234"])
    assert done.exit_code == 0, done.output
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["external"]["commit"] == "abc1234" and manifest["external"]["original_judge"] == "judge-model"
    assert manifest["config"]["scoring_profile"] == "empa"
    report = json.loads((run / "report.json").read_text())
    quirks = report["external"]["quirks"]
    assert quirks["stops_agreeing"] == 4 and quirks["stops_differing"] == 0
    assert quirks["lost_judgements"] == 1
    assert quirks["mistyped_level_keys"] == 1 and quirks["mistyped_nonzero_levels_read_as_0"] == 1
    scores = pd.read_parquet(run / "scores.parquet").set_index(["subject", "case_id"])
    assert (scores["scoring_profile"] == "empa").all()
    # model-b's script_002 by hand under EMPA's definitions (docs/method.md §5.4): 11 turns of
    # v = (-4, -5, -5), then a lost turn scored as v = 0, so T = 12. Outcome 0 (E and S_net below
    # 0, RDI clamped at 0); Efficiency (Rho 0 + Sproj 0 + Tau 100) / 3, the path being straight
    # (EMPA's Tau; the emobench profile would give 0); Stability (Rpos 0 + Align + Pen 0) / 3,
    # Pen 0 as 66 regression levels / 13 > 3. u = (0.6079, 0.6437, 0.4649) from P0 (-17, -18, -13);
    # each regression turn has cos = -(4*0.6079 + 5*0.6437 + 5*0.4649) / sqrt(66) = -0.9816.
    align = 100 * (11 * -0.9816 / 13 + 1) / 2
    by_hand = 0.4 * 0 + 0.2 * 100 / 3 + 0.4 * align / 3
    assert scores.loc[("model-b", "empa-script-002"), ["epmq", "epmq_empa"]].tolist() == pytest.approx([by_hand] * 2, abs=1e-4)
    assert scores.loc[("model-a", "empa-script-001"), "success"]
    assert scores.loc[("model-a", "empa-script-001"), "epmq"] > 100  # the empa profile does not cap
    episodes = {e.key: e for e in RunDir(run).read_episodes()}
    lost = episodes["model-b|empa-script-002|0"].turns[-1].judgement
    assert lost.vector == (0.0, 0.0, 0.0) and not lost.verdicts[0].valid  # scored as EMPA did, visibly

    # Beside a run of our own: no --force needed, the imported subjects are marked external.
    own = write_run(tmp_path / "runs" / "own", [SubjectTruth("ours")], n_cases=4, n_seeds=1)
    board = tmp_path / "board"
    built = cli.invoke(
        app, ["leaderboard", "build", str(own), str(run), "-o", str(board), "--n-boot", "50"], env={"COLUMNS": "200"}
    )
    assert built.exit_code == 0, built.output
    table = pq.read_table(board / "leaderboard.parquet").to_pandas()
    overall = table[table["slice_family"] == "overall"].set_index("subject")
    assert overall.loc["model-a", "external"] and not overall.loc["ours", "external"]
    assert overall.loc["model-a", "scoring_profile"] == "empa"
    page = (board / "index.html").read_text()
    assert "(external)" in page and "abc1234" in page and 'id="profiles-note"' in page

    panel = tmp_path / "panel.yaml"
    binding = f"openai:fake-model@{fake.base_url}"
    panel.write_text(
        yaml.safe_dump(
            {"name": "mine", "holistic": False, "pairwise": False, "judges": [{"binding": binding, "label": "judge-x"}]}
        )
    )
    judged = cli.invoke(app, ["judge", str(run), "--panel", str(panel), "--no-cache"], env={"COLUMNS": "200"})
    assert judged.exit_code == 0, judged.output
    new_report = json.loads((run / "panels" / "mine" / "report.json").read_text())
    agreement = new_report["reliability"]["original_judge"]
    assert agreement["judge"] == "judge-model"
    # Every turn but the lost one is a unit, for each of the six MDEP items.
    assert {k: v["n_turns"] for k, v in agreement["items"].items()} == dict.fromkeys(
        [f"mdep.{a}.{k}" for a in "CAP" for k in ("progress", "regression")], 4 * 12 - 1
    )
    rescored = pd.read_parquet(run / "panels" / "mine" / "scores.parquet")
    assert (rescored["scoring_profile"] == "empa").all()


def test_runs_scored_before_profiles_read_as_emobench(tmp_path: Path) -> None:
    own = write_run(tmp_path / "old", [SubjectTruth("ours")], n_cases=4, n_seeds=1)
    scores = pq.read_table(own / "scores.parquet")
    pq.write_table(scores.drop_columns(["scoring_profile", "epmq_empa"]), own / "scores.parquet")
    built = cli.invoke(app, ["leaderboard", "build", str(own), "-o", str(tmp_path / "b"), "--n-boot", "20", "--no-html"])
    assert built.exit_code == 0, built.output
    overall = pq.read_table(tmp_path / "b" / "leaderboard.parquet").to_pandas().query("slice_family == 'overall'")
    assert overall["scoring_profile"].tolist() == ["emobench"] and overall["epmq_empa"].isna().all()
