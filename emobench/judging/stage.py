"""Post-episode judging (docs/method.md §4, after the episode): the holistic rubric, the simulator
audit and pairwise comparisons, plus the per-turn MDEP replay of a rescore.

Results are appended line by line (judgements.jsonl, pairwise.jsonl) and what is already
there is skipped, so a crash or Ctrl-C loses nothing finished and a rerun picks up the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from emobench.config import PanelConfig
from emobench.episode.roles import RoleCaller
from emobench.judging.audit import audit_episode
from emobench.judging.holistic import judge_holistic
from emobench.judging.mdep import judge_turn
from emobench.judging.pairwise import judge_pairs, plan_pairs
from emobench.prompts import PromptTemplate, load_language_template
from emobench.records import Episode, EpisodeJudgement, HolisticVerdict, Limits, ModelCall, PairwiseVerdict, TurnJudgement
from emobench.registry import Case, Registry
from emobench.rundir import RunDir, append_line, iter_records, read_records


@dataclass(frozen=True)
class Panel:
    """A panel bound to live judges and loaded rubric templates."""

    config: PanelConfig
    judges: tuple[RoleCaller, ...]
    mdep: PromptTemplate
    holistic: PromptTemplate
    pairwise: PromptTemplate

    @property
    def versions(self) -> dict[str, str]:
        return {"mdep": self.mdep.version, "holistic": self.holistic.version, "pairwise": self.pairwise.version}


def bind_panel(config: PanelConfig, judges: tuple[RoleCaller, ...], root: Path, language: str = "en") -> Panel:
    """The panel with its rubrics in ``language`` (judges/ for English, judges/zh/ for Chinese)."""
    rubric = {name: load_language_template(root, "judges", file, language) for name, file in config.rubrics.items()}
    return Panel(config, judges, rubric["mdep"], rubric["holistic"], rubric["pairwise"])


async def replay_mdep(panel: Panel, case: Case, episode: Episode, retries: int) -> tuple[list[TurnJudgement], list[ModelCall]]:
    """Judge every turn of a finished conversation again, each against the transcript up to it.

    Seeds are derived exactly as in the live loop, so replaying with the original panel sends
    byte-identical requests (and hits the response cache).
    """
    transcript: list[dict[str, str]] = []
    jobs = []
    for turn in episode.turns:
        transcript.append({"speaker": case.persona.name, "text": turn.user.message})
        jobs.append(judge_turn(panel.judges, panel.mdep, case, list(transcript), turn.reply, episode.seed, turn.index, retries))
        transcript.append({"speaker": "Assistant", "text": turn.reply})
    results = await asyncio.gather(*jobs)
    return [judgement for judgement, _ in results], [call for _, calls in results for call in calls]


async def _judge_one(panel: Panel, case: Case, episode: Episode, limits: Limits, replay: bool) -> EpisodeJudgement:
    calls: list[ModelCall] = []
    mdep = None
    if replay:
        mdep, replay_calls = await replay_mdep(panel, case, episode, limits.judge_retries)
        calls += replay_calls
    holistic: list[HolisticVerdict] = []
    if panel.config.holistic:
        holistic, holistic_calls = await judge_holistic(
            panel.judges, panel.holistic, case, episode, episode.seed, limits.judge_retries
        )
        calls += holistic_calls
    return EpisodeJudgement(
        key=episode.key,
        panel=panel.config.name,
        holistic=holistic,
        audit=audit_episode(episode, case, limits),
        calls=calls,
        mdep=mdep,
    )


async def judge_episode(panel: Panel, case: Case, episode: Episode, limits: Limits) -> EpisodeJudgement:
    """One finished episode's judgement, not yet written (a caller that must check before writing)."""
    return await _judge_one(panel, case, episode, limits, replay=False)


async def judge_finished(out: RunDir, episode: Episode, case: Case, panel: Panel, limits: Limits) -> None:
    """Judge one episode as soon as it ends, so judging overlaps the episodes still running."""
    judgement = await _judge_one(panel, case, episode, limits, replay=False)
    await asyncio.shield(asyncio.to_thread(append_line, out.judgements, judgement.model_dump_json().encode()))


async def judge_episodes(
    out: RunDir,
    episodes: Sequence[Episode],
    registry: Registry,
    panel: Panel,
    limits: Limits,
    concurrency: int,
    *,
    replay: bool = False,
    tick: Callable[[str, int, int], None] | None = None,
) -> int:
    """Judge every episode not yet in out/judgements.jsonl; returns how many were judged now.
    tick, when given, hears of each episode judged."""
    done = {j.key for j in iter_records(out.judgements, EpisodeJudgement)}  # not a list of them all: a run's worth
    todo = [e for e in episodes if e.key not in done]
    gate = asyncio.Semaphore(concurrency)

    async def one(episode: Episode) -> EpisodeJudgement:
        async with gate:
            return await _judge_one(panel, registry.case(episode.case_id), episode, limits, replay)

    tasks = [asyncio.create_task(one(e)) for e in todo]
    try:
        for judged, next_done in enumerate(asyncio.as_completed(tasks), start=1):
            append_line(out.judgements, (await next_done).model_dump_json().encode())
            if tick is not None:
                tick("judging", judged, len(todo))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return len(todo)


async def judge_pairwise(
    out: RunDir, episodes: Sequence[Episode], registry: Registry, panel: Panel, limits: Limits, concurrency: int
) -> int:
    """Compare every planned pair not yet in out/pairwise.jsonl, both orders, every judge."""
    if not panel.config.pairwise:
        return 0
    done = {(v.case_id, v.seed, v.subject_a, v.subject_b) for v in read_records(out.pairwise_log, PairwiseVerdict)}

    def key(x: Episode, y: Episode) -> tuple[str, int, str, str]:
        a, b = sorted((x.subject, y.subject))
        return x.case_id, x.seed, a, b

    todo = [(x, y) for x, y in plan_pairs(episodes, panel.config.reference_subjects) if key(x, y) not in done]
    if not todo:
        return 0
    cases = {x.case_id: registry.case(x.case_id) for x, _ in todo}
    verdicts, calls = await judge_pairs(panel.judges, panel.pairwise, cases, todo, 0, limits.judge_retries, concurrency)
    for call in calls:  # provenance of every comparison, as episodes keep theirs
        append_line(out.pairwise_calls, call.model_dump_json().encode())
    for verdict in verdicts:
        append_line(out.pairwise_log, verdict.model_dump_json().encode())
    return len(todo)
