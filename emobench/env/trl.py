"""TRL's GRPOTrainer on emobench episodes (docs/train.md): a `rollout_func` and reward functions.

TRL 1.x offers two hooks for multi-turn work. `environment_factory` exposes an environment's
methods as *tools* the model calls; an emobench episode is a conversation, not tool use, and a
small model's chat template often has no tool syntax. `rollout_func` hands the generation to
us: each rollout is one whole episode, the policy (the trainer's own model) answers every user
turn, and the completion is the conversation after the opening, with the simulated user's
tokens masked out of the loss (`env_mask`). The group of `num_generations` rollouts of one
prompt plays the same case under the same seed, so they differ only by the policy's replies.

The environment lives on an event loop in a background thread (its HTTP clients belong to that
loop); generation stays on the trainer's thread, batched over every episode still running.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from emobench.env.core import EmoEnv, StepResult
from emobench.env.host import EnvHost
from emobench.env.rewards import TERMINAL_COMPONENTS, TURN_COMPONENTS

T = TypeVar("T")


class EnvThread:
    """An EnvHost opened on its own event loop thread; `run` executes a coroutine there."""

    def __init__(self, host_context: AbstractAsyncContextManager[EnvHost]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="emobench-env", daemon=True)
        self._thread.start()
        self._context = host_context
        self.host: EnvHost = self.run(host_context.__aenter__())

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        self.run(self._context.__aexit__(None, None, None))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()


@dataclass
class _Rollout:
    env: EmoEnv
    messages: list[dict[str, str]]
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    steps: list[StepResult] = field(default_factory=list)

    def extend(self, ids: list[int], mask: int, logprobs: list[float] | None = None) -> None:
        self.completion_ids += ids
        self.env_mask += [mask] * len(ids)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)


def _render(tokenizer: Any, messages: list[dict[str, str]], generation_prompt: bool) -> str:
    return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt))


def _user_turn_ids(tokenizer: Any, before: list[dict[str, str]], after: list[dict[str, str]]) -> list[int]:
    """The tokens the chat template puts between the policy's end-of-turn token and its next reply."""
    done, following = _render(tokenizer, before, False), _render(tokenizer, after, True)
    eos = tokenizer.eos_token
    tail = done[done.rfind(eos) + len(eos):] if eos and eos in done else ""
    if not following.startswith(done):
        raise ValueError("the chat template does not extend a conversation by appending to it")
    return list(tokenizer(tail + following[len(done):], add_special_tokens=False)["input_ids"])


def _generate(trainer: Any, rollouts: list[_Rollout], max_new_tokens: int) -> list[tuple[list[int], list[float]]]:
    """One sampled reply per rollout, batched (left padding), with each token's log-probability."""
    import torch

    tokenizer, model, args = trainer.processing_class, trainer.model, trainer.args
    sequences = [r.prompt_ids + r.completion_ids for r in rollouts]
    width = max(len(s) for s in sequences)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    ids = torch.tensor([[pad] * (width - len(s)) + s for s in sequences])
    attention = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in sequences])
    with torch.no_grad():
        out = model.generate(
            input_ids=ids, attention_mask=attention, max_new_tokens=max_new_tokens, do_sample=True,
            temperature=args.temperature, top_p=args.top_p, pad_token_id=pad,
            return_dict_in_generate=True, output_scores=True,
        )
        scores = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
    results = []
    for row, row_scores in zip(out.sequences[:, width:].tolist(), scores.tolist(), strict=True):
        end = row.index(tokenizer.eos_token_id) + 1 if tokenizer.eos_token_id in row else len(row)
        results.append((row[:end], row_scores[:end]))
    return results


def make_rollout_func(env_thread: EnvThread, *, max_new_tokens: int = 64) -> Callable[[list[Any], Any], dict[str, Any]]:
    """A GRPOTrainer `rollout_func`. Each prompt is a case id; its episode seed is the global step."""
    host = env_thread.host

    def rollout(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        tokenizer, seed = trainer.processing_class, int(trainer.state.global_step)
        rollouts: list[_Rollout] = []
        for prompt in prompts:
            env = host.make()
            opening = env_thread.run(env.reset(host.case(str(prompt)), seed))
            rollouts.append(_Rollout(env, opening, list(tokenizer(_render(tokenizer, opening, True),
                                                                  add_special_tokens=False)["input_ids"])))
        active = list(rollouts)
        while active:
            replies = _generate(trainer, active, max_new_tokens)
            for r, (ids, logprobs) in zip(active, replies, strict=True):
                r.extend(ids, 1, logprobs)
                if not ids or ids[-1] != tokenizer.eos_token_id:  # cut at max_new_tokens: close the turn
                    r.extend([tokenizer.eos_token_id], 0)
            texts = [tokenizer.decode(ids, skip_special_tokens=True).strip() for ids, _ in replies]

            async def step_all(batch: list[_Rollout], said: list[str]) -> list[StepResult]:
                return list(await asyncio.gather(*(r.env.step(text) for r, text in zip(batch, said, strict=True))))

            results = env_thread.run(step_all(active, texts))
            still = []
            for r, text, result in zip(active, texts, results, strict=True):
                r.steps.append(result)
                before = [*r.messages, {"role": "assistant", "content": text}]
                if not result.done:
                    r.extend(_user_turn_ids(tokenizer, before, result.observation), 0)
                    r.messages = result.observation
                    still.append(r)
            active = still
        return {
            "prompt_ids": [r.prompt_ids for r in rollouts],
            "completion_ids": [r.completion_ids for r in rollouts],
            "logprobs": [r.logprobs for r in rollouts],
            "env_mask": [r.env_mask for r in rollouts],
            "emobench_steps": [[_step_summary(s) for s in r.steps] for r in rollouts],
        }

    return rollout


def _step_summary(step: StepResult) -> dict[str, Any]:
    return {"reward": step.reward, "done": step.done, **step.info["components"],
            "stop_reason": step.info.get("stop_reason"), "audit_flags": len(step.info.get("audit", []))}


def _total(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def episode_return(emobench_steps: list[list[dict[str, Any]]], log_metric: Callable[[str, float], None] | None = None,
                   **_: Any) -> list[float | None]:
    """The reward TRL optimises: the sum of an episode's step rewards (None when no step had one).
    Logs per-turn means of the reward and of every component as `emobench/turn{t}/{name}`."""
    if log_metric is not None:
        longest = max(len(steps) for steps in emobench_steps)
        for t in range(longest):
            for name in ("reward", *TURN_COMPONENTS):
                values = [s[t][name] for s in emobench_steps if len(s) > t and s[t][name] is not None]
                if values:
                    log_metric(f"emobench/turn{t + 1}/{name}", statistics.fmean(values))
        log_metric("emobench/turns", statistics.fmean(len(s) for s in emobench_steps))
        log_metric("emobench/audit_flags", statistics.fmean(s[-1]["audit_flags"] for s in emobench_steps))
    return [_total([s["reward"] for s in steps]) for steps in emobench_steps]


def _component(name: str) -> Callable[..., list[float | None]]:
    def component(emobench_steps: list[list[dict[str, Any]]], **_: Any) -> list[float | None]:
        return [_total([s[name] for s in steps]) for steps in emobench_steps]

    component.__name__ = name
    return component


def reward_funcs() -> tuple[list[Callable[..., list[float | None]]], list[float]]:
    """Reward functions and their GRPOConfig.reward_weights: the episode return counts (weight 1);
    each component is logged beside it (`rewards/<name>/mean`) with weight 0, so nothing counts twice."""
    components = [_component(name) for name in (*TURN_COMPONENTS, *TERMINAL_COMPONENTS)]
    return [episode_return, *components], [1.0] + [0.0] * len(components)
