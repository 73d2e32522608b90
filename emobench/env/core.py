"""One emobench episode as an RL environment: reset(case, seed) -> observation; step(reply) ->
observation, reward, done, info.

The policy is the caller. The environment drives the same episode stepper as `emobench run`
with the same simulator, director and judge roles, so the same case, seed and replies give the
same Episode record. What the policy reads is its own side of the chat (OpenAI messages).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from emobench.env.held_out import refuse_test_case
from emobench.env.rewards import RewardConfig, as_info, combine, terminal_components, turn_components
from emobench.episode.roles import EpisodePrompts, Provenance, WorldRoles
from emobench.episode.stepper import EpisodeState, subject_conversation
from emobench.judging.audit import audit_episode
from emobench.judging.holistic import judge_holistic
from emobench.prompts import PromptTemplate
from emobench.records import Episode, Limits, ModelCall, RoleInfo, mean_scores
from emobench.registry import Case
from emobench.scoring.episode_scores import score_episode

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class StepResult:
    observation: Messages  # the policy's conversation, ending with the user message to answer
    reward: float | None  # None: nothing to reward (e.g. no valid judgement this turn)
    done: bool
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EnvSetup:
    """What every environment of a process shares: bound roles (endpoint caps, cache), prompts, limits."""

    world: WorldRoles
    prompts: EpisodePrompts
    limits: Limits
    provenance: Provenance
    policy: RoleInfo  # how the policy is named in the records
    rewards: RewardConfig
    holistic: PromptTemplate | None = None  # the panel's holistic rubric; None when it rates none


class EmoEnv:
    """One episode at a time; reset starts the next. Not safe to share between concurrent rollouts:
    make one per rollout (they are cheap; the setup is shared)."""

    def __init__(self, setup: EnvSetup) -> None:
        self.setup = setup
        self._state: EpisodeState | None = None
        self.episode: Episode | None = None  # the finished episode's record, once done

    @property
    def state(self) -> EpisodeState:
        if self._state is None:
            raise RuntimeError("call reset(case, seed) first")
        return self._state

    async def reset(self, case: Case, seed: int) -> Messages:
        refuse_test_case(case.id, case.split)  # every trainer's rollouts start here
        s = self.setup
        self._state = EpisodeState.open(case, s.world, s.prompts, seed, s.limits, s.policy)
        self.episode = None
        return self._state.subject_messages()

    def _reply_call(self, text: str) -> ModelCall:
        p, state = self.setup.policy, self.state
        template = self.setup.prompts.subject_system
        return ModelCall(
            role="subject", label=p.label, model=p.model, endpoint=p.endpoint, sampling=p.sampling,
            seed=state.subject_seed(), template=template.ref if template else "none", text=text,
        )

    async def step(self, reply: str | ModelCall) -> StepResult:
        """Play the policy's reply. A ModelCall carries its own provenance (tokens, latency);
        a plain string is recorded with the policy's name and this turn's seed."""
        state = self.state
        call = reply if isinstance(reply, ModelCall) else self._reply_call(reply)
        turn = await state.advance(call)
        answered = not state.done or state.stop_reason == "user_left"
        components: dict[str, float | None] = turn_components(turn, state.case.p0_norm, state.meter if answered else None)
        info: dict[str, Any] = {
            "turn": turn.index,
            "judgement_valid": turn.judgement.valid,
            "epm": turn.epm.model_dump() if turn.epm else None,
            "meter": state.meter,
        }
        observation = state.subject_messages() if not state.done else self._final_observation()
        if state.done:
            components |= await self._finish(info)
        reward = combine(components, self.setup.rewards, len(turn.reply))
        info["components"] = as_info(components)
        info["reward"] = reward
        return StepResult(observation, reward, state.done, info)

    def _final_observation(self) -> Messages:
        state = self.state
        messages = subject_conversation(self.setup.prompts, state.history)
        if state.last_user is not None:
            messages.append({"role": "user", "content": state.last_user.message})
        return messages

    async def _finish(self, info: dict[str, Any]) -> dict[str, float | None]:
        """Terminal components; the record, stop reason and simulator audit flags go into info."""
        s, state = self.setup, self.state
        episode = state.episode(s.provenance)
        self.episode = episode
        holistic: dict[str, float | None] = {}
        if s.holistic is not None:
            verdicts, calls = await judge_holistic(
                s.world.judges, s.holistic, state.case, episode, episode.seed, s.limits.judge_retries
            )
            holistic = mean_scores(verdicts)
            info["holistic_calls"] = calls
        row = score_episode(episode, state.case, run_id="env")
        info["stop_reason"] = episode.stop_reason
        info["audit"] = [flag.model_dump() for flag in audit_episode(episode, state.case, s.limits)]
        info["episode"] = episode
        return terminal_components(bool(row["success"]), row["epmq"], holistic)
