"""`emobench import empa-cases` on a self-written checkout in EMPA's card format
(tests/fixtures/empa_checkout: three Chinese cases of our own and a made-up leaderboard), a run of
configs/empa-protocol.yaml on it against the loopback fake server, and `external empa-place`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from emobench.cli import app
from emobench.registry.local import local_registry, read_local_cases, registry_for
from emobench.run.runner import ROOT
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder

cli = CliRunner()
FIXTURE = Path(__file__).parent / "fixtures" / "empa_checkout"
PUBLISHED = FIXTURE / "results/benchmark_runs/epm-bench/analysis_figures/01_tables/epmq_summary.csv"
MODELS = ("my-model", "gemini-2.5-pro", "gpt-4o")
REFERENCES = ["--reference", "gemini-2.5-pro=Reference Model", "--reference", "gpt-4o=Model Gamma"]


def refused(result: Any) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    return str(lines[0])


def _import(checkout: Path, out: Path) -> Any:
    return cli.invoke(app, ["import", "empa-cases", str(checkout), "--out", str(out), "--commit", "abc1234"])


def test_the_official_cases_become_a_local_zh_split(tmp_path: Path) -> None:
    out = tmp_path / "empa-zh"
    done = _import(FIXTURE, out)
    assert done.exit_code == 0, done.output
    assert sorted(p.name for p in out.iterdir()) == ["NOTICE", "cases.jsonl", "split.json"]
    cases = {c.id: c for c in read_local_cases(out)}
    assert list(cases) == ["empa-script-901", "empa-script-902", "empa-script-903"]
    first = cases["empa-script-901"]
    assert (first.language, first.split, first.persona.name, first.persona.age) == ("zh", "empa-zh", "周晓禾", 31)
    # The needs are the card's own: two 高 stay two highs, the metadata's stratum leads among them.
    needs = first.persona.needs
    assert (needs.A.level, needs.P.level, needs.C.level, needs.lead) == ("high", "high", "low", "A")
    assert first.dominant_axis == first.stratum == "A" and first.case_need is not None and first.case_need.axis == "A"
    assert first.persona.big_five == {}
    assert first.scenario.category == "career" and first.opening == "我带的新人今天当着全组的面说我的方案过时了。"
    assert first.persona.resistance == ["hinting", "deflecting", "testing"]
    assert len(first.scenario.stages) == 4 and first.scenario.stages[0].startswith("周会上")
    assert first.scenario.stages[1].startswith("引发回忆：")  # the stage's title, as EMPA's director reveals it
    assert first.hidden_need.startswith("希望对方看见") and first.persona.threshold == "high"
    # The stratum (A) is a slice family only: the card's P stays the high need and tags the hidden need.
    second = cases["empa-script-902"]
    assert second.dominant_axis == "A" and second.persona.needs.A.level == "medium"
    assert second.persona.needs.dominant == "P" and second.case_need is not None and second.case_need.axis == "P"
    # A one-line ranking gives each axis its own clause.
    third = cases["empa-script-903"]
    assert third.persona.threshold == "low" and third.persona.needs.C.why.endswith("（认知）")
    assert [third.persona.needs[a].level for a in "CAP"] == ["high", "medium", "low"]  # type: ignore[index]
    # IEDR: precomputed for two cases; the third from a recorded result file. P0 from the levels.
    assert [c.p0 for c in cases.values()] == [(-7, -21, -16), (-7, -12, -21), (-17, -12, -9)]
    info = json.loads((out / "split.json").read_text(encoding="utf-8"))
    assert info["precomputed_levels"] == 2 and info["precomputed_thresholds"] == {"cases": 2, "equal_to_empa_profile": 2}
    assert info["cases"][2]["iedr_from"].startswith("results/")
    assert info["source"]["commit"] == "abc1234" and len(info["source"]["files"]) == 8
    assert "CC BY-NC" in (out / "NOTICE").read_text(encoding="utf-8")
    registry = local_registry(out, ROOT)
    assert registry.splits == ["empa-zh"] and registry.version("empa-zh") == info["registry_version"]


def _broken(tmp_path: Path, edit: str) -> Path:
    checkout = tmp_path / "checkout"
    shutil.copytree(FIXTURE, checkout)
    data = checkout / "empa" / "data"
    if edit == "no list":
        (data / "official_cases.txt").unlink()
    elif edit == "no age":
        card = data / "cases" / "script_902.md"
        card.write_text(card.read_text(encoding="utf-8").replace("年龄：58\n", ""), encoding="utf-8")
    elif edit == "listed but absent":
        (data / "official_cases.txt").write_text("script_901\nscript_904\n", encoding="utf-8")
    elif edit == "no levels":
        (data / "precomputed" / "iedr_batch_results.json").unlink()
        shutil.rmtree(checkout / "results" / "benchmark_runs" / "epm-bench" / "reference-model")
    elif edit == "bad level":
        pre = data / "precomputed" / "iedr_batch_results.json"
        levels = json.loads(pre.read_text(encoding="utf-8"))
        levels["script_901"]["iedr"]["A.2"] = 7
        pre.write_text(json.dumps(levels), encoding="utf-8")
    return checkout


@pytest.mark.parametrize(("edit", "where"), [
    ("no list", r"empa/data/official_cases\.txt: missing"),
    ("no age", r"cases/script_902\.md: <character_info>\.年龄: missing field"),
    ("listed but absent", r"cases/script_904\.md: missing"),
    ("no levels", r"iedr_batch_results\.json: script_901: no IEDR levels"),
    ("bad level", r"iedr_batch_results\.json: script_901\.iedr\.A\.2: missing or not a level 0-3, got 7"),
])
def test_bad_input_is_one_line_naming_file_and_field_and_nothing_is_written(tmp_path: Path, edit: str, where: str) -> None:
    out = tmp_path / "out" / "empa-zh"
    line = refused(_import(_broken(tmp_path, edit), out))
    assert re.search(where, line), line
    assert not (tmp_path / "out").exists()


def test_an_existing_folder_is_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "empa-zh"
    out.mkdir()
    (out / "mine.txt").write_text("keep", encoding="utf-8")
    assert "not empty" in refused(_import(FIXTURE, out))
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def test_an_edited_case_record_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "empa-zh"
    assert _import(FIXTURE, out).exit_code == 0
    cases = out / "cases.jsonl"
    cases.write_text(cases.read_text(encoding="utf-8").replace("周晓禾", "周晓和", 1), encoding="utf-8")
    line = refused(cli.invoke(app, ["run", "--config", str(ROOT / "configs/empa-protocol.yaml"), "--local-split", str(out),
                                    "--dry-run"]))
    assert "cases.jsonl: line 1: edited after import" in line


def _responder(body: dict[str, Any]) -> str:
    """The fake server's answers, with the judge rating my-model's replies above the reference's and
    each reply's own seed moving the rating, so that runs differ."""
    fmt = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    if fmt is None and body.get("model") in MODELS and body["messages"][0]["role"] == "system":
        return f"我听到了。({body['model']}:{int(body.get('seed') or 0) % 3})"
    if fmt == "mdep_verdict":
        marks = re.findall(r"\((my-model|gemini-2\.5-pro|gpt-4o):(\d)\)", body["messages"][-1]["content"])
        model, digit = marks[-1] if marks else ("", "0")
        level = {"my-model": 2, "gemini-2.5-pro": 1}.get(model, 0) + (digit == "0")
        axis = {"progress": min(level, 3), "regression": int(digit == "2"), "evidence": "我听到了", "reason": "回应了感受"}
        return json.dumps(dict.fromkeys("CAP", axis))
    return default_responder(body)


def test_the_protocol_runs_on_the_imported_split_and_places_the_model(tmp_path: Path) -> None:
    split = tmp_path / "empa-zh"
    assert _import(FIXTURE, split).exit_code == 0
    state = FakeState(responder=_responder, models=MODELS)
    with FakeOpenAIServer(state) as server:
        protocol = yaml.safe_load((ROOT / "configs" / "empa-protocol.yaml").read_text(encoding="utf-8"))
        text = json.dumps(protocol).replace("http://127.0.0.1:8000/v1", server.base_url)
        config = tmp_path / "protocol.yaml"
        config.write_text(yaml.safe_dump(json.loads(text)), encoding="utf-8")
        done = cli.invoke(app, ["run", "--config", str(config), "--local-split", str(split), "--out", str(tmp_path / "runs"),
                                "--run-id", "p", "--max-turns", "12", "--seeds", "0,1", "--no-progress", "--no-cache"],
                        env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    run = tmp_path / "runs" / "p"
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["split"] == "empa-zh" and manifest["local_split"]["source"]["commit"] == "abc1234"
    assert all(v.startswith("zh-") for k, v in manifest["prompt_versions"].items() if k != "probe")
    assert (run / "cases.jsonl").read_bytes() == (split / "cases.jsonl").read_bytes()
    # Rescoring later reads the run's own copy of the cards, not the library.
    assert registry_for(run, ROOT).cases("empa-zh") == read_local_cases(split)
    # Every call carries EMPA's sampling; the subject gets one system and one flattened user message.
    assert {(r["body"]["frequency_penalty"], r["body"]["presence_penalty"], r["body"]["temperature"])
            for r in state.requests} == {(0.7, 0.7, 0.7)}
    subject_calls = [r["body"] for r in state.requests if not r["body"].get("response_format")
                     and r["body"]["messages"][0]["content"].startswith("你是一位温暖")]
    assert subject_calls and all(len(b["messages"]) == 2 for b in subject_calls)
    late = max(subject_calls, key=lambda b: len(b["messages"][1]["content"]))["messages"][1]["content"]
    assert late.startswith("以下是你们到目前为止的对话") and late.count("对方：") >= 5 and "对方刚刚说：" in late

    scores = pd.read_parquet(run / "scores.parquet")
    assert len(scores) == 3 * 2 * 3  # three subjects, two seeds (k = 2: the fewest placing takes), three cases
    place = ["external", "empa-place", str(run), *REFERENCES, "--published", str(PUBLISHED), "--json", str(tmp_path / "p.json")]
    # Three cases of no EMPA release at 12 turns: not the protocol, refused in one line.
    line = refused(cli.invoke(app, place, env={"COLUMNS": "200"}))
    assert "config.max_turns: 12, the protocol's is 45 (and 2 more)" in line and "--exploratory" in line
    placed = cli.invoke(app, [*place, "--exploratory"], env={"COLUMNS": "200"})
    assert placed.exit_code == 0, placed.output
    result = json.loads((tmp_path / "p.json").read_text(encoding="utf-8"))
    assert result["comparable"] is False and len(result["not_comparable"]) == 3
    assert placed.stdout.startswith("EXPLORATORY: not EMPA's protocol")
    # Recomputed here from the scores file: run score = mean over cases of one seed.
    runs = scores.groupby(["subject", "seed"])["epmq_empa"].mean()
    strong, weak, mine = runs["gemini-2.5-pro"], runs["gpt-4o"], runs["my-model"]
    offsets = [strong.mean() - 56.0, weak.mean() - 18.2]
    assert [r["offset"] for r in result["references"]] == pytest.approx(offsets)
    assert result["offset_test"]["difference"] == pytest.approx(offsets[0] - offsets[1])
    if result["method"] == "offset":
        assert result["placed"][0]["placed"] == pytest.approx(mine.mean() - sum(offsets) / 2)
    else:
        lam = (mine.mean() - weak.mean()) / (strong.mean() - weak.mean())
        assert result["placed"][0]["placed"] == pytest.approx(18.2 + lam * (56.0 - 18.2))
    lo, hi = result["placed"][0]["placed_ci"]
    assert lo < result["placed"][0]["placed"] < hi
    assert "EMPA leaderboard placement" in placed.stdout and "my-model" in placed.stdout
    assert "so they are wide" in placed.stderr and "Conditional on EMPA's 30 official cases" in placed.stderr
