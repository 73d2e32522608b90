"""Benchmark: an emobench run on real vLLM (the embedded SmolLM2-135M-Instruct) against a plain load.

The embedded model is served by a vLLM OpenAI server (the CPU build here). A short emobench run
(demo split, 2 seeds, 3 turns, every episode in flight) goes through an ``openai:`` binding;
then, on the same server, a plain aiohttp load replays the run's calls at the same
concurrency: one request per recorded call, with a prompt of about the same number of tokens
and exactly as many generated tokens (``min_tokens`` = ``max_tokens``). Both are measured from
the server's own counters: generated tokens/s of the run over that of the plain load, and the
prefix-cache hit rate (``vllm:prefix_cache_hits_total`` / ``vllm:prefix_cache_queries_total``)
over each.

    HF_HUB_OFFLINE=1 python bench/bench_vllm.py [--seeds 2] [--turns 3]

Slow on CPU: the server takes a minute or more to start, and the model generates some tens of
tokens/s on 2 cores. The CPU build pins its worker to core 0 unless told otherwise; when another
vLLM server already runs on the machine, give this one other cores, e.g.
``VLLM_CPU_OMP_THREADS_BIND=1``, or both share core 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from _servers import load_line

COUNTERS = ("vllm:generation_tokens_total", "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total")
WORDS = "time home feel talk work family friend know think want need tell today week worry hope plan help".split()


async def counters(base: str) -> dict[str, float]:
    """The server's counters, summed over their label sets (one engine here)."""
    async with aiohttp.ClientSession() as session, session.get(f"{base}/metrics") as resp:
        text = await resp.text()
    out = dict.fromkeys(COUNTERS, 0.0)
    for line in text.splitlines():
        match = re.match(r"^([a-z_:]+)(?:\{.*\})? ([0-9.eE+-]+)$", line)
        if match and match.group(1) in out:
            out[match.group(1)] += float(match.group(2))
    return out


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in COUNTERS}


def hit_rate(d: dict[str, float]) -> float:
    queries = d["vllm:prefix_cache_queries_total"]
    return d["vllm:prefix_cache_hits_total"] / queries if queries else float("nan")


async def plain_load(url: str, model: str, shapes: list[tuple[int, int]], concurrency: int) -> None:
    """One request per (prompt tokens, generated tokens), `concurrency` in flight."""
    rng = random.Random(0)
    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1800)) as session:

        async def one(i: int, prompt_tokens: int, completion_tokens: int) -> None:
            # A distinct opening per request, so only what a real load would share can hit the cache.
            words = [f"request {i}:"] + [rng.choice(WORDS) for _ in range(max(1, prompt_tokens - 20))]
            n = max(1, completion_tokens)
            body = {
                "model": model, "messages": [{"role": "user", "content": " ".join(words)}],
                "max_tokens": n, "min_tokens": n, "temperature": 0.7, "seed": i,
            }
            async with sem, session.post(url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}) as resp:
                text = await resp.read()
                if resp.status != 200:  # name the request; the server log has the rest
                    raise SystemExit(f"plain load request {i} ({prompt_tokens} prompt tokens, {n} to generate): "
                                     f"HTTP {resp.status} {text[:300].decode(errors='replace')}")

        await asyncio.gather(*(one(i, p, c) for i, (p, c) in enumerate(shapes)))


async def run(args: argparse.Namespace, tmp: Path) -> None:
    from emobench.config import validate_config
    from emobench.endpoints.embedded import SERVED_NAME, prepare_embedded_model, served_dtype
    from emobench.endpoints.vllm_server import launch_server, stop_server, wait_healthy
    from emobench.records import EpisodeJudgement
    from emobench.run.runner import run_benchmark
    from emobench.rundir import RunDir, read_records

    dtype = served_dtype()
    model = prepare_embedded_model(dtype)
    log = Path(args.log)
    t0 = time.perf_counter()
    proc, base = launch_server(str(model), SERVED_NAME, log, ("--dtype", dtype))
    try:
        await wait_healthy(proc, base, log, 900)
        print(f"vLLM server up in {time.perf_counter() - t0:.0f} s ({base}, log {log})", flush=True)
        binding = f"openai:{SERVED_NAME}@{base}/v1"
        seeds = list(range(args.seeds))
        episodes = 2 * len(seeds)  # the demo split has 2 cases; every episode in flight
        role: dict[str, Any] = {"binding": binding, "max_concurrency": episodes, "timeout_s": 1800}
        config = validate_config({
            "subjects": [{**role, "label": "smollm2", "sampling": {"temperature": 0.7, "max_tokens": 96}}],
            "user": {**role, "sampling": {"temperature": 0.8, "max_tokens": 96}},
            "judges": [{**role, "label": "judge", "sampling": {"temperature": 0.0, "max_tokens": 320}}],
            "split": "demo", "seeds": seeds, "max_turns": args.turns, "min_turns": min(2, args.turns),
            "concurrency": episodes,
        }, "bench_vllm")

        before = await counters(base)
        t0 = time.perf_counter()
        await run_benchmark(config, tmp / "run", show_progress=False)
        run_wall = time.perf_counter() - t0
        run_d = delta(await counters(base), before)
        rd = RunDir(tmp / "run")
        calls = [c for e in rd.read_episodes() for c in e.calls]
        calls += [c for j in read_records(rd.judgements, EpisodeJudgement) for c in j.calls]
        shapes = [(c.prompt_tokens, c.completion_tokens) for c in calls]
        print(f"emobench run: {len(calls)} calls in {run_wall:.0f} s", flush=True)

        before = await counters(base)
        t0 = time.perf_counter()
        await plain_load(f"{base}/v1/chat/completions", SERVED_NAME, shapes, episodes)
        plain_wall = time.perf_counter() - t0
        plain_d = delta(await counters(base), before)
    finally:
        stop_server(proc)

    run_tps = run_d["vllm:generation_tokens_total"] / run_wall
    plain_tps = plain_d["vllm:generation_tokens_total"] / plain_wall
    recorded = sum(c for _, c in shapes)
    print(f"calls: {len(shapes)}, {episodes} in flight; mean prompt {sum(p for p, _ in shapes) / len(shapes):.0f} tokens, "
          f"mean answer {recorded / len(shapes):.0f} tokens")
    print(f"emobench run: {run_tps:.1f} generated tokens/s ({run_d['vllm:generation_tokens_total']:.0f} tokens "
          f"in {run_wall:.0f} s; {recorded} in the records)")
    print(f"plain aiohttp load: {plain_tps:.1f} generated tokens/s ({plain_d['vllm:generation_tokens_total']:.0f} tokens "
          f"in {plain_wall:.0f} s)")
    print(f"real vLLM, run tokens/s / plain load tokens/s: {run_tps / plain_tps:.3f} (ratio; 1.0 = as fast as a plain load)")
    print(f"prefix-cache hit rate, emobench run: {hit_rate(run_d):.3f} "
          f"({run_d['vllm:prefix_cache_hits_total']:.0f} of {run_d['vllm:prefix_cache_queries_total']:.0f} prompt tokens)")
    print(f"prefix-cache hit rate, plain load: {hit_rate(plain_d):.3f} (distinct prompts; the ratio's baseline)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--log", default=str(Path(tempfile.gettempdir()) / "emobench-bench-vllm.log"), help="the server's log")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(load_line(), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(args, Path(tmp)))
    print(load_line())


if __name__ == "__main__":
    main()
