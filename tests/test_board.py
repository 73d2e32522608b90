"""`emobench submit|verify` on real runs (the runner against the loopback fake server):
honest runs of eight kinds verify; the forgery kit's classes are caught; bad input exits 2."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.board.hashing import canonical_json, record_sha256
from emobench.board.protocol import load_protocol
from emobench.board.verify import verify
from emobench.registry import Registry
from tests.board_forgeries import CLASSES
from tests.board_forgeries_pairwise import PAIRWISE_CLASSES
from tests.board_forgery_kit import markdown, run_kit
from tests.board_heldout import HELD_OUT
from tests.fake_openai import FakeOpenAIServer, FakeState
from tests.gate_support import emobench

CASES = ["test4-01", "test4-02"]
DECLARED = ("--model-name", "Subject 1B", "--provider", "self-hosted", "--date", "2026-12-01")
PINS = {"simulator": "openai:user-model@http://board/v1",
        "judges": ["openai:judge-model-0@http://board/v1", "openai:judge-model-1@http://board/v1"]}
PROTOCOL = {"version": 1, "split": "test", "cases": CASES, "seeds": [0, 1], "max_turns": 3, "min_turns": 2,
            "scoring_profile": "emobench", "min_judges": 1}


def _config(path: Path, url: str, *, judges: int = 1, subjects: int = 1, **extra: object) -> Path:
    def role(model: str, label: str | None = None) -> dict[str, object]:
        return {"binding": f"openai:{model}@{url}", **({"label": label} if label else {})}
    data = {"subjects": [role("subject-model" if i == 0 else f"subject-model-{i}", f"subject-{i}") for i in range(subjects)],
            "user": role("user-model"), "judges": [role(f"judge-model-{i}", f"judge-{i}") for i in range(judges)],
            "split": "test", "cases": CASES, "seeds": [0, 1], "max_turns": 3, "min_turns": 2, **extra}
    path.write_text(yaml.safe_dump(data))
    return path


def _run(root: Path, name: str, config: Path, *extra: str) -> Path:
    code, _, err = emobench("run", "--config", str(config), "--out", str(root / "runs"), "--run-id", name,
                            "--no-progress", *extra)
    assert code == 0, err
    return root / "runs" / name


def _interrupt(run: Path) -> None:
    """The run as a crash after its first episode left it: one episode and its judgement, no scores."""
    first = (run / "episodes.jsonl").read_bytes().splitlines(True)[0]
    (run / "episodes.jsonl").write_bytes(first)
    key = json.loads(first)["key"]
    judged = (run / "judgements.jsonl").read_bytes().splitlines(True)
    (run / "judgements.jsonl").write_bytes(b"".join(line for line in judged if json.loads(line)["key"] == key))
    for name in ("scores.parquet", "leaderboard.parquet", "report.json"):
        (run / name).unlink()


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Twelve kinds of honest run, each submitted once."""
    root = tmp_path_factory.mktemp("board")
    runs: dict[str, Path] = {}
    with FakeOpenAIServer(FakeState()) as server:
        url = server.base_url
        runs["one judge"] = _run(root, "one", _config(root / "one.yaml", url))
        runs["two judges"] = _run(root, "two", _config(root / "two.yaml", url, judges=2))
        runs["three judges"] = _run(root, "three", _config(root / "three.yaml", url, judges=3))
        runs["two subjects"] = _run(root, "subjects", _config(root / "subjects.yaml", url, subjects=2))
        runs["two subjects, two judges"] = _run(root, "pairs", _config(root / "pairs.yaml", url, subjects=2, judges=2))
        runs["companion prompt"] = _run(root, "companion", _config(root / "companion.yaml", url,
                                                                   subject_system_prompt="companion"))
        runs["scripted reference"] = _run(root, "scripted", _config(
            root / "scripted.yaml", url, references=[{"binding": "scripted:platitude"}]))
        shards = _config(root / "shards.yaml", url, judges=2)
        parts = [_run(root, f"shard{i}", shards, "--shard", f"{i}/2") for i in (0, 1)]
        code, _, err = emobench("merge", *map(str, parts), "--out", str(root / "runs" / "merged"))
        assert code == 0, err
        runs["merged shards"] = root / "runs" / "merged"
        runs["shards submitted together"] = parts  # type: ignore[assignment]  # submit merges them itself
        runs["adaptive"] = _run(root, "adaptive", _config(root / "adaptive.yaml", url, judges=2), "--stop-when",
                                "calls<=30", "--wave", "1", "--no-cache")
        runs["resumed"] = _run(root, "resumed", _config(root / "resumed.yaml", url, judges=2))
        _interrupt(runs["resumed"])
        code, _, err = emobench("run", "--resume", str(runs["resumed"]), "--no-progress")
        assert code == 0, err
        server.state.fault_rate, server.state.fault_kinds = 0.25, ("500", "malformed", "429")
        runs["faults and retries"] = _run(root, "faults", _config(root / "faults.yaml", url, judges=2))
    (root / "protocol.yaml").write_text(yaml.safe_dump(PROTOCOL))
    subs = {}
    for kind, run in runs.items():
        parts = run if isinstance(run, list) else [run]
        out = root / "subs" / kind.replace(" ", "-")
        code, _, err = emobench("submit", *map(str, parts), "--out", str(out), "--protocol", str(root / "protocol.yaml"),
                                *DECLARED)
        assert code == 0, f"{kind}: {err}"
        subs[kind] = out
    return subs


@pytest.fixture(scope="module")
def protocol(honest: dict[str, Path]) -> Path:
    return next(iter(honest.values())).parent.parent / "protocol.yaml"


@pytest.fixture(scope="module")
def pinned(protocol: Path) -> Path:
    """The test protocol with the two-judge run's simulator and panel pinned, as configs/board.yaml pins the board's."""
    path = protocol.parent / "pinned.yaml"
    path.write_text(yaml.safe_dump({**PROTOCOL, **PINS}))
    return path


def test_every_honest_kind_verifies(honest: dict[str, Path], protocol: Path, registry: Registry) -> None:
    assert len(honest) >= 12
    for kind, folder in honest.items():
        verdict = verify(folder, load_protocol(protocol), registry)
        assert verdict.ok, f"{kind}: {[p.line() for p in verdict.problems[:5]]}"
        assert verdict.episodes >= len(CASES) * 2 or (kind == "adaptive" and verdict.episodes == 2)  # one case: stopped
    record = json.loads((honest["one judge"] / "SUBMISSION.json").read_text())
    assert record["provenance"]["roles"]["judges"][0]["model"] == "judge-model-0"
    assert record["provenance"]["prompt_versions"]["judge"] and record["provenance"]["emobench_version"]
    assert record["provenance"]["bindings"]["user"].startswith("openai:user-model@")
    assert record["declaration"] == {"model_name": "Subject 1B", "provider": "self-hosted", "date": "2026-12-01"}
    episodes = (honest["one judge"] / "episodes.jsonl").read_bytes().splitlines()
    assert len(record["files"]["episodes.jsonl"]["records"]) == len(episodes) and len(record["root"]) == 64
    assert "/tmp/" not in json.dumps(record)  # nothing of the submitter's machine
    together = json.loads((honest["shards submitted together"] / "manifest.json").read_text())
    assert together["merged_from"] == ["shard0", "shard1"]


def test_forgery_kit_catches_every_class(honest: dict[str, Path], pinned: Path, registry: Registry,
                                         tmp_path: Path) -> None:
    assert len(CLASSES) >= 12 and all(len(c.variants(random.Random(0))) >= 5 for c in CLASSES)
    table = run_kit(honest["two judges"], load_protocol(pinned), registry, tmp_path, CLASSES)
    # The comparisons' forgeries need two subjects: planted in the two-subject, two-judge submission.
    table |= run_kit(honest["two subjects, two judges"], load_protocol(pinned), registry, tmp_path, PAIRWISE_CLASSES)
    for cls in [*CLASSES, *PAIRWISE_CLASSES]:
        hits, n, missed, _ = table[cls.name]
        assert hits / n >= cls.floor, f"{cls.name}: {hits}/{n}, missed {missed}"
    from emobench.run.runner import ROOT

    assert markdown(table) in (ROOT / "docs" / "board.md").read_text(), markdown(table)  # the table the docs show


def test_held_out_forgeries(honest: dict[str, Path], pinned: Path, registry: Registry, tmp_path: Path) -> None:
    table = run_kit(honest["two judges"], load_protocol(pinned), registry, tmp_path, HELD_OUT, seed=1)
    print(markdown(table))
    hits = sum(row[0] for row in table.values())
    planted = sum(row[1] for row in table.values())
    assert hits / planted >= 0.8, markdown(table)


def test_off_protocol_run_is_refused(honest: dict[str, Path], registry: Registry, tmp_path: Path) -> None:
    strict = tmp_path / "strict.yaml"
    strict.write_text(yaml.safe_dump({**PROTOCOL, "min_judges": 2}))
    verdict = verify(honest["one judge"], load_protocol(strict), registry)
    assert [p.field for p in verdict.problems] == ["config.panel.judges"]


def test_bad_input_is_one_line_and_exit_2(honest: dict[str, Path], protocol: Path, tmp_path: Path) -> None:
    code, _, err = emobench("verify", str(tmp_path / "nope"), "--protocol", str(protocol))
    assert code == 2 and err.count("\n") == 1 and "nope" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**PROTOCOL, "seeds": "all"}))
    code, _, err = emobench("verify", str(honest["one judge"]), "--protocol", str(bad))
    assert code == 2 and "bad.yaml: seeds" in err and "Traceback" not in err
    leaky = tmp_path / "leaky"
    shutil.copytree(honest["one judge"], leaky)
    (leaky / "SUBMISSION.json").unlink()
    manifest = json.loads((leaky / "manifest.json").read_text())
    manifest["config"]["local_split"] = None
    manifest["notes"] = "weights at /home/alice/ckpt"
    (leaky / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = emobench("submit", str(leaky), "-o", str(tmp_path / "out"), "--protocol", str(protocol), *DECLARED)
    assert code == 2 and "manifest.json: notes" in err and "local path" in err
    assert not (tmp_path / "out").exists()
    code, _, err = emobench("verify", str(honest["one judge"]), "--protocol", str(protocol))
    assert code == 0, err


def test_a_refused_submission_exits_1_naming_file_and_field(honest: dict[str, Path], protocol: Path,
                                                            tmp_path: Path) -> None:
    forged = tmp_path / "forged"
    shutil.copytree(honest["one judge"], forged)
    with open(forged / "episodes.jsonl", "ab") as fh:
        fh.write(b"\n")
    code, _, err = emobench("verify", str(forged), "--protocol", str(protocol))
    assert code == 1 and "[integrity] episodes.jsonl: sha256" in err


@pytest.mark.parametrize(("file", "edit", "says"), [
    ("scores.parquet", lambda b: b[:-40] + b"x" * 40, "[integrity] scores.parquet: unreadable"),
    ("manifest.json", lambda b: json.dumps({**json.loads(b), "roles": ["a"]}).encode(), "manifest.json: roles: not the"),
    ("manifest.json", lambda b: b"[1, 2]", "manifest.json: roles"),
    ("episodes.jsonl", lambda b: b + b"{not json\n", "episodes.jsonl: line"),
    ("judgements.jsonl", lambda b: b.replace(b'"holistic"', b'"holistix"', 1), "judgements.jsonl: line 1"),
])
def test_unreadable_records_rehashed_are_one_line_each(honest: dict[str, Path], protocol: Path, tmp_path: Path,
                                                       file: str, edit: Callable[[bytes], bytes], says: str) -> None:
    from tests.board_forgery_kit import rehash

    forged = tmp_path / "forged"
    shutil.copytree(honest["two subjects"], forged)
    (forged / file).write_bytes(edit((forged / file).read_bytes()))
    rehash(forged, honest["two subjects"])
    code, _, err = emobench("verify", str(forged), "--protocol", str(protocol))
    assert code == 1 and says in err and "Traceback" not in err, err


_scalars = (st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text())
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                     max_leaves=20)


@given(_json)
@settings(max_examples=60, deadline=None)
def test_canonical_json_round_trips_and_ignores_key_order(value: object) -> None:
    assert json.loads(canonical_json(value)) == value
    if isinstance(value, dict):
        assert record_sha256(dict(reversed(list(value.items())))) == record_sha256(value)


@given(st.dictionaries(st.text(min_size=1), st.integers(), min_size=1), st.data())
@settings(max_examples=60, deadline=None)
def test_any_changed_value_changes_the_digest(value: dict[str, int], data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(sorted(value)))
    assert record_sha256({**value, key: value[key] + 1}) != record_sha256(value)


def test_leaderboard_add_keeps_verified_submissions_only(honest: dict[str, Path], protocol: Path, tmp_path: Path) -> None:
    import duckdb
    import pandas as pd

    board = tmp_path / "board"
    code, out, err = emobench("leaderboard", "add", str(honest["one judge"]), "--board", str(board),
                              "--protocol", str(protocol), "--n-boot", "50")
    assert code == 0 and "rests on 1 verified submission" in out, err
    code, _, err = emobench("leaderboard", "add", str(honest["two subjects"]), "--board", str(board),
                            "--protocol", str(protocol), "--n-boot", "50")
    assert code == 2 and "['subject-0'] on the board already" in err  # one row per subject
    table = pd.read_parquet(board / "leaderboard.parquet")
    assert set(table["subject"]) == {"subject-0"}
    import pyarrow.parquet as pq

    from emobench.publish.provenance import read_metadata

    root = json.loads((honest["one judge"] / "SUBMISSION.json").read_text())["root"]
    seal = read_metadata(pq.read_schema(board / "leaderboard.parquet"))["verifications"]["one"]
    assert seal["root"] == root and seal["verifier_version"] and seal["verified_at"] and seal["protocol_version"] == 1
    assert root in (board / "index.html").read_text() and root in (board / "README.md").read_text()
    rows = duckdb.sql(f"select count(*) from '{board / 'cases.parquet'}'").fetchall()[0]
    assert rows == (len(CASES),)
    forged = tmp_path / "forged"
    shutil.copytree(honest["three judges"], forged)
    (forged / "scores.parquet").write_bytes((forged / "scores.parquet").read_bytes() + b"x")
    before = (board / "leaderboard.parquet").read_bytes()
    code, _, err = emobench("leaderboard", "add", str(forged), "--board", str(board), "--protocol", str(protocol))
    assert code == 1 and "the board is unchanged" in err
    assert (board / "leaderboard.parquet").read_bytes() == before and len(list((board / "submissions").iterdir())) == 1


def test_publish_dry_run_stages_a_card_datasets_loads_and_writes_no_token(
        honest: dict[str, Path], protocol: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    board = tmp_path / "board"
    code, _, err = emobench("leaderboard", "add", str(honest["two judges"]), "--board", str(board),
                            "--protocol", str(protocol), "--n-boot", "50")
    assert code == 0, err
    token = "hf_" + "NeverWrittenAnywhere" * 2
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    staged = tmp_path / "stage"
    code, out, err = emobench("leaderboard", "publish", str(board), "--repo", "someone/emobench-board",
                              "--stage", str(staged), "--dry-run")
    assert code == 0, err
    assert "nothing uploaded" in out and "README.md" in out and "leaderboard.parquet" in out
    assert any(name.startswith("submissions/") for name in out.split())
    assert not any(token.encode() in p.read_bytes() for p in staged.rglob("*") if p.is_file())
    card = (staged / "README.md").read_text()
    assert "config_name: leaderboard" in card and "subject-0" in card
    # A cache of its own: datasets 5.2 served another folder's rows, cached under the same folder name.
    cache = str(tmp_path / "hf-cache")
    leaderboard = datasets.load_dataset(str(staged), "leaderboard", split="train", cache_dir=cache)
    cases = datasets.load_dataset(str(staged), "cases", split="train", cache_dir=cache)
    assert set(leaderboard["subject"]) == {"subject-0"} and "epmq_lo" in leaderboard.column_names
    assert len(cases) == len(CASES)


_LEAKS = st.sampled_from(["sk-" + "Ab3" * 8, "hf_" + "q" * 24, "/home/dana/ckpt", "C:\\Users\\eve", "Bearer " + "t0k" * 6,
                          "file:///srv/x", "/Users/fay/m"])


@given(_json, _LEAKS, st.text(max_size=8), st.booleans())
@settings(max_examples=60, deadline=None)
def test_a_leak_anywhere_in_a_json_line_is_found_and_named(value: object, leak: str, prefix: str, escape: bool) -> None:
    import tempfile

    import orjson

    from emobench.board.package import file_leaks

    record = {"ok": value, "deep": [{"text": prefix + " " + leak}]}
    line = orjson.dumps(record)
    if escape:  # JSON may write "/" as "\/": the scan must not be fooled by it
        line = line.replace(b"/", b"\\/")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.jsonl"
        path.write_bytes(orjson.dumps({"clean": value}) + b"\n" + line + b"\n")
        found = list(file_leaks(path))
    assert any(field == "line 2: deep[0].text" for field, _ in found), found


def test_a_consistent_fabrication_passes_verify_and_fails_the_spot_check(
        honest: dict[str, Path], protocol: Path, registry: Registry, tmp_path: Path) -> None:
    from tests.board_forgeries import fabricate

    source = tmp_path / "sub"
    shutil.copytree(honest["two judges"], source)
    fabricate(source, registry)
    forged = tmp_path / "sub-fabricated"
    verdict = verify(forged, load_protocol(protocol), registry)
    assert verdict.ok, [p.line() for p in verdict.problems[:3]]  # the limit of recomputation, on purpose
    before = load_protocol(protocol)
    with FakeOpenAIServer(FakeState()) as server:  # the judges, asked again where the verifier reaches them
        judges = [arg for i in range(2) for arg in ("--judge", f"openai:judge-model-{i}@{server.base_url}")]
        code, out, err = emobench("verify", str(honest["two judges"]), "--protocol", str(protocol),
                                  "--spot-check", "2", *judges)
        assert code == 0 and "MDEP items agree (100%), the record lifts +0.00" in out, err
        code, out, err = emobench("verify", str(forged), "--protocol", str(protocol), "--spot-check", "2", *judges)
        assert code == 1 and "[spot-check] episodes.jsonl" in err and "P.progress" in err
        assert "83% of the items agree" in err and "+2.00 levels per verdict kinder" in err
        assert before.spot_check_max_lift < 2.0
        code, _, err = emobench("verify", str(forged), "--protocol", str(protocol), "--spot-check", "1",
                                "--judge", f"openai:other-model@{server.base_url}", "--judge", "openai:judge-model-1@x")
        assert code == 2 and "'other-model' is not the recorded judge 'judge-model-0'" in err


def test_publish_uploads_the_staged_files_to_a_loopback_hub_with_the_token_in_the_header_only(
        honest: dict[str, Path], protocol: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    from tests.fake_hub import FakeHub, HubState

    board = tmp_path / "board"
    code, _, err = emobench("leaderboard", "add", str(honest["one judge"]), "--board", str(board),
                            "--protocol", str(protocol), "--n-boot", "50")
    assert code == 0, err
    token = "hf_" + "LoopbackOnly" * 3
    code, out, err = emobench("leaderboard", "publish", str(board), "--repo", "you/emobench-board")
    assert code == 0 and "dry run (HF_TOKEN is not set)" in out and "nothing uploaded" in out, err  # no token: a dry run
    monkeypatch.setenv("HF_TOKEN", token)
    code, _, err = emobench("leaderboard", "publish", str(board), "--repo", "you/emobench-board")
    assert code == 3 and "HF_HUB_OFFLINE is set" in err  # offline means offline
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with FakeHub(HubState(token)) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        staged = tmp_path / "stage"
        code, out, err = emobench("leaderboard", "publish", str(board), "--repo", "you/emobench-board",
                                  "--stage", str(staged))
        assert code == 0 and "uploaded to you/emobench-board" in out, err
        sent = {str(p.relative_to(staged)): p.read_bytes() for p in staged.rglob("*") if p.is_file()}
        assert hub.state.files == sent and "README.md" in sent and "leaderboard.parquet" in sent
        assert not any(token.encode() in data for data in sent.values())
        assert {auth for method, _, auth in hub.state.requests if method == "POST"} == {f"Bearer {token}"}
        monkeypatch.setenv("HF_TOKEN", "hf_" + "wrong" * 6)
        code, _, err = emobench("leaderboard", "publish", str(board), "--repo", "you/emobench-board")
        assert code == 3 and f"endpoint {hub.url}" in err and "401" in err and "Traceback" not in err


def test_a_stronger_judge_claimed_everywhere_but_the_config_is_refused(honest: dict[str, Path], protocol: Path,
                                                                        registry: Registry, tmp_path: Path) -> None:
    from tests.board_forgery_kit import Forgery, plant

    def claim(sub: object) -> None:
        sub.manifest["roles"]["judges"][0]["model"] = "gpt-4o"  # type: ignore[attr-defined]
        for ep in sub.episodes:  # type: ignore[attr-defined]
            for call in ep["calls"]:
                if call["role"] == "judge" and call["label"] == "judge-0":
                    call["model"] = "gpt-4o"

    forged = plant(honest["two judges"], Forgery("judge claimed", claim), tmp_path / "forged")
    problems = verify(forged, load_protocol(protocol), registry).problems
    assert [(p.file, p.field) for p in problems] == [("manifest.json", "roles.judges[judge-0].model")]


def test_the_board_protocol_pins_the_split_seeds_and_roles(registry: Registry) -> None:
    from emobench.run.runner import ROOT

    board = load_protocol(ROOT / "configs" / "board.yaml")
    assert board.split == "test" and len(board.seeds) >= 3 and board.registry_version == registry.version("test")
    assert board.simulator and board.judges and len(board.judges) >= 2 and board.min_turns <= board.max_turns


@pytest.mark.parametrize(("pins", "fields"), [
    (PINS, []),
    ({"judges": ["openai:judge-model-1@http://board/v1", "openai:judge-model-0@http://board/v1"]},
     ["config.panel.judges[0].binding", "config.panel.judges[1].binding"]),  # the panel's order
    ({"judges": ["openai:judge-model-0@http://board/v1"]}, ["config.panel.judges"]),  # its size
    ({"judges": ["openai:judge-0@http://board/v1", "openai:judge-1@http://board/v1"]},  # labels are not models
     ["config.panel.judges[0].binding", "config.panel.judges[1].binding"]),
    ({"judges": ["litellm:openai/judge-model-0", "openai:judge-model-1@http://board/v1"]},  # the kind is part of it
     ["config.panel.judges[0].binding"]),
    ({"simulator": "openai:gpt-4o-mini@http://board/v1"}, ["config.user.binding"]),
    ({"seeds": [0]}, ["config.seeds"]),  # a run that played more seeds than the board's
    ({"registry_version": "0" * 64}, ["registry_version"]),
])
def test_the_simulator_panel_and_seeds_are_the_protocols_by_binding(
        honest: dict[str, Path], registry: Registry, tmp_path: Path, pins: dict[str, object], fields: list[str]) -> None:
    path = tmp_path / "pinned.yaml"
    path.write_text(yaml.safe_dump({**PROTOCOL, **pins}))
    problems = verify(honest["two judges"], load_protocol(path), registry).problems
    assert [p.field for p in problems] == fields and all(p.check == "protocol" for p in problems)


def test_integrity_only_skips_the_protocol_but_not_the_rest(honest: dict[str, Path], tmp_path: Path) -> None:
    strict = tmp_path / "strict.yaml"
    strict.write_text(yaml.safe_dump({**PROTOCOL, "simulator": "litellm:openai/gpt-4o-mini"}))
    code, _, err = emobench("verify", str(honest["one judge"]), "--protocol", str(strict))
    assert code == 1 and "[protocol] manifest.json: config.user.binding" in err
    code, out, err = emobench("verify", str(honest["one judge"]), "--protocol", str(strict), "--integrity-only")
    assert code == 0 and "integrity only, protocol not checked" in out, err
    forged = tmp_path / "forged"
    shutil.copytree(honest["one judge"], forged)
    (forged / "episodes.jsonl").write_bytes(b"".join((forged / "episodes.jsonl").read_bytes().splitlines(True)[1:]))
    code, _, err = emobench("verify", str(forged), "--protocol", str(strict), "--integrity-only")
    assert code == 1 and "[integrity] episodes.jsonl: line 1: missing" in err


def _lines(edit: Callable[[list[bytes]], list[bytes]]) -> Callable[[bytes], bytes]:
    return lambda data: b"".join(edit(data.splitlines(True)))


@pytest.mark.parametrize(("edit", "fields"), [
    (_lines(lambda ls: ls[1:]), ["line 1: missing"]),
    (_lines(lambda ls: ls + ls[:1]), ["line {n}: a duplicate of a submitted record"]),
    (_lines(lambda ls: [ls[1], ls[0], *ls[2:]]), ["line 1: reordered"]),
    (_lines(lambda ls: [*ls, b'{"key": "x"}\n']), ["line {n}: added"]),
])
def test_each_record_missing_duplicated_reordered_or_added_is_named(
        honest: dict[str, Path], protocol: Path, registry: Registry, tmp_path: Path,
        edit: Callable[[bytes], bytes], fields: list[str]) -> None:
    forged = tmp_path / "forged"
    shutil.copytree(honest["two subjects"], forged)
    n = len((forged / "episodes.jsonl").read_bytes().splitlines()) + 1
    (forged / "episodes.jsonl").write_bytes(edit((forged / "episodes.jsonl").read_bytes()))
    problems = verify(forged, load_protocol(protocol), registry).problems
    named = [f"{p.field}: {p.message}" for p in problems if p.file == "episodes.jsonl" and p.field != "sha256"]
    assert len(named) == 1 and named[0].startswith(fields[0].format(n=n)), [p.line() for p in problems]


def test_leaderboard_build_writes_a_card_datasets_loads_offline(honest: dict[str, Path], tmp_path: Path) -> None:
    import datasets
    import pyarrow.parquet as pq

    board = tmp_path / "built"
    code, out, err = emobench("leaderboard", "build", str(honest["two subjects"]), "-o", str(board), "--n-boot", "20",
                              "--no-html")
    assert code == 0 and "README.md" in out, err
    cache = str(tmp_path / "hf-cache")
    table = datasets.load_dataset(str(board), "leaderboard", split="train", cache_dir=cache)
    cases = datasets.load_dataset(str(board), "cases", split="train", cache_dir=cache)
    assert set(table["subject"]) == {"subject-0", "subject-1"} and len(cases) == 2 * len(CASES)
    pairs = datasets.load_dataset(str(board), "pairs", split="train", cache_dir=cache).to_pandas()
    verdicts = [json.loads(line) for line in (honest["two subjects"] / "pairwise.jsonl").read_text().splitlines()]
    pooled = pairs[pairs["dimension"] == "all"].iloc[0]
    assert (pooled["subject_a"], pooled["subject_b"]) == ("subject-0", "subject-1") and len(pairs) == 5
    assert pooled["wins_a"] == sum(v["winner"] == "subject-0" for v in verdicts)
    assert pooled["wins_a"] + pooled["wins_b"] + pooled["n_invalid"] == len(verdicts)
    assert 0 < pooled["bt_p_a"] < 1 and list(pooled["run_ids"]) == ["subjects"]
    # One subject: pairs.parquet is written without rows, and the card names no config datasets cannot load.
    single = tmp_path / "single"
    code, _, err = emobench("leaderboard", "build", str(honest["one judge"]), "-o", str(single), "--n-boot", "20",
                            "--no-html")
    assert code == 0, err
    assert pq.read_table(single / "pairs.parquet").num_rows == 0 and "config_name: pairs" not in (
        single / "README.md").read_text()
    with pytest.raises(ValueError, match="pairs"):
        datasets.load_dataset(str(single), "pairs", split="train", cache_dir=cache)


@pytest.mark.parametrize(("edit", "says"), [
    (lambda m: m.pop("adaptive"), "episodes.jsonl: subject-0|"),  # no record: the whole grid is owed
    (lambda m: m["adaptive"].update(rules=["calls<=1000"]), "adaptive.stopped"),  # a rule it did not play by
    (lambda m: m["adaptive"].update(reason="pairs-resolved: every pair's sequence excludes 0"), "adaptive.reason"),
    (lambda m: m["adaptive"].update(wave=2), "adaptive.cases_played"),
])
def test_an_adaptive_run_is_accepted_only_with_its_stopping_record_intact(
        honest: dict[str, Path], protocol: Path, registry: Registry, tmp_path: Path,
        edit: Callable[[dict[str, Any]], object], says: str) -> None:
    from tests.board_forgery_kit import Forgery, plant

    forged = plant(honest["adaptive"], Forgery("stop record", lambda sub: edit(sub.manifest)), tmp_path / "forged")
    problems = verify(forged, load_protocol(protocol), registry).problems
    assert any(says in p.line() and p.check == "coverage" for p in problems), [p.line() for p in problems[:5]]
