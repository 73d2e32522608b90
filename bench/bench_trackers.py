"""Benchmark: the affect tracker (MiniLM + affect head + VADER) on 1,000 user-turn-sized messages.

Prints throughput and four ratios: batched vs one-message-at-a-time, the tracker's per-turn
cost against VADER's alone, the head's share of the tracker's time (the rest is the encoder),
and, on ONE core, the numpy encoder against the transformers encoder it replaced (measured in
this run when torch and transformers are importable; the target is a ratio of at least 1).

    HF_HUB_OFFLINE=1 python bench/bench_trackers.py [--texts 1000] [--singles 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import time
from collections.abc import Callable, Sequence
from importlib.util import find_spec

from threadpoolctl import threadpool_info, threadpool_limits

OPENERS = [
    "Honestly, I don't know why I'm even telling you this.",
    "So today was another one of those days.",
    "I've been meaning to talk to someone about this for a while.",
    "Sorry, this is going to sound stupid.",
    "Okay.",
    "It's fine, I guess.",
]
MIDDLES = [
    "My manager called me into a meeting and told me my contract might not be renewed.",
    "I keep lying awake at three in the morning going over every mistake I've made.",
    "My sister hasn't spoken to me since the argument at mum's birthday.",
    "I moved here for the job and I still don't really know anyone.",
    "The bills keep coming and I'm juggling two jobs just to keep up.",
    "The doctor wants to run more tests and they won't say what they're looking for.",
    "I snapped at my kids this morning and then cried in the car.",
    "We finally sorted out the flat and the landlord agreed to fix the heating.",
    "I went for a walk by the river after work and it actually helped a bit.",
    "My friend came round last night and we talked for hours.",
]
CLOSERS = [
    "I just feel like nobody gets it.",
    "What am I supposed to do with that?",
    "Maybe it'll be better next week.",
    "Anyway, thanks for listening.",
    "I'm so tired of feeling like this.",
    "I don't even know what I want you to say.",
]


def user_turns(n: int, seed: int = 0) -> list[str]:
    """n messages of one to four sentences (about 10 to 60 words), reproducible from `seed`."""
    rng = random.Random(seed)
    turns = []
    for _ in range(n):
        parts = rng.sample(MIDDLES, rng.randint(1, 2))
        if rng.random() < 0.6:
            parts.insert(0, rng.choice(OPENERS))
        if rng.random() < 0.6:
            parts.append(rng.choice(CLOSERS))
        turns.append(" ".join(parts))
    return turns


def _one_core_rate(embed: Callable[[Sequence[str]], object], texts: list[str]) -> tuple[float, float]:
    """Texts per second of one batched call over all `texts`: per wall second, per CPU second.
    On a shared machine the CPU-time rate is the steadier one (one thread: CPU time is its work)."""
    t0, c0 = time.perf_counter(), time.process_time()
    embed(texts)
    return len(texts) / (time.perf_counter() - t0), len(texts) / (time.process_time() - c0)


def encoder_one_core(texts: list[str], rounds: int) -> None:
    """The numpy encoder against the transformers one, each on one core, interleaved round by
    round so that a busy neighbour slows both alike; the best round of each is reported."""
    from emobench.sentence_encoder import Encoder

    with threadpool_limits(limits=1):
        new = Encoder.load()
        new.embed(texts[:64])
        blas = ", ".join(f"{i['internal_api']} {i.get('architecture', '?')} {i['num_threads']} thread" for i in threadpool_info())
        env = " ".join(f"{k}={os.environ[k]}" for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ)
        print(f"encoder, one core   BLAS: {blas}; {env or 'no OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE set'}")
        old = None
        if find_spec("torch") and find_spec("transformers"):
            import torch
            from compare_encoders import TorchEncoder

            torch.set_num_threads(1)
            old = TorchEncoder()
            old.embed(texts[:64])
        new_rates: list[tuple[float, float]] = []
        old_rates: list[tuple[float, float]] = []
        for _ in range(rounds):
            new_rates.append(_one_core_rate(new.embed, texts))
            if old is not None:
                old_rates.append(_one_core_rate(old.embed, texts))

    def line(name: str, rates: list[tuple[float, float]]) -> tuple[float, float]:
        wall, cpu = max(r[0] for r in rates), max(r[1] for r in rates)
        rounds_text = ", ".join(f"{r[0]:.1f}/{r[1]:.1f}" for r in rates)
        print(f"{name:19s} {wall:7.1f} texts/s wall, {cpu:7.1f} per CPU second  (rounds wall/cpu: {rounds_text})")
        return wall, cpu

    new_best = line("numpy encoder", new_rates)
    if old is None:
        print("transformers encoder not importable (install the cpu extra to compare)")
        return
    old_best = line("torch encoder", old_rates)
    wall, cpu = new_best[0] / old_best[0], new_best[1] / old_best[1]
    print(f"ratio numpy / torch texts/s, one core: {wall:.2f} wall, {cpu:.2f} CPU time")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=1000)
    ap.add_argument("--singles", type=int, default=100, help="messages timed one call each")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the one-core encoder comparison")
    ap.add_argument("--encoders-only", action="store_true", help="only the one-core encoder comparison")
    args = ap.parse_args()
    texts = user_turns(args.texts)
    words = sum(len(text.split()) for text in texts) / len(texts)
    load_avg = os.getloadavg()[0]
    if args.encoders_only:
        print(f"messages            {len(texts):,}, {words:.0f} words on average; load average {load_avg:.1f}")
        encoder_one_core(texts, args.rounds)
        return

    t0 = time.perf_counter()
    from emobench.trackers.affect import AffectTracker
    from emobench.trackers.lexicon import vader

    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    tracker = AffectTracker.load()
    t_load = time.perf_counter() - t0
    tracker.read(texts[:8])  # first-call allocations are not part of the steady state

    t0, c0 = time.perf_counter(), time.process_time()
    readings = tracker.read(texts)
    t_batch, c_batch = time.perf_counter() - t0, time.process_time() - c0

    singles = texts[: args.singles]
    t0 = time.perf_counter()
    for text in singles:
        tracker.read([text])
    t_single = (time.perf_counter() - t0) / len(singles)

    t0 = time.perf_counter()
    vader(texts)
    t_vader = (time.perf_counter() - t0) / len(texts)

    embeddings = tracker.embed(texts)
    t0 = time.perf_counter()
    tracker.head.emotion_probs(embeddings, texts)
    tracker.head.valence(embeddings, texts)
    t_head = time.perf_counter() - t0  # includes VADER, which the head reads twice

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    neutral = sum(reading.label == "neutral" for reading in readings)
    closing = sum(reading.closing for reading in readings)
    per_batched = t_batch / len(texts)
    print(f"messages            {len(texts):,}, {words:.0f} words on average; tracker {tracker.version}")
    print(f"load average        {load_avg:.1f} on {os.cpu_count()} cores at start")
    print(f"import              {t_import:7.2f} s   (emobench.trackers)")
    print(f"model load          {t_load:7.2f} s   (tokenizer + encoder weights + head)")
    print(f"read, batched       {len(texts) / t_batch:7.1f} texts/s  {1000 * per_batched:6.2f} ms/text  (cpu {c_batch:.1f} s)")
    print(f"read, one call      {1 / t_single:7.1f} texts/s  {1000 * t_single:6.2f} ms/text  ({len(singles)} calls)")
    print(f"VADER alone         {1 / t_vader:7.1f} texts/s  {1000 * t_vader:6.2f} ms/text")
    print(f"ratio one-call / batched per text: {t_single / per_batched:.2f}")
    print(f"ratio tracker one-call / VADER per text: {t_single / t_vader:.1f}")
    print(f"ratio head (with VADER) / whole batched read: {t_head / t_batch:.3f}")
    print(f"labels              {len(texts) - neutral} emotional, {neutral} neutral, {closing} closings")
    print(f"peak RSS            {rss_mb:7.0f} MB  (before the encoder comparison)")
    encoder_one_core(texts, args.rounds)


if __name__ == "__main__":
    main()
