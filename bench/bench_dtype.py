"""Benchmark: prefill and decode speed of the embedded model on vLLM's CPU build, per dtype.

For each dtype the embedded SmolLM2-135M-Instruct is converted (once, cached), served by a real
vLLM OpenAI server with the demo's server flags, and sent, one at a time:
- prefill: prompts of about 930 tokens (judge and simulator prompts are 600-1,250), each
  distinct so the prefix cache cannot answer, with max_tokens 1;
- decode: a short prompt and 96 generated tokens (``min_tokens`` = ``max_tokens``).
Prints the CPU's bf16 flags, tokens/s per dtype, and the float32/bfloat16 ratios of one run.
A variant ``DTYPE:reserve1`` keeps vLLM's own thread layout (one core for its scheduler), which
emobench otherwise changes on 4 cores or fewer (``VLLM_CPU_NUM_OF_RESERVED_CPU``).

    HF_HUB_OFFLINE=1 python bench/bench_dtype.py [--variants float32,bfloat16,float32:reserve1] [--prompts 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
from _servers import cpu_line, load_line

WORDS = "time home feel talk work family friend know think want need tell today week worry hope plan help".split()


async def one(session: aiohttp.ClientSession, url: str, model: str, prompt: str, tokens: int) -> tuple[int, int, float]:
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": tokens,
            "min_tokens": tokens, "temperature": 0.0, "seed": 0}
    t0 = time.perf_counter()
    async with session.post(url, json=body) as resp:
        data = await resp.json()
    wall = time.perf_counter() - t0
    return int(data["usage"]["prompt_tokens"]), int(data["usage"]["completion_tokens"]), wall


async def measure(variant: str, args: argparse.Namespace, log_dir: Path) -> dict[str, float]:
    from emobench.endpoints.embedded import SERVED_NAME, prepare_embedded_model
    from emobench.endpoints.structured import VLLM_BOUNDED_SERVER_ARGS
    from emobench.endpoints.vllm_server import launch_server, stop_server, wait_healthy

    dtype, _, option = variant.partition(":")
    if option == "reserve1":
        os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "1"
    else:
        os.environ.pop("VLLM_CPU_NUM_OF_RESERVED_CPU", None)
    folder = prepare_embedded_model(dtype)
    log = log_dir / f"vllm-{dtype}-{option}.log"
    t0 = time.perf_counter()
    proc, base = launch_server(str(folder), SERVED_NAME, log, (*VLLM_BOUNDED_SERVER_ARGS, "--dtype", dtype))
    rng = random.Random(0)
    try:
        await wait_healthy(proc, base, log, 900)
        start_s = time.perf_counter() - t0
        url = f"{base}/v1/chat/completions"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1800)) as session:
            await one(session, url, SERVED_NAME, "Hello there.", 4)  # warm-up
            prefill = []
            for _ in range(args.prompts):
                prompt = " ".join(rng.choice(WORDS) for _ in range(args.prompt_words))
                p, _, wall = await one(session, url, SERVED_NAME, prompt, 1)
                prefill.append((p, wall))
            decode = [await one(session, url, SERVED_NAME, "Tell me about your week.", args.decode_tokens)
                      for _ in range(args.prompts)]
    finally:
        stop_server(proc)
    prompt_tokens = statistics.mean(p for p, _ in prefill)
    return {
        "start_s": start_s,
        "prompt_tokens": prompt_tokens,
        "prefill_s": statistics.median(w for _, w in prefill),
        "prefill_tps": statistics.median(p / w for p, w in prefill),
        "decode_tps": statistics.median(c / w for _, c, w in decode),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="float32,bfloat16")
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--prompt-words", type=int, default=900, help="about one token per word")
    ap.add_argument("--decode-tokens", type=int, default=96)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(cpu_line())
    print(load_line(), flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant in args.variants.split(","):
            r = results[variant] = asyncio.run(measure(variant, args, Path(tmp)))
            print(f"{variant:16s} server up in {r['start_s']:.0f} s; prefill of {r['prompt_tokens']:.0f} tokens "
                  f"{r['prefill_s']:.1f} s ({r['prefill_tps']:.0f} tokens/s); decode {r['decode_tps']:.1f} tokens/s", flush=True)
    if {"float32", "bfloat16"} <= results.keys():
        f32, bf16 = results["float32"], results["bfloat16"]
        print(f"float32 / bfloat16, prefill tokens/s: {f32['prefill_tps'] / bf16['prefill_tps']:.2f}; "
              f"decode tokens/s: {f32['decode_tps'] / bf16['decode_tps']:.2f} (ratios of one run)")
    print(load_line())


if __name__ == "__main__":
    main()
