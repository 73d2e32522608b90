"""`emobench validate --judge-check epitome`: a judge panel rates EPITOME's (seeker post,
response) pairs through the MDEP and holistic rubrics, and its levels are set against the
human annotators' (docs/judges.md).

Each pair is a one-turn conversation: the seeker post is the user's message, the response the
reply rated. The rubrics' card fields come from the stand-in card (judges/stand-ins/epitome.yaml).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from emobench.config import PanelConfig, RunConfig
from emobench.endpoints.cache import ResponseCache
from emobench.endpoints.pool import EndpointPool
from emobench.episode.roles import RoleCaller, derive_seed
from emobench.judging import holistic, mdep
from emobench.prompts import PromptTemplate, load_template
from emobench.records import ModelCall, mean_scores
from emobench.registry import Case
from emobench.registry.models import AXES
from emobench.run.runner import _caller
from emobench.validation.agreement.stats import level_agreement, score_agreement
from emobench.validation.epitome.data import FILES, LEVELS, MECHANISMS, EpitomeData, Pair, samples
from emobench.validation.stand_in import stand_in_case

# Which MDEP axis's progress level stands for each EPITOME mechanism (docs/judges.md).
AXIS_OF = {"emotional_reactions": "A", "interpretations": "C", "explorations": "P"}
STAND_IN = Path("judges") / "stand-ins" / "epitome.yaml"
CONCURRENCY = 32  # pairs in flight per panel: a CPU vLLM batch of a small model is nearly free to widen
SOURCE = {
    "dataset": "EPITOME",
    "repository": "behavioral-data/Empathy-Mental-Health",
    "citation": "Sharma, Miner, Atkins, Althoff (2020). A Computational Approach to Understanding Empathy "
                "Expressed in Text-Based Mental Health Support. EMNLP 2020.",
}


def _transcript(case: Case, pair: Pair) -> list[dict[str, str]]:
    return [{"speaker": case.persona.name, "text": pair.seeker_post}]


async def _rate_pair(
    judges: tuple[RoleCaller, ...], templates: dict[str, PromptTemplate], case: Case, pair: Pair, seed: int, retries: int
) -> tuple[dict[str, Any], list[ModelCall]]:
    """The panel's median progress level per axis and mean holistic empathy for one pair (None: invalid)."""
    pair_seed = derive_seed(seed, "epitome", pair.key)
    transcript = _transcript(case, pair)
    turn, calls = await mdep.judge_turn(judges, templates["mdep"], case, transcript, pair.response_post, pair_seed, 0, retries)
    template = templates["holistic"]
    messages = [
        {"role": "system", "content": template.case_system(case)},
        {"role": "user", "content": template.block(
            "user", transcript=[*transcript, {"speaker": "Assistant", "text": pair.response_post}], left_with="",
            persona=case.persona, scenario=case.scenario)},
    ]
    results = await asyncio.gather(*(holistic._one_judge(j, messages, template, pair_seed, retries) for j in judges))
    calls += [c for _, judge_calls in results for c in judge_calls]
    empathy = mean_scores([verdict for verdict, _ in results])["empathy"]
    axes = {axis: (turn.progress[axis] if turn.valid else None) for axis in AXES}
    return {"axes": axes, "empathy": empathy}, calls


async def rate_pairs(
    panel: PanelConfig, pairs: list[Pair], case: Case, *, root: Path, cache: ResponseCache | None, log_dir: Path, seed: int
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Every pair rated by the panel, and what it cost (calls, tokens, wall time)."""
    retries = int(RunConfig.model_fields["judge_retries"].default)
    templates = {name: load_template(root / "judges" / panel.rubrics[name]) for name in ("mdep", "holistic")}
    started = time.perf_counter()
    async with AsyncExitStack() as stack:
        pool = EndpointPool(stack, log_dir, cache)
        judges = []
        for role in panel.judges:
            client, info = await pool.resolve(role)
            judges.append(_caller("judge", client, info))
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(pair: Pair) -> tuple[str, dict[str, Any], list[ModelCall]]:
            async with gate:
                rated, calls = await _rate_pair(tuple(judges), templates, case, pair, seed, retries)
            return pair.key, rated, calls

        done = await asyncio.gather(*(one(p) for p in pairs))
        roles = [{"label": j.info.label, "model": j.info.model, "sampling": j.info.sampling.model_dump(mode="json")}
                 for j in judges]
    calls = [c for _, _, cs in done for c in cs]
    cost = {
        "n_calls": len(calls),
        "n_cached": sum(c.cached for c in calls),
        "prompt_tokens": sum(c.prompt_tokens for c in calls),
        "completion_tokens": sum(c.completion_tokens for c in calls),
        "wall_s": round(time.perf_counter() - started, 1),
    }
    provenance = {
        "judges": roles,
        "prompt_versions": {name: t.version for name, t in templates.items()},
        "judge_retries": retries,
        "cost": cost,
    }
    return {key: rated for key, rated, _ in done}, provenance


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def judge_check(
    data: EpitomeData, data_dir: Path, panels: list[tuple[str, PanelConfig]], *, limit: int | None, root: Path,
    cache: ResponseCache | None, log_dir: Path, seed: int, n_boot: int,
) -> dict[str, Any]:
    """The judge-check block of validity.json: one entry per panel, same pairs for all."""
    case, stand_in = stand_in_case(root / STAND_IN)
    drawn = samples(data.pairs, limit, seed)
    rated_pairs = sorted({p.key: p for ps in drawn.values() for p in ps}.values(), key=lambda p: p.key)
    out: dict[str, Any] = {
        "dataset": "epitome",
        "source": SOURCE,
        "data": {"folder": str(data_dir), "rows": data.rows, "sha256": {f: _digest(data_dir / f) for f in FILES.values()},
                 "n_pairs": len(data.pairs), "left_out_conflicting": data.conflicting, "left_out_unmatched": data.unmatched},
        "limit": limit,
        "seed": seed,
        "n_boot": n_boot,
        "n_rated_pairs": len(rated_pairs),
        "mapping": {m: f"{AXIS_OF[m]}.progress" for m in MECHANISMS},
        "stand_in": stand_in,
        "panels": {},
    }
    for label, panel in panels:
        rated, provenance = asyncio.run(
            rate_pairs(panel, rated_pairs, case, root=root, cache=cache, log_dir=log_dir, seed=seed))
        mechanisms = {
            m: level_agreement([p.levels[m] for p in ps], [rated[p.key]["axes"][AXIS_OF[m]] for p in ps], LEVELS,
                               n_boot=n_boot, seed=seed)
            for m, ps in drawn.items()
        }
        empathy = score_agreement([sum(p.levels.values()) for p in rated_pairs],
                                  [rated[p.key]["empathy"] for p in rated_pairs], n_boot=n_boot, seed=seed)
        out["panels"][label] = {"panel": panel.name, **provenance, "mechanisms": mechanisms, "holistic_empathy": empathy}
    return out
