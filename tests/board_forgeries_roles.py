"""The forgery classes added for issue 50's list: an edited user move, duplicated episodes, a judge
or the simulator swapped under its label, another registry version, a config edited after the run,
a re-ordered file, and a consistent fabrication re-hashed, which only a spot check catches."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from emobench.config import RunConfig, resolve_panel
from emobench.run.runner import ROOT
from emobench.scoring.schema import SCORES_SCHEMA
from tests.board_forgery_kit import Forgery, ForgeryClass, Submission

N = 5


def _pick(rng: random.Random) -> int:
    return rng.randrange(1 << 30)


def _rehash_config(sub: Submission) -> None:
    """The config hash of the edited config, everywhere it is written: what a forger who ran
    under that config would hold."""
    config_hash = RunConfig.model_validate(resolve_panel(sub.manifest["config"], "manifest", ROOT)).config_hash()
    sub.manifest["config_hash"] = config_hash
    for ep in sub.episodes:
        ep["config_hash"] = config_hash
    for row in sub.rows:
        row["config_hash"] = config_hash


def _user_move(rng: random.Random, call_too: bool = False) -> list[Forgery]:
    def rewrite(pick: int, text: str) -> Forgery:
        def edit(sub: Submission) -> None:
            ep = sub.episodes[pick % len(sub.episodes)]
            turn = ep["turns"][1 + pick % (len(ep["turns"]) - 1)]  # a simulated move, not the case's opening
            old = turn["user"]["message"]
            turn["user"]["message"] = text
            if call_too:  # the simulator's recorded reply edited to match
                for call in ep["calls"]:
                    said = json.loads(call["text"]) if call["role"] == "user" and call["text"] else None
                    if isinstance(said, dict) and said.get("message") == old:
                        call["text"] = json.dumps({**said, "message": text})
        return Forgery(f"user move rewritten{' with its call' if call_too else ''}: {text[:20]}", edit)
    texts = ["Thank you, that really helps.", "I feel so much better now.", "You understand me.",
             "That's exactly what I needed.", "I'm calmer already.", "OK."]
    return [rewrite(_pick(rng), t) for t in rng.sample(texts, N)]


def _user_move_with_call(rng: random.Random) -> list[Forgery]:
    return _user_move(rng, call_too=True)


def _duplicates(rng: random.Random) -> list[Forgery]:
    def dup(pick: int, how: str) -> Forgery:
        def edit(sub: Submission) -> None:
            ep = sub.episodes[pick % len(sub.episodes)]
            row = sub.row(ep["key"])
            if how == "line":
                sub.episodes.insert(pick % len(sub.episodes), ep)
            elif how == "line and row":
                sub.episodes.append(ep)
                sub.rows.append(row)
            elif how == "line, row and judgement":
                sub.episodes.append(ep)
                sub.rows.append(row)
                sub.judgements.append(next(j for j in sub.judgements if j["key"] == ep["key"]))
            else:  # over another episode of the same subject, under the other's key
                other = next(e for e in sub.episodes if e["subject"] == ep["subject"] and e["key"] != ep["key"]
                             and (how == "other case" or e["case_id"] == ep["case_id"]) and
                             (how != "other case" or e["case_id"] != ep["case_id"]))
                copy = {**ep, "key": other["key"], "case_id": other["case_id"], "seed": other["seed"]}
                sub.episodes = [copy if e["key"] == other["key"] else e for e in sub.episodes]
        return Forgery(f"episode duplicated ({how})", edit)
    return [dup(_pick(rng), how) for how in ("line", "line and row", "line, row and judgement", "other case",
                                            "other seed")]


def _judge_swap(rng: random.Random) -> list[Forgery]:
    def swap(which: int, binding: str) -> Forgery:
        def edit(sub: Submission) -> None:
            judges = sub.manifest["config"]["panel"]["judges"]
            old = judges[which]["binding"].split(":", 1)[1].rsplit("@", 1)[0]
            url = judges[which]["binding"].rsplit("@", 1)[1]
            judges[which]["binding"] = binding.replace("URL", url)  # the label stays the protocol's
            model = binding.split(":", 1)[1].rsplit("@", 1)[0]
            sub.manifest["roles"]["judges"][which]["model"] = model
            for ep in sub.episodes:
                for call in ep["calls"]:
                    if call["role"] == "judge" and call["model"] == old:
                        call["model"] = model
            _rehash_config(sub)
        return Forgery(f"judge {which} played by {binding}", edit)
    options = [(1, "openai:cheap-judge@URL"), (0, "openai:gpt-4o-mini@URL"), (1, "openai:judge-model-0@URL"),
               (0, "openai:judge-model-1@URL"), (0, "openai:judge-model-0-distilled@URL"), (1, "openai:tiny@URL")]
    rng.shuffle(options)
    return [swap(w, b) for w, b in options[:N]]


def _simulator_swap(rng: random.Random) -> list[Forgery]:
    def swap(model: str) -> Forgery:
        def edit(sub: Submission) -> None:
            user = sub.manifest["config"]["user"]
            old = user["binding"].split(":", 1)[1].rsplit("@", 1)[0]
            user["binding"] = user["binding"].replace(f":{old}@", f":{model}@")
            sub.manifest["roles"]["user"]["model"] = model
            for ep in sub.episodes:
                ep["roles"]["user"]["model"] = model
                for call in ep["calls"]:
                    if call["role"] == "user":
                        call["model"] = model
            _rehash_config(sub)
        return Forgery(f"simulator played by {model}", edit)
    return [swap(m) for m in rng.sample(["gpt-4o-mini", "easy-user", "subject-model", "judge-model-0", "llama-3-8b",
                                         "user-model-v2"], N)]


def _registry(rng: random.Random) -> list[Forgery]:
    def other(version: str, episodes_too: bool) -> Forgery:
        def edit(sub: Submission) -> None:
            sub.manifest["registry_version"] = version
            if episodes_too:
                for ep in sub.episodes:
                    ep["registry_version"] = version
        return Forgery(f"registry {version[:8]}{' everywhere' if episodes_too else ''}", edit)
    return [other(f"{rng.getrandbits(256):064x}", rng.random() < 0.5) for _ in range(N)]


def _config_edit(rng: random.Random) -> list[Forgery]:
    def change(name: str, value: Any) -> Forgery:
        def edit(sub: Submission) -> None:
            target = sub.manifest["config"]["panel"] if name == "holistic" else sub.manifest["config"]
            target[name] = value  # after the run: the config hash is the one the run was played under
        return Forgery(f"config.{name} = {value!r} after the run", edit)
    options = [("max_turns", 4), ("min_turns", 1), ("reveal_every", 2), ("holistic", False), ("subject_history", "all"),
               ("judge_retries", 9)]
    rng.shuffle(options)
    return [change(n, v) for n, v in options[:N]]


def _reorder(rng: random.Random) -> list[Forgery]:
    def move(name: str, how: str) -> Forgery:
        def reorder(folder: Path) -> None:
            if name.endswith(".parquet"):
                rows = pq.read_table(folder / name).to_pylist()
                pq.write_table(pa.Table.from_pylist(rows[::-1], schema=SCORES_SCHEMA), folder / name)
                return
            lines = (folder / name).read_bytes().splitlines(True)
            lines = lines[::-1] if how == "reversed" else [lines[1], lines[0], *lines[2:]]
            (folder / name).write_bytes(b"".join(lines))

        def edit(sub: Submission) -> None:
            sub.after_hash.append(reorder)
        return Forgery(f"{name} {how} after hashing", edit)
    return [move("episodes.jsonl", "reversed"), move("episodes.jsonl", "first two swapped"),
            move("judgements.jsonl", "reversed"), move("judgements.jsonl", "first two swapped"),
            move("scores.parquet", "reversed")][:N + rng.randrange(1)]


MORE = [
    ForgeryClass("user move edited", "episodes.jsonl", _user_move),
    # The move and the simulator's recorded reply edited together: nothing recorded contradicts it.
    ForgeryClass("user move and its call edited (re-hashed)", "episodes.jsonl", _user_move_with_call, floor=0.0),
    ForgeryClass("duplicated episodes", "episodes.jsonl", _duplicates),
    ForgeryClass("judge swapped under its label", "manifest.json", _judge_swap),
    ForgeryClass("simulator swapped", "manifest.json", _simulator_swap),
    ForgeryClass("another registry version", "manifest.json", _registry),
    ForgeryClass("config edited after the run", "manifest.json", _config_edit),
    ForgeryClass("re-ordered file", "", _reorder),
]
