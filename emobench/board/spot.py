"""Spot checks: ask the submission's own judges again, with the same requests and seeds, about a
seeded sample of its episodes, and compare their levels with the recorded verdicts.

Recomputation (recompute.py) proves the scores follow from the recorded calls; only asking the
models again shows the recorded calls are what the models say. A judge sampled at temperature > 0
does not repeat itself exactly, so the result is an agreement rate over the MDEP items
(progress and regression on C, A and P), held to the protocol's `spot_check_agreement`, and a
mean lift (how much kinder the record is than the judge now), held to `spot_check_max_lift`.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from emobench.config import RoleConfig, RunConfig, resolve_panel
from emobench.endpoints.pool import EndpointPool
from emobench.episode.roles import role_caller
from emobench.errors import InputError
from emobench.judging.stage import bind_panel, replay_mdep
from emobench.prompts import cases_language
from emobench.records import Episode, TurnJudgement
from emobench.registry import Registry
from emobench.run.runner import ROOT
from emobench.rundir import read_records

ITEMS = [(axis, kind) for axis in ("C", "A", "P") for kind in ("progress", "regression")]


@dataclass
class SpotCheck:
    episodes: list[str]
    items: int = 0
    agreed: int = 0
    verdicts: int = 0
    lift: int = 0  # recorded minus fresh progress levels, plus fresh minus recorded regression levels
    differing: list[tuple[str, str]] = field(default_factory=list)  # ("key turn t judge", the items that differ)

    @property
    def agreement(self) -> float:
        return self.agreed / self.items if self.items else 1.0

    @property
    def mean_lift(self) -> float:
        """Levels per verdict the record is kinder than the judge now: noise averages out near 0,
        a forgery that lifts one item on every turn does not (while 5 of 6 items still agree)."""
        return self.lift / self.verdicts if self.verdicts else 0.0


def judges_for(config: RunConfig, bindings: list[str]) -> list[RoleConfig]:
    """The panel's judges, each at another endpoint where one is given (the verifier's, in panel order);
    the model must stay the one recorded, or the comparison says nothing."""
    judges = list(config.panel.judges)
    if not bindings:
        return judges
    if len(bindings) != len(judges):
        raise InputError("--judge", "", f"{len(bindings)} binding(s) for a panel of {len(judges)} judge(s)")
    out = []
    for role, binding in zip(judges, bindings, strict=True):
        moved = role.model_copy(update={"binding": binding, "label": role.name})
        if _model(binding) != _model(role.binding):
            raise InputError("--judge", role.name, f"{_model(binding)!r} is not the recorded judge {_model(role.binding)!r}")
        out.append(moved)
    return out


def _model(binding: str) -> str:
    return binding.split(":", 1)[-1].split("@", 1)[0]


def compare(key: str, recorded: list[TurnJudgement], again: list[TurnJudgement], result: SpotCheck) -> None:
    for t, (mine, theirs) in enumerate(zip(recorded, again, strict=True), start=1):
        fresh = {v.judge: v.axes for v in theirs.verdicts if v.valid and v.axes}
        for verdict in mine.verdicts:
            if not verdict.valid or verdict.axes is None or verdict.judge not in fresh:
                continue
            other = fresh[verdict.judge]
            differ = [f"{a}.{k}" for a, k in ITEMS if getattr(verdict.axes[a], k) != getattr(other[a], k)]  # type: ignore[index]
            result.verdicts += 1
            result.lift += sum(verdict.axes[a].progress - other[a].progress
                               - verdict.axes[a].regression + other[a].regression for a in ("C", "A", "P"))
            result.items += len(ITEMS)
            result.agreed += len(ITEMS) - len(differ)
            if differ:
                result.differing.append((f"{key} turn {t} {verdict.judge}", ", ".join(differ)))


async def _spot(episodes: list[Episode], registry: Registry, config: RunConfig, judges: list[RoleConfig],
                logs: Path) -> SpotCheck:
    result = SpotCheck([e.key for e in episodes])
    async with AsyncExitStack() as stack:
        pool = EndpointPool(stack, logs)  # no response cache: every answer is the model's, now
        callers = []
        for role in judges:
            client, info = await pool.resolve(role)
            callers.append(role_caller("judge", client, info))
        language = cases_language(registry.case(e.case_id) for e in episodes)
        panel = bind_panel(config.panel, tuple(callers), ROOT, config.judges_language(language))
        limits = config.limits()
        for episode in episodes:
            again, _ = await replay_mdep(panel, registry.case(episode.case_id), episode, limits.judge_retries)
            compare(episode.key, [t.judgement for t in episode.turns], again, result)
    return result


def spot_check(folder: Path, registry: Registry, n: int, seed: int, bindings: list[str]) -> SpotCheck:
    """Judge n of a submission's episodes (drawn with seed) again and count the MDEP items on which
    the judges agree with the recorded verdicts."""
    manifest = orjson.loads((folder / "manifest.json").read_bytes())
    config = RunConfig.model_validate(resolve_panel(manifest["config"], "manifest", ROOT))
    episodes = read_records(folder / "episodes.jsonl", Episode)
    picked = random.Random(seed).sample(episodes, min(n, len(episodes)))
    judges = judges_for(config, bindings)
    with tempfile.TemporaryDirectory() as logs:
        return asyncio.run(_spot(picked, registry, config, judges, Path(logs)))
