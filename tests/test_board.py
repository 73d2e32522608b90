"""`emobench board submit|verify` on real runs (the runner against the loopback fake server):
honest runs of eight kinds verify; the forgery kit's classes are caught; bad input exits 2."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.board.hashing import canonical_json, record_sha256
from emobench.board.protocol import load_protocol
from emobench.board.verify import verify
from emobench.registry import Registry
from tests.board_forgeries import CLASSES
from tests.board_forgery_kit import markdown, run_kit
from tests.board_heldout import HELD_OUT
from tests.fake_openai import FakeOpenAIServer, FakeState
from tests.gate_support import emobench

CASES = ["test4-01", "test4-02"]
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


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Eight kinds of honest run, each submitted once."""
    root = tmp_path_factory.mktemp("board")
    runs: dict[str, Path] = {}
    with FakeOpenAIServer(FakeState()) as server:
        url = server.base_url
        runs["one judge"] = _run(root, "one", _config(root / "one.yaml", url))
        runs["two judges"] = _run(root, "two", _config(root / "two.yaml", url, judges=2))
        runs["three judges"] = _run(root, "three", _config(root / "three.yaml", url, judges=3))
        runs["two subjects"] = _run(root, "subjects", _config(root / "subjects.yaml", url, subjects=2))
        runs["companion prompt"] = _run(root, "companion", _config(root / "companion.yaml", url,
                                                                   subject_system_prompt="companion"))
        runs["scripted reference"] = _run(root, "scripted", _config(
            root / "scripted.yaml", url, references=[{"binding": "scripted:platitude"}]))
        shards = _config(root / "shards.yaml", url, judges=2)
        parts = [_run(root, f"shard{i}", shards, "--shard", f"{i}/2") for i in (0, 1)]
        code, _, err = emobench("merge", *map(str, parts), "--out", str(root / "runs" / "merged"))
        assert code == 0, err
        runs["merged shards"] = root / "runs" / "merged"
        server.state.fault_rate, server.state.fault_kinds = 0.25, ("500", "malformed", "429")
        runs["faults and retries"] = _run(root, "faults", _config(root / "faults.yaml", url, judges=2))
    (root / "protocol.yaml").write_text(yaml.safe_dump(PROTOCOL))
    subs = {}
    for kind, run in runs.items():
        out = root / "subs" / run.name
        code, _, err = emobench("board", "submit", str(run), "-o", str(out), "--protocol", str(root / "protocol.yaml"))
        assert code == 0, f"{kind}: {err}"
        subs[kind] = out
    return subs


@pytest.fixture(scope="module")
def protocol(honest: dict[str, Path]) -> Path:
    return next(iter(honest.values())).parent.parent / "protocol.yaml"


def test_every_honest_kind_verifies(honest: dict[str, Path], protocol: Path, registry: Registry) -> None:
    assert len(honest) >= 8
    for kind, folder in honest.items():
        verdict = verify(folder, load_protocol(protocol), registry)
        assert verdict.ok, f"{kind}: {[p.line() for p in verdict.problems[:5]]}"
        assert verdict.episodes >= len(CASES) * 2
    record = json.loads((honest["one judge"] / "submission.json").read_text())
    assert record["provenance"]["roles"]["judges"][0]["model"] == "judge-model-0"
    assert record["provenance"]["prompt_versions"]["judge"]


def test_forgery_kit_catches_every_class(honest: dict[str, Path], protocol: Path, registry: Registry,
                                         tmp_path: Path) -> None:
    assert len(CLASSES) >= 12 and all(len(c.variants(random.Random(0))) >= 5 for c in CLASSES)
    table = run_kit(honest["two judges"], load_protocol(protocol), registry, tmp_path, CLASSES)
    print(markdown(table))
    for cls in CLASSES:
        hits, n, missed = table[cls.name]
        assert hits / n >= cls.floor, f"{cls.name}: {hits}/{n}, missed {missed}"


def test_held_out_forgeries(honest: dict[str, Path], protocol: Path, registry: Registry, tmp_path: Path) -> None:
    table = run_kit(honest["two judges"], load_protocol(protocol), registry, tmp_path, HELD_OUT, seed=1)
    print(markdown(table))
    hits = sum(h for h, _, _ in table.values())
    planted = sum(n for _, n, _ in table.values())
    assert hits / planted >= 0.8, markdown(table)


def test_off_protocol_run_is_refused(honest: dict[str, Path], registry: Registry, tmp_path: Path) -> None:
    strict = tmp_path / "strict.yaml"
    strict.write_text(yaml.safe_dump({**PROTOCOL, "min_judges": 2}))
    verdict = verify(honest["one judge"], load_protocol(strict), registry)
    assert [p.field for p in verdict.problems] == ["config.panel.judges"]


def test_bad_input_is_one_line_and_exit_2(honest: dict[str, Path], protocol: Path, tmp_path: Path) -> None:
    code, _, err = emobench("board", "verify", str(tmp_path / "nope"), "--protocol", str(protocol))
    assert code == 2 and err.count("\n") == 1 and "nope" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**PROTOCOL, "seeds": "all"}))
    code, _, err = emobench("board", "verify", str(honest["one judge"]), "--protocol", str(bad))
    assert code == 2 and "bad.yaml: seeds" in err and "Traceback" not in err
    leaky = tmp_path / "leaky"
    shutil.copytree(honest["one judge"], leaky)
    (leaky / "submission.json").unlink()
    manifest = json.loads((leaky / "manifest.json").read_text())
    manifest["config"]["local_split"] = None
    manifest["notes"] = "weights at /home/alice/ckpt"
    (leaky / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = emobench("board", "submit", str(leaky), "-o", str(tmp_path / "out"), "--protocol", str(protocol))
    assert code == 2 and "manifest.json: notes" in err and "local path" in err
    assert not (tmp_path / "out").exists()
    code, _, err = emobench("board", "verify", str(honest["one judge"]), "--protocol", str(protocol))
    assert code == 0, err


def test_a_refused_submission_exits_1_naming_file_and_field(honest: dict[str, Path], protocol: Path,
                                                            tmp_path: Path) -> None:
    forged = tmp_path / "forged"
    shutil.copytree(honest["one judge"], forged)
    with open(forged / "episodes.jsonl", "ab") as fh:
        fh.write(b"\n")
    code, _, err = emobench("board", "verify", str(forged), "--protocol", str(protocol))
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
    code, _, err = emobench("board", "verify", str(forged), "--protocol", str(protocol))
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
        code, out, err = emobench("board", "verify", str(honest["two judges"]), "--protocol", str(protocol),
                                  "--spot-check", "2", *judges)
        assert code == 0 and "MDEP items agree (100%), the record lifts +0.00" in out, err
        code, out, err = emobench("board", "verify", str(forged), "--protocol", str(protocol), "--spot-check", "2", *judges)
        assert code == 1 and "[spot-check] episodes.jsonl" in err and "P.progress" in err
        assert "83% of the items agree" in err and "+2.00 levels per verdict kinder" in err
        assert before.spot_check_max_lift < 2.0
        code, _, err = emobench("board", "verify", str(forged), "--protocol", str(protocol), "--spot-check", "1",
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
    code, _, err = emobench("leaderboard", "publish", str(board), "--repo", "you/emobench-board")
    assert code == 2 and "HF_TOKEN: not set" in err  # no token, no upload, one line
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
