"""Each role's cacheable share of prompt tokens on a standard run, at OpenAI's granularity.

Plays configs/standard.yaml (its subject and the scripted reference, 3 seeds, `--limit` cases)
against the fake server of tests/, which counts each prompt's tokens (cl100k_base) and reports
as cached the longest prefix it shares with an earlier prompt to the same model, from 1,024
tokens in 128-token blocks (emobench/endpoints/prompt_cache.py). Every role is one model here,
as in a run with one provider; the share is what the run's records say was cached.

Then, per call kind (the request's output schema), why the rest was not cached: the prompt was
under the minimum, its longest prefix shared with an earlier prompt was, the block rounding, or
tokens past that prefix. And each role's prompt price at 2.00 USD per million input tokens, the
cached ones at 50% of that (OpenAI's gpt-4o), 25% (gpt-4.1: 0.50) and 10% (Anthropic's cache
reads; its cache writes, which cost more than input, are not counted here).

    python bench/bench_prompt_cache.py                # 1 case: 6 episodes
    python bench/bench_prompt_cache.py --limit 2 --json out.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from emobench.endpoints.prompt_cache import OPENAI, prompt_tokens  # noqa: E402
from emobench.records import EpisodeJudgement, PairwiseCall  # noqa: E402
from emobench.rundir import RunDir, read_records  # noqa: E402
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder  # noqa: E402

WORDS = ("that", "sounds", "heavy", "and", "you", "have", "carried", "it", "alone", "for", "a", "long", "while",
         "what", "part", "of", "this", "weighs", "most", "on", "your", "mind", "when", "night", "comes", "back")


def _words(n: int, seed: int) -> str:
    return " ".join(WORDS[(seed * 7 + i * (seed % 5 + 1)) % len(WORDS)] for i in range(n)).capitalize() + "."


def realistic_lengths(body: dict[str, Any]) -> str:
    """default_responder's answers at the lengths of real ones: a subject reply of 110 words, a user
    message of 40 (the fake server's own are a dozen words), each different per call."""
    fmt = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    seed = int(body.get("seed") or 0) + len(body["messages"])
    if fmt is None:
        return _words(110, seed)
    if fmt == "user_move":
        return json.dumps({**json.loads(default_responder(body)), "message": _words(40, seed)})
    return default_responder(body)


def shares(run_dir: Path) -> dict[str, dict[str, int]]:
    """Per role and prompt template: calls, prompt tokens and the cached ones among them."""
    rd = RunDir(run_dir)

    def kind(key: str) -> str:  # whose episode: the model subject's or the scripted reference's
        return "reference" if key.startswith("scripted:") else "model"

    calls = [(kind(e.key), c) for e in rd.read_episodes() for c in e.calls]
    calls += [(kind(j.key), c) for j in read_records(rd.judgements, EpisodeJudgement) for c in j.calls]
    calls += [("both", c) for c in read_records(rd.pairwise_calls, PairwiseCall)]
    out: dict[str, Counter[str]] = {}
    for episode, call in calls:
        if call.model.startswith("scripted:"):
            continue
        for key in (call.role, f"{call.role} {call.template}", f"{call.role} in {episode} episodes"):
            row = out.setdefault(key, Counter())
            row["calls"] += 1
            row["prompt_tokens"] += call.prompt_tokens
            row["cached_prompt_tokens"] += call.cached_prompt_tokens
    return {k: dict(v) for k, v in sorted(out.items())}


INPUT = 2.00  # USD per million prompt tokens: gpt-4.1's list price (docs/cost.md's dated prices)
CACHED_RATES = (1.0, 0.5, 0.25, 0.1)  # a cached token's price, as a share of INPUT
REASONS = ("under the minimum", "shared prefix under it", "block rounding", "past the shared prefix")


def reasons(requests: list[dict[str, Any]]) -> dict[str, Counter[str]]:
    """Per call kind, the prompt tokens not cached, by why: each prompt's exact longest prefix
    shared with an earlier one (chained token hashes, in the order the server received them)."""
    seen: set[bytes] = set()
    out: dict[str, Counter[str]] = {}
    for request in requests:
        body = request["body"]
        kind = (body.get("response_format") or {}).get("json_schema", {}).get("name") or "free text"
        tokens, chain, shared, hashes = prompt_tokens(body["messages"]), b"", 0, []
        for i, token in enumerate(tokens):
            chain = hashlib.blake2b(chain + token.to_bytes(4, "little"), digest_size=12).digest()
            shared = i + 1 if shared == i and chain in seen else shared
            hashes.append(chain)
        seen.update(hashes)
        cached = shared // OPENAI.block * OPENAI.block if shared >= OPENAI.minimum else 0
        row = out.setdefault(kind, Counter())
        if len(tokens) < OPENAI.minimum:
            row[REASONS[0]] += len(tokens)
        elif shared < OPENAI.minimum:
            row[REASONS[1]] += len(tokens)
        else:
            row[REASONS[2]] += shared - cached
            row[REASONS[3]] += len(tokens) - shared
    return out


def dollars(row: dict[str, int], cached_rate: float) -> float:
    """A role's prompt tokens at INPUT per million, the cached ones at cached_rate of it."""
    fresh = row["prompt_tokens"] - row["cached_prompt_tokens"]
    return (fresh + cached_rate * row["cached_prompt_tokens"]) * INPUT / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=1, help="cases of the test split")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--short", action="store_true", help="the fake server's own short answers, not realistic_lengths")
    args = parser.parse_args()
    from typer.testing import CliRunner

    from emobench.cli import app

    config = yaml.safe_load((ROOT / "configs" / "standard.yaml").read_text())
    state = FakeState(prompt_cache=True, responder=default_responder if args.short else realistic_lengths)
    with FakeOpenAIServer(state) as server, tempfile.TemporaryDirectory() as tmp:
        for role in (config["subjects"][0], config["user"], *config["judges"]):
            role["binding"] = f"openai:fake-model@{server.base_url}"
        path = Path(tmp) / "standard.yaml"
        path.write_text(yaml.safe_dump(config))
        res = CliRunner().invoke(app, ["run", "--config", str(path), "--out", tmp, "--run-id", "r", "--no-progress",
                                       "--no-cache", "--limit", str(args.limit)])
        if res.exit_code != 0:
            raise SystemExit(res.output)
        figures = shares(Path(tmp) / "r")
        why = reasons([r for r in state.requests if "messages" in r["body"]])
        versions = RunDir(Path(tmp) / "r").read_manifest()["prompt_versions"]
    print(f"prompt versions: {versions}")
    print(f"{'role / template':<40} {'calls':>6} {'prompt tok':>11} {'cached':>10} {'share':>7}")
    for key, row in figures.items():
        share = row["cached_prompt_tokens"] / row["prompt_tokens"] if row["prompt_tokens"] else 0.0
        print(f"{key:<40} {row['calls']:>6} {row['prompt_tokens']:>11,} {row['cached_prompt_tokens']:>10,} {share:>7.1%}")
    total = Counter[str]()
    for key, row in figures.items():
        if " " not in key:
            total.update(row)
    print(f"{'all roles':<40} {total['calls']:>6} {total['prompt_tokens']:>11,} {total['cached_prompt_tokens']:>10,} "
          f"{total['cached_prompt_tokens'] / max(1, total['prompt_tokens']):>7.1%}")
    print(f"\nprompt tokens not cached, by call kind and why\n{'call kind':<18}" + "".join(f"{r:>24}" for r in REASONS))
    for kind, row in sorted(why.items()):
        print(f"{kind:<18}" + "".join(f"{row[r]:>24,}" for r in REASONS))
    print(f"\nprompt USD at {INPUT:.2f}/Mtok, a cached token at this share of it\n{'role':<10}"
          + "".join(f"{rate:>10.0%}" for rate in CACHED_RATES))
    for key in (k for k in figures if " " not in k):
        print(f"{key:<10}" + "".join(f"{dollars(figures[key], rate):>10.4f}" for rate in CACHED_RATES))
    if args.json:
        args.json.write_text(json.dumps({"prompt_versions": versions, "roles": figures,
                                         "not_cached": {k: dict(v) for k, v in why.items()}}, indent=1))


if __name__ == "__main__":
    main()
