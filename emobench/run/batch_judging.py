"""`run --batch`: the judging off an episode's critical path through OpenAI's Batch API, at half price.

The per-turn MDEP judge stays a direct call: its verdicts drive the episode's EPM vector and its
stop. An episode's holistic rubric and its pairwise comparisons wait on nothing in it, so they are
deferred: after each wave (the whole grid is one wave; an adaptive run has several) every episode
of the wave is judged and every pair of it compared at once, through the same BatchEndpoint as
`emobench judge --batch` (endpoints/batch.py), so that one batch holds them. An adaptive run
decides to stop only after its wave's batch has ended: each wave waits on its batch (up to the
24-hour completion window), which is the price of the half-price judging.

Every submitted batch is in the run's ``batches.jsonl`` before it is waited on, so `run --resume`
(with --batch) polls the batches a killed run submitted instead of paying for them again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path

from emobench.config import RunConfig
from emobench.endpoints.batch import batched
from emobench.endpoints.binding import parse_binding
from emobench.endpoints.cache import ResponseCache
from emobench.endpoints.pool import EndpointPool
from emobench.episode.roles import role_caller
from emobench.errors import InputError
from emobench.judging.stage import Panel, bind_panel, judge_episodes, judge_pairwise
from emobench.records import Episode, Limits
from emobench.registry import Registry
from emobench.rundir import RunDir

FLAG = "--batch"
LEDGER = "batches.jsonl"


def can_batch(binding: str) -> bool:
    """Only an ``openai:MODEL@URL`` binding (one base URL) reaches a Batch API; litellm's Router,
    vLLM and scripted roles have none here."""
    parsed = parse_binding(binding)
    return parsed.kind == "openai" and len(parsed.base_urls) == 1


def refuse_unbatchable(config: RunConfig, ray: str | None) -> None:
    """A --batch run whose judging cannot go in batches, refused before anything starts."""
    if ray is not None:
        raise InputError(FLAG, "", "not with --ray: Ray workers judge each episode as it ends")
    for i, judge in enumerate(config.judges):
        if not can_batch(judge.binding):
            raise InputError(FLAG, "", f"panel.judges[{i}] {judge.binding}: batches need an openai:MODEL@URL binding "
                             "(one base URL, a Batch API)")


def check_batch(config: RunConfig, rd: RunDir, batch: bool, ray: str | None, unjudged: bool = False) -> None:
    """Refuse, before anything is written, a --batch run that cannot batch its judging, and a
    resume without --batch of a run whose episodes wait for their judging in batches (``unjudged``:
    a finished episode has no judgement yet), which would be paid for twice."""
    if batch:
        refuse_unbatchable(config, ray)
    elif unjudged and (rd.path / LEDGER).exists():
        raise InputError(rd.path / LEDGER, "", "this run judges through the Batch API; resume it with --batch, "
                         "or its submitted batches are paid for again")


async def batched_panel(
    stack: AsyncExitStack, rd: RunDir, cache: ResponseCache | None, config: RunConfig, root: Path, language: str,
    poll_s: float,
) -> Panel:
    """The run's panel on judges of their own that ask through the Batch API."""
    ledger = rd.path / LEDGER
    pool = EndpointPool(stack, rd.logs, cache, on_fault=rd.log_fault, wrap=lambda client: batched(client, ledger, poll_s))
    judges = [role_caller("judge", *(await pool.resolve(judge))) for judge in config.judges]
    return bind_panel(config.panel, tuple(judges), root, config.judges_language(language))


async def judge_deferred(rd: RunDir, episodes: Sequence[Episode], registry: Registry, panel: Panel, limits: Limits) -> int:
    """The holistic judgements of these episodes not yet judged and the comparisons of their pairs
    not yet compared, all asked at once so that one batch holds them; returns the episodes judged."""
    # Every request in flight together: one held back would wait for the batch before it.
    everything = max(1, len(episodes) * len({e.subject for e in episodes}))
    tasks = [asyncio.ensure_future(judge_episodes(rd, episodes, registry, panel, limits, everything)),
             asyncio.ensure_future(judge_pairwise(rd, episodes, registry, panel, limits, everything))]
    try:
        judged, _ = await asyncio.gather(*tasks)
    finally:  # one failed: the other is not left waiting on its batch
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return int(judged)
