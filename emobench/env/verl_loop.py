"""verl's agent loop on emobench episodes (docs/train.md, "RL rollouts in verl").

verl 0.9 runs multi-turn rollouts through agent loops: an `AgentLoopBase` subclass registered by
name, built by hydra once per trajectory inside verl's `AgentLoopWorker` (a Ray actor), and handed
the policy's server client, the tokenizer and the dataset row. This one plays one emobench episode
per trajectory. The policy (verl's rollout server, the model being trained) answers every user
turn; the simulated user, the director and the judges are emobench's roles on their own
endpoints; the response mask is 1 on the policy's tokens and 0 on the user's.

The trajectory's reward is the episode return, the sum of the step rewards (as emobench.env.trl),
handed to verl as `reward_score`, so verl's own reward loop is not called. The per-step rewards go
to `extra_fields["turn_scores"]`, each component's episode total to `reward_extra_info`.

Selected by verl's config: `actor_rollout_ref.rollout.agent.agent_loop_config_path` names a YAML
list whose entry for this loop gives `config` (an emobench training config: user, judges,
split or cases, seeds, reward) and optionally `overrides` (top-level keys of that config) and
`records` (a folder where each worker appends its finished episodes as JSON lines).
"""

from __future__ import annotations

import asyncio
import math
import os
import socket
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any
from uuid import uuid4

import orjson
from omegaconf import DictConfig, ListConfig, OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register
from verl.utils.profiler import simple_timer

from emobench.config import RunConfig, load_config_data
from emobench.endpoints.binding import parse_binding
from emobench.env.core import StepResult
from emobench.env.host import EnvHost, open_host, split_training_config
from emobench.env.rewards import TERMINAL_COMPONENTS, TURN_COMPONENTS, RewardConfig
from emobench.env.verl_data import AGENT_NAME
from emobench.errors import InputError

ENTRY = f"agent loop {AGENT_NAME!r}"
COMPONENTS = (*TURN_COMPONENTS, *TERMINAL_COMPONENTS)

# One host per process, config and event loop: every trajectory of an AgentLoopWorker shares the
# endpoints' clients and concurrency caps, as the episodes of one `emobench run` do.
_hosts: dict[tuple[int, str], tuple[EnvHost, AsyncExitStack]] = {}
_opening: dict[int, asyncio.Lock] = {}


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig | ListConfig) else value


def load_env_config(path: str | Path, overrides: dict[str, Any] | None = None) -> tuple[RunConfig, RewardConfig]:
    """The training config with the agent loop entry's overrides on top; the user, judges and
    director must be endpoints that already run (each rollout worker would start its own vLLM)."""
    data = {**load_config_data(Path(path)), **(overrides or {})}
    config, rewards = split_training_config(data, path)
    for field, role in config.bindings():
        if not field.startswith("subjects") and parse_binding(role.binding).kind == "vllm":
            raise InputError(path, f"{field}.binding", f"{role.binding!r}: in verl every rollout worker would start its "
                             "own vLLM server; serve the model once and bind it as openai:MODEL@URL")
    return config, rewards


async def shared_host(path: str | Path, overrides: dict[str, Any] | None = None) -> EnvHost:
    loop = asyncio.get_running_loop()
    key = (id(loop), orjson.dumps([str(path), overrides or {}], option=orjson.OPT_SORT_KEYS).decode())
    lock = _opening.setdefault(id(loop), asyncio.Lock())
    async with lock:
        if key not in _hosts:
            config, rewards = load_env_config(path, overrides)
            stack = AsyncExitStack()
            host = await stack.enter_async_context(open_host(config, rewards, log_dir=Path.cwd() / "logs" / "emobench"))
            _hosts[key] = (host, stack)
    return _hosts[key][0]


async def close_hosts() -> None:
    """Close the hosts opened on the running loop (their HTTP clients belong to it)."""
    loop_id = id(asyncio.get_running_loop())
    for key in [k for k in _hosts if k[0] == loop_id]:
        await _hosts.pop(key)[1].aclose()


def episode_of(extra_info: Any) -> tuple[str, int]:
    """The case id and seed a dataset row names (emobench.env.verl_data writes them)."""
    info = _plain(extra_info) or {}
    case_id, seed = info.get("case_id"), info.get("seed")
    if not isinstance(case_id, str) or seed is None:
        raise InputError("verl dataset row", "extra_info", "needs case_id and seed (write it with emobench.env.verl_data)")
    return case_id, int(seed)


def _total(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def episode_summary(steps: list[StepResult], truncated: bool) -> dict[str, Any]:
    """reward_extra_info: each component's episode total (NaN where never computed), and flags."""
    totals = {name: _total([s.info["components"][name] for s in steps]) for name in COMPONENTS}
    last = steps[-1].info if steps else {}
    return {
        **{name: math.nan if v is None else v for name, v in totals.items()},
        "turns": float(len(steps)),
        "no_reward": float(_total([s.reward for s in steps]) is None),
        "truncated": float(truncated),
        "audit_flags": float(len(last.get("audit", []))),
    }


@register(AGENT_NAME)
class EmobenchAgentLoop(AgentLoopBase):
    """One emobench episode per trajectory; see the module's docstring."""

    def __init__(self, *args: Any, config: str | None = None, overrides: Any = None, records: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not config:
            raise InputError(ENTRY, "config", "name the emobench training config in the agent_loop_config_path entry")
        self.env_config, self.env_overrides = config, _plain(overrides) or {}
        self.records = Path(records) if records else None
        self.response_length = self.rollout_config.response_length
        self.decoder: Any = self.tokenizer  # verl types it as AutoTokenizer, the factory class

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        host = await shared_host(self.env_config, self.env_overrides)
        case_id, seed = episode_of(kwargs.get("extra_info"))
        env = host.make()
        messages = await env.reset(host.case(case_id), seed)
        tokens = await self.ct_build_initial_tokens(messages)
        mask: list[int] = []
        logprobs: list[float] | None = [] if sampling_params.get("logprobs") else None
        steps: list[StepResult] = []
        metrics: dict[str, Any] = {}
        request_id = uuid4().hex  # one id per episode: the rollout server keeps its prefix cache
        while True:
            with simple_timer("generate_sequences", metrics):
                out = await self.server_manager.generate(request_id=request_id, prompt_ids=tokens,
                                                         sampling_params=sampling_params)
            merged, mask, logprobs = await self.ct_merge_assistant_token(
                tokens, out.token_ids, mask, logprobs, assistant_logprobs=out.log_probs if logprobs is not None else None
            )
            tokens = merged.token_ids
            reply = self.decoder.decode(out.token_ids, skip_special_tokens=True).strip()
            steps.append(await env.step(reply))
            if steps[-1].done or len(mask) >= self.response_length:
                break
            observation = steps[-1].observation
            merged, mask, logprobs = await self.ct_merge_context_msg(observation[:-1], observation, tokens, mask, logprobs)
            tokens = merged.token_ids
            if len(mask) >= self.response_length:
                break
        truncated = not steps[-1].done  # response_length ran out before the episode ended
        if env.episode is not None and self.records is not None:
            self._keep(env.episode.model_dump_json())
        info = episode_summary(steps, truncated)
        total = _total([s.reward for s in steps])
        cut = self.response_length
        prompt_len = len(tokens) - len(mask)  # as verl's own loops: a merge may trim the prompt's last tokens
        return AgentLoopOutput(
            prompt_ids=tokens[:prompt_len],
            response_ids=tokens[prompt_len:][:cut],
            response_mask=mask[:cut],
            response_logprobs=logprobs[:cut] if logprobs else None,
            # verl needs a number for every trajectory: an episode with no computable reward counts 0,
            # and reward_extra_info's no_reward says which ones those were.
            reward_score=total if total is not None else 0.0,
            num_turns=2 * len(steps),  # a user message and a reply per step
            metrics=AgentLoopMetrics(generate_sequences=metrics.get("generate_sequences", 0.0)),
            extra_fields={
                "turn_scores": [s.reward for s in steps],
                "reward_extra_info": info,
                "emobench": {"case_id": case_id, "seed": seed, "stop_reason": steps[-1].info.get("stop_reason"),
                             "config_hash": host.setup.provenance.config_hash, "split": host.setup.provenance.split},
            },
        )

    def _keep(self, line: str) -> None:
        """Append one finished episode; one file per worker process, so no two writers share a file."""
        assert self.records is not None
        self.records.mkdir(parents=True, exist_ok=True)
        path = self.records / f"episodes-{socket.gethostname()}-{os.getpid()}.jsonl"
        with path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
