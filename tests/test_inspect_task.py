"""The inspect task against `emobench run`: the same two demo cases, one seed, every role on the fake
server, played once through each front door (module-scoped), then compared record by record.

Also: what the log shows, `emobench import inspect` refusing logs it cannot read, and a provider
failing mid-sample (429, 500, a malformed structured answer) with `inspect eval-retry` after it.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.inspect_support import (  # isort: skip (skips without inspect)
    KEY, MODEL, PlannedState, asked, inspect_cli, inspect_eval, inspect_retry, only_log, static_server,
)
from inspect_ai.log import read_eval_log, write_eval_log

from emobench.importers.inspect_log import import_inspect
from emobench.publish.leaderboard import build_leaderboard
from emobench.records import Episode, EpisodeJudgement
from emobench.run.runner import ROOT
from emobench.rundir import RunDir, read_records
from emobench.scoring.agreement import holistic_alphas, mdep_alphas
from tests.cdp import Browser
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, default_responder
from tests.gate_support import emobench
from tests.test_html import chromium  # noqa: F401  (the fixture: skips, or fails under EMOBENCH_REQUIRE_CHROMIUM)

pytestmark = pytest.mark.inspect

CASES = ["demo4-01", "demo4-02"]
REFERENCE = "scripted:platitude"
# What differs by front door and nothing else: how the roles were reached (endpoints, and the config
# hash, which holds the labels of the roles inspect bound), when and how fast things happened.
EPISODE_ASIDE = {"roles", "config_hash", "started_at", "finished_at"}
CALL_ASIDE = {"label", "model", "endpoint", "latency_s"}  # model: inspect names it service/model
SCORE_ASIDE = {"run_id", "config_hash"}
# inspect's schema type has no minItems/maxItems; its openai-api provider drops the others.
SCHEMA_BOUNDS = ("pattern", "minLength", "maxLength", "minimum", "maximum", "examples", "minItems", "maxItems")


@dataclass(frozen=True)
class Played:
    run: Path  # emobench run's
    imported: Path  # the inspect log's, imported
    log: Path
    run_requests: list[dict[str, Any]]
    eval_requests: list[dict[str, Any]]
    run_s: float
    eval_s: float


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Played]:
    import time

    root = tmp_path_factory.mktemp("inspect")
    with FakeOpenAIServer(PlannedState()) as server:
        two_judges = [{"binding": f"openai:fake-model@{server.base_url}", "label": "judge-0",
                       "sampling": {"temperature": 0.0, "max_tokens": 300}},
                      {"binding": f"openai:fake-model@{server.base_url}", "label": "judge-1",
                       "sampling": {"temperature": 0.7, "max_tokens": 300}}]
        # The subject named as inspect names it: its name is part of the persona probe's seed. Beside
        # it a scripted reference, which emobench run plays in the same run and inspect in an
        # evaluation of its own (-T subject=…).
        subject = [{"binding": f"openai:fake-model@{server.base_url}", "label": MODEL}]
        config = write_config(root / "two.yaml", server.base_url, cases=CASES, judges=two_judges, seeds=[0], subjects=subject,
                              references=[{"binding": REFERENCE}], director={"binding": f"openai:fake-model@{server.base_url}"})
        started = time.perf_counter()
        code, _, err = emobench("run", "--config", str(config), "--out", str(root / "runs"), "--run-id", "cli", "--no-progress")
        run_s = time.perf_counter() - started
        assert code == 0, err
        run_requests = [asked(r["body"]) for r in server.state.requests]
        server.state.requests.clear()
        # The cases and seeds as a user names them (inspect reads a,b as a list).
        done, eval_s = inspect_eval(server.base_url, root / "logs", root, "-T", f"config={config}", "-T", "seeds=0",
                                    "-T", f"cases={','.join(CASES)}", "--model-role", f"director={MODEL}", judges=2)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        reference, _ = inspect_eval(server.base_url, root / "logs-reference", root, "-T", f"config={config}",
                                    "-T", f"subject={REFERENCE}", "--model-role", f"director={MODEL}", judges=2,
                                    subject_model="none")
        assert reference.returncode == 0, reference.stdout[-3000:] + reference.stderr[-3000:]
        eval_requests = [asked(r["body"]) for r in server.state.requests]
    log = only_log(root / "logs")
    code, _, err = emobench("import", "inspect", str(log), str(only_log(root / "logs-reference")),
                            "--out", str(root / "runs" / "inspect"))
    assert code == 0, err
    yield Played(root / "runs" / "cli", root / "runs" / "inspect", log, run_requests, eval_requests, run_s, eval_s)


def _unbounded(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unbounded(v) for k, v in value.items() if k not in SCHEMA_BOUNDS}
    if isinstance(value, (list, tuple)):
        return [_unbounded(v) for v in value]
    return value


def _episode(episode: Episode) -> dict[str, Any]:
    data = episode.model_dump(mode="json", exclude=EPISODE_ASIDE)
    data["calls"] = [{k: v for k, v in call.items() if k not in CALL_ASIDE} for call in data["calls"]]
    return data


def test_both_front_doors_send_the_same_requests_and_record_the_same_episodes(played: Played) -> None:
    def key(request: dict[str, Any]) -> str:
        return json.dumps(request, sort_keys=True)  # inspect writes a schema's keys in another order

    # A schema's bounds do not reach the provider through inspect (docs/inspect.md); nothing else
    # differs, but for the pairwise comparisons of the model with the reference, which need both
    # in one run (an evaluation has one subject).
    pairwise = [r for r in played.run_requests if r.get("schema", ("",))[0] == "pairwise_verdict"]
    played_alike = [r for r in played.run_requests if r not in pairwise]
    assert pairwise and "minLength" in key(played_alike) and not any(b in key(played.eval_requests) for b in SCHEMA_BOUNDS)
    assert sorted(map(key, played.eval_requests)) == sorted(key(_unbounded(r)) for r in played_alike)
    assert len(played.eval_requests) > 40  # subject, user, two judges' MDEP and holistic calls, the probe; twice
    assert any(r.get("schema", ("",))[0] == "director_action" for r in played.eval_requests)  # the LLM director
    cli = {(e.subject, e.case_id): e for e in RunDir(played.run).read_episodes()}
    imported = {(e.subject, e.case_id): e for e in RunDir(played.imported).read_episodes()}
    assert sorted(cli) == sorted(imported) == [(s, c) for s in (MODEL, REFERENCE) for c in CASES]
    for key_ in cli:
        assert _episode(imported[key_]) == _episode(cli[key_])
        assert imported[key_].roles["user"].endpoint == f"inspect:{MODEL}"  # type: ignore[union-attr]


def test_the_imported_run_scores_as_the_run_did(played: Played) -> None:
    def rows(run: Path) -> pd.DataFrame:
        scores = pd.read_parquet(RunDir(run).scores).drop(columns=list(SCORE_ASIDE))
        return scores.sort_values(["subject", "case_id"]).reset_index(drop=True)

    pd.testing.assert_frame_equal(rows(played.imported), rows(played.run))
    manifest, cli = RunDir(played.imported).read_manifest(), RunDir(played.run).read_manifest()
    for field in ("split", "registry_version", "prompt_versions", "templates_language", "emobench_version"):
        assert manifest[field] == cli[field], field
    assert manifest["inspect"]["logs"][0]["eval_id"] and manifest["roles"]["judges"][1]["label"] == "judge-1"
    assert [s["label"] for s in manifest["roles"]["subjects"]] == [MODEL, REFERENCE]
    assert [s["label"] or s["binding"] for s in manifest["config"]["subjects"]] == [MODEL, REFERENCE]
    with zipfile.ZipFile(played.log) as log:  # the key stays with inspect's provider
        written = [log.read(name) for name in log.namelist()]
    written += [path.read_bytes() for path in played.imported.rglob("*") if path.is_file()]
    assert written and not any(KEY.encode() in data for data in written)
    imported, board, merged = str(played.imported), str(played.imported.parent / "board"), str(played.imported.parent / "m")
    for command in (["show", imported], ["report", imported], ["validate", imported, "--n-boot", "200"],
                    ["leaderboard", "build", imported, "-o", board, "--n-boot", "200"],
                    ["merge", imported, imported, "-o", merged]):
        code, _, err = emobench(*command)
        assert code == 0, (command, err)
    # The gate reads it against the run: no difference.
    code, out, err = emobench("gate", "--baseline", str(played.run), "--candidate", imported, "--metric", "epmq",
                              "--baseline-subject", MODEL, "--candidate-subject", MODEL)
    assert code == 0 and "| +0.000 [+0.000, +0.000] |" in out, err + out


def test_the_log_shows_turns_verdicts_and_scores(played: Played) -> None:
    log = read_eval_log(str(played.log))
    assert log.status == "success" and log.eval.task == "emobench/emobench"
    sample = next(s for s in log.samples or [] if s.id == f"{CASES[0]}|0")
    assert sample.metadata["case_id"] == CASES[0] and sample.metadata["dominant_axis"]
    episode = Episode.model_validate(sample.store["emobench:episode"])
    # The conversation as the subject had it; the simulator's inner note is shown, never sent.
    said = [(m.role, m.text) for m in sample.messages]
    assert said == [r for t in episode.turns for r in (("user", t.user.message), ("assistant", t.reply))]
    assert sample.messages[2].metadata == {"inner": "testing them"}
    subject_asked = [r for r in played.eval_requests if "schema" not in r]
    assert not any("testing them" in json.dumps(r["messages"]) for r in subject_asked)
    turns = [e for e in sample.events if e.event == "info" and (e.source or "").startswith("emobench turn")]
    assert [e.data["turn"] for e in turns] == [t.index for t in episode.turns]  # type: ignore[index]
    assert turns[0].data["verdict"]["valid"] and len(turns[0].data["judges"]) == 2  # type: ignore[index]
    assert turns[0].data["epm"] == episode.turns[0].epm.model_dump(mode="json")  # type: ignore[index, union-attr]
    scores = {s.name: s for s in log.results.scores}  # type: ignore[union-attr]
    assert {"epmq", "epmq_empa", "success", "final_meter", "empathy", "coherence"} <= set(scores)
    epmq = scores["epmq"].metrics
    cli = pd.read_parquet(RunDir(played.run).scores)
    assert epmq["emobench/case_bootstrap_mean"].value == pytest.approx(cli[cli["subject"] == MODEL]["epmq"].mean())
    # The interval `leaderboard build` prints for the same run (its defaults: 2,000 resamples, seed 0).
    board = build_leaderboard([played.imported], n_boot=2000, seed=0).to_pandas()
    overall = board[(board["slice_family"] == "overall") & (board["subject"] == MODEL)].iloc[0]
    assert [epmq[f"emobench/case_bootstrap_{k}"].value for k in ("mean", "ci_lo", "ci_hi")] == [
        overall["epmq"], overall["epmq_lo"], overall["epmq_hi"]]
    # Two judges: Krippendorff's alpha as the run report computes it, over this evaluation's episodes.
    run = RunDir(played.imported)
    mine = [e for e in run.read_episodes() if e.subject == MODEL]
    judged = [j for j in read_records(run.judgements, EpisodeJudgement) if j.key in {e.key for e in mine}]
    alphas = {**mdep_alphas(mine, ["judge-0", "judge-1"]), **holistic_alphas(judged, ["judge-0", "judge-1"])}
    assert len(alphas) == 10
    for name, alpha in alphas.items():
        shown = epmq[f"emobench/judge_agreement_{name}"].value
        assert (alpha is None and math.isnan(shown)) or shown == alpha, name


def test_inspect_view_shows_the_conversation_and_a_turns_verdict(played: Played, chromium: Path, tmp_path: Path) -> None:  # noqa: F811
    """`inspect view bundle` of the log, served on loopback and opened in Chromium: the sample's
    transcript holds the conversation and turn 1's info event with the panel's verdict."""
    bundle = ["view", "bundle", "--log-dir", str(played.log.parent), "--output-dir", str(tmp_path / "b")]
    done, _ = inspect_cli("", tmp_path, *bundle)
    assert done.returncode == 0, done.stderr[-2000:]
    episode = next(e for e in RunDir(played.imported).read_episodes() if e.case_id == CASES[0])
    page_of = f"#/tasks/{played.log.name}/samples/sample/{CASES[0]}%7C0/1/"
    with static_server(tmp_path / "b") as url, Browser(chromium, tmp_path / "profile", size=(1200, 9000)) as browser:
        page = browser.new_page()
        page.goto(url + page_of)
        text = "document.body.innerText.toLowerCase()"
        page.wait_for(f"{text}.includes('emobench turn 1') && {text}.includes('\"verdict\"')")
        shown = str(page.eval("document.body.innerText"))
        page.screenshot(Path("/tmp/emobench-inspect-view.png"))
    assert episode.turns[0].user.message in shown and episode.turns[0].reply in shown
    turn_one = shown[shown.lower().index("emobench turn 1"):]
    assert '"vector": [' in turn_one and '"valid": true' in turn_one and '"judge": "judge-0"' in turn_one


def test_import_refuses_another_task_and_a_truncated_log(played: Played, tmp_path: Path) -> None:
    as_json = tmp_path / "log.json"  # inspect's other log format reads alike
    write_eval_log(read_eval_log(str(played.log)), str(as_json))
    assert import_inspect([as_json], tmp_path / "from-json", root=ROOT)["episodes"] == len(CASES)
    other = read_eval_log(str(played.log))
    other.eval.task = "someone/else"
    write_eval_log(other, str(tmp_path / "other.eval"))
    cut = tmp_path / "cut.eval"
    cut.write_bytes(played.log.read_bytes()[: played.log.stat().st_size // 2])
    for log, said in ((tmp_path / "other.eval", "eval.task: 'someone/else' is not emobench's task"),
                      (cut, "not a readable inspect log")):
        code, out, err = emobench("import", "inspect", str(log), "--out", str(tmp_path / "run"))
        assert code == 2 and out == "" and err.count("\n") == 1 and said in err and str(log) in err, err
        assert not (tmp_path / "run").exists()


def test_a_failing_provider_ends_samples_as_emobench_does_and_retry_replays_only_the_failed(tmp_path: Path) -> None:
    """demo4-01: every simulated user move malformed (not JSON), so the episode stops as the loop stops
    it (simulator_invalid after its retries), one 429 on the way. demo4-02: from turn 2, 500s past
    inspect's retries, so the sample ends in an error the log names. eval-retry then plays demo4-02
    alone."""
    first, second = _opening(CASES[0]), _opening(CASES[1])
    state = PlannedState(responder=lambda body: "not json" if _is_move(body) and first in json.dumps(body)
                         else default_responder(body))
    refused: set[str] = set()

    def plan(body: dict[str, Any]) -> str | None:
        text = json.dumps(body["messages"])
        if second in text and body.get("response_format") is None and len(body["messages"]) > 1:
            return "500"  # demo4-02's subject, from turn 2 on
        if first in text and "429" not in refused:
            refused.add("429")
            return "429"
        return None

    state.plan = plan
    config = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9/v1", cases=CASES, seeds=[0])
    with FakeOpenAIServer(state) as server:
        done, _ = inspect_eval(server.base_url, tmp_path / "logs", tmp_path, "-T", f"config={config}",
                               "--max-retries", "1", "-M", "max_retries=0", "--no-fail-on-error",
                               "--model-role", f"director={MODEL}")  # an LLM director the config does not have
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        log_path = only_log(tmp_path / "logs")
        log = read_eval_log(str(log_path))
        samples = {s.id: s for s in log.samples or []}
        ended = Episode.model_validate(samples[f"{CASES[0]}|0"].store["emobench:episode"])
        assert ended.stop_reason == "simulator_invalid" and len(ended.turns) == 1
        assert ended.templates["director"].startswith("director@") and ended.turns[0].director is not None
        assert log.eval.metadata["emobench_manifest"]["prompt_versions"]["director"] != "rule"  # type: ignore[index]
        moves = [c.error or "" for c in ended.calls if c.role == "user"]
        assert len(moves) == 3 and all(error.startswith("not JSON") for error in moves)  # simulator_retries 2
        stopped = [e.data for e in samples[f"{CASES[0]}|0"].events if e.event == "info" and e.source == "emobench episode"]
        assert [d["stop_reason"] for d in stopped] == ["simulator_invalid"]  # type: ignore[index]
        failed = samples[f"{CASES[1]}|0"]
        assert failed.error is not None and "InternalServerError" in failed.error.message
        assert "emobench:episode" not in failed.store
        # Mid-sample: turn 1 was played and shown before the failure.
        assert [e.source for e in failed.events if e.event == "info"] == ["emobench turn 1"]
        assert state.injected["429"] == 1 and state.injected["500"] == 2  # inspect's one retry (the SDK's own are off: -M)
        shutil.copy(log_path, tmp_path / "first.eval")

        state.plan = None
        state.requests.clear()
        retried, _ = inspect_retry(server.base_url, log_path, tmp_path)
        assert retried.returncode == 0, retried.stdout[-3000:] + retried.stderr[-3000:]
        assert state.requests and not any(first in json.dumps(r["body"]["messages"]) for r in state.requests)
    logs = sorted((tmp_path / "logs").glob("*.eval"), key=lambda p: p.stat().st_mtime)
    # Both logs, as a user who kept them passes them: every sample finished in one of them.
    code, _, err = emobench("import", "inspect", str(tmp_path / "first.eval"), str(logs[-1]), "--out", str(tmp_path / "run"))
    assert code == 0 and err == f"imported 2 episode(s) from 2 inspect log(s) into {tmp_path / 'run'}\n", err
    assert {e.case_id: e.stop_reason for e in RunDir(tmp_path / "run").read_episodes()}[CASES[0]] == "simulator_invalid"
    # The first log alone: demo4-02 is left out and counted, with why.
    first_only = import_inspect([tmp_path / "first.eval"], tmp_path / "first-run", root=ROOT)
    assert first_only["episodes"] == 1 and [n for n in first_only["unfinished"].values()] == [1]
    assert "InternalServerError" in next(iter(first_only["unfinished"]))


def _opening(case_id: str) -> str:
    from emobench.registry import load_registry

    return json.dumps(load_registry(ROOT).case(case_id).opening)[1:-1]


def _is_move(body: dict[str, Any]) -> bool:
    return (body.get("response_format") or {}).get("json_schema", {}).get("name") == "user_move"


def test_task_parameters_as_inspect_hands_them_over(tmp_path: Path) -> None:
    from inspect_ai._util.error import PrerequisiteError

    from emobench.inspect_task.task import emobench as emobench_task
    from emobench.inspect_task.task import task_config

    config = task_config("configs/demo.yaml", "test", ["0", "1", "2"], 4, None, "zh", ["testzh-01", "testzh-02"], None)
    assert (config.split, config.seeds, config.max_turns, config.min_turns) == ("test-zh", [0, 1, 2], 4, 2)
    assert config.cases == ["testzh-01", "testzh-02"]
    # A bad parameter is one line in the task's words (inspect prints this error without a traceback).
    with pytest.raises(PrerequisiteError) as bad:
        emobench_task(config="configs/demo.yaml", seeds=["a", "b"])
    assert bad.value.message == "error: -T seeds: 'a,b' is not a comma-separated list of integers"
    with pytest.raises(PrerequisiteError, match=r"nope.yaml: cannot read config"):
        emobench_task(config=str(tmp_path / "nope.yaml"))
    # The demo config's roles are vllm:embedded, which only `emobench run` starts: refused before anything plays.
    with pytest.raises(PrerequisiteError) as unplayable:
        emobench_task(config="configs/demo.yaml")
    assert unplayable.value.message == ("error: config: user.binding: vllm:embedded is started by `emobench run` only; "
                                        "name the role for inspect instead (--model-role user=vllm/MODEL)")


def test_the_light_install_is_told_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [n for n in sys.modules if n == "inspect_ai" or n.startswith("inspect_ai.")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    monkeypatch.delitem(sys.modules, "emobench.importers.inspect_log", raising=False)
    code, _, err = emobench("import", "inspect", str(tmp_path / "x.eval"), "--out", str(tmp_path / "run"))
    assert code == 2 and err == 'error: inspect_ai: not installed: pip install "emobench[inspect]"\n', err


def test_prompt_cache_tokens_are_counted_as_emobench_counts_them() -> None:
    """A long prompt sent twice: the second time the provider reports most of it cached. Through
    inspect the call records the tokens as emobench's own client does (prompt_tokens counts the
    cached ones too)."""
    import asyncio

    from inspect_ai.model import get_model

    from emobench.endpoints.client import OpenAICompatClient
    from emobench.episode.roles import role_caller
    from emobench.inspect_task.roles import inspect_caller
    from emobench.records import RoleInfo, Sampling

    sampling = Sampling(temperature=0.0, max_tokens=32)
    messages = [{"role": "system", "content": "You listen. " * 600}, {"role": "user", "content": "Hello."}]

    async def twice(url: str) -> list[tuple[int, int]]:
        client = OpenAICompatClient(url, "fake-model")
        own = role_caller("subject", client, RoleInfo(label="x", model="fake-model", endpoint=url, sampling=sampling))
        async with get_model("openai-api/fake/fake-model", base_url=url, api_key="none", memoize=False) as model:
            through_inspect = inspect_caller("subject", model, sampling)
            calls = [await caller.ask(messages, 1, None) for caller in (through_inspect, through_inspect, own)]
        await client.aclose()
        return [(c.prompt_tokens, c.cached_prompt_tokens) for c in calls]

    with FakeOpenAIServer(PlannedState(prompt_cache=True)) as server:
        first, second, own = asyncio.run(twice(server.base_url))
    assert first[1] == 0 and first[0] > 1024 and second[0] == first[0] == own[0] and second[1] == own[1] > 1024


def test_the_entry_point_names_the_task() -> None:
    from importlib.metadata import entry_points

    (point,) = [p for p in entry_points(group="inspect_ai") if p.name == "emobench"]
    assert point.value == "emobench.inspect_task._registry"
