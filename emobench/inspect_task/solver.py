"""The solver: one sample is one episode of emobench's own loop (episode/loop.py), then its judging.

Nothing of the episode is done here: run_episode plays it with inspect's models in the role
seats, judge_episode judges it as `emobench run` does. What happens is shown as it happens:
the dialogue as the sample's messages, each turn's verdicts, EPM point, meter and director
action as an info event; the finished records go to the sample's store for the scorers and
`emobench import inspect`.
"""

from __future__ import annotations

import tempfile
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from inspect_ai.log import transcript
from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, ModelOutput
from inspect_ai.solver import Generate, Solver, TaskState, solver

from emobench.config import RunConfig
from emobench.episode.loop import run_episode
from emobench.episode.roles import EpisodePrompts, Provenance
from emobench.inspect_task.roles import bind_inspect_roles, played_config
from emobench.judging.stage import bind_panel, judge_episode
from emobench.records import Episode, EpisodeJudgement, Turn
from emobench.registry import Case

EPISODE_KEY = "emobench:episode"
JUDGEMENT_KEY = "emobench:judgement"
CONFIG_KEY = "emobench:config"  # the config as played (roles labelled by their models)
MANIFEST_KEY = "emobench_manifest"  # in the task's metadata: what a run's manifest says of the run


@dataclass(frozen=True)
class EpisodeSetup:
    """What every sample of the task plays with: the run's config, cases, templates and provenance."""

    config: RunConfig
    cases: dict[str, Case]
    prompts: EpisodePrompts
    root: Path
    language: str
    provenance: Provenance
    subject_from_config: bool = False  # the config's subject binding plays, not inspect's model


def turn_event(turn: Turn) -> dict[str, Any]:
    """One turn as inspect view lists it: the user's move with its inner note, the reply, the verdicts."""
    return {
        "turn": turn.index,
        "user": turn.user.message,
        "inner": turn.user.inner,
        "reply": turn.reply,
        "meter": turn.meter,
        "epm": turn.epm.model_dump(mode="json") if turn.epm else None,
        "director": turn.director.model_dump(mode="json") if turn.director else None,
        "verdict": turn.judgement.model_dump(mode="json", include={"valid", "progress", "regression", "vector"}),
        "judges": [{"judge": v.judge, "valid": v.valid, "error": v.error,
                    "axes": {a: s.model_dump(mode="json") for a, s in (v.axes or {}).items()}}
                   for v in turn.judgement.verdicts],
    }


def dialogue(system: str | None, turns: list[Turn]) -> list[ChatMessage]:
    """The subject's conversation; the simulator's inner note rides in the user message's metadata,
    shown by inspect view and never sent (the subject's requests are built by the stepper)."""
    messages: list[ChatMessage] = [ChatMessageSystem(content=system)] if system else []
    for turn in turns:
        messages.append(ChatMessageUser(content=turn.user.message, metadata={"inner": turn.user.inner}))
        messages.append(ChatMessageAssistant(content=turn.reply))
    return messages


@solver
def play_and_judge(setup: EpisodeSetup) -> Solver:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        case, seed = setup.cases[state.metadata["case_id"]], int(state.metadata["seed"])
        config, prompts = setup.config, setup.prompts
        system = prompts.subject_system.block("system") if prompts.subject_system else None  # as the stepper sends it
        turns: list[Turn] = []

        def on_turn(turn: Turn) -> None:
            turns.append(turn)
            state.messages = dialogue(system, turns)
            transcript().info(turn_event(turn), source=f"emobench turn {turn.index}")

        async with AsyncExitStack() as stack:
            bound = await bind_inspect_roles(config, stack, Path(tempfile.gettempdir()), setup.subject_from_config)
            played = played_config(config, bound)
            state.store.set(CONFIG_KEY, played.model_dump(mode="json"))
            provenance = replace(setup.provenance, config_hash=played.config_hash())
            episode = await run_episode(
                case, bound.episode_roles(bound.subjects[0]), prompts, seed, config.limits(), provenance, on_turn
            )
            state.store.set(EPISODE_KEY, episode.model_dump(mode="json"))
            panel = bind_panel(config.panel, bound.judges, setup.root, config.judges_language(setup.language))
            judgement = await judge_episode(panel, case, episode, config.limits())
        state.store.set(JUDGEMENT_KEY, judgement.model_dump(mode="json"))
        transcript().info({"stop_reason": episode.stop_reason, "status": episode.status, "final_meter": episode.final_meter,
                           "holistic": [v.model_dump(mode="json") for v in judgement.holistic],
                           "audit": [f.model_dump(mode="json") for f in judgement.audit]}, source="emobench episode")
        state.output = ModelOutput.from_content(model=episode.subject, content=turns[-1].reply if turns else "")
        state.completed = True
        return state

    return solve


def stored_records(store: dict[str, Any]) -> tuple[Episode, EpisodeJudgement] | None:
    """A finished sample's episode and judgement, from its store; None when it did not finish."""
    if EPISODE_KEY not in store or JUDGEMENT_KEY not in store or CONFIG_KEY not in store:
        return None
    return Episode.model_validate(store[EPISODE_KEY]), EpisodeJudgement.model_validate(store[JUDGEMENT_KEY])
