"""Inspect's models in emobench's role seats: each role's calls go through inspect's Model.generate.

The subject is the model under evaluation; `user`, `judge` (`judge_2`, … for a panel) and
`director` are inspect model roles. A role inspect names none of keeps the config's binding,
played by emobench's own client (openai:, litellm:, scripted:); a vllm: binding is started by
`emobench run` only, so there it must be named as an inspect role (vllm/…).
"""

from __future__ import annotations

import re
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
    ResponseSchema,
    get_model,
    model_roles,
)
from inspect_ai.util import JSONSchema

from emobench.config import RoleConfig, RunConfig
from emobench.endpoints.binding import parse_binding
from emobench.endpoints.client import Completion
from emobench.endpoints.pool import EndpointPool
from emobench.episode.roles import RoleCaller, role_caller
from emobench.errors import InputError
from emobench.records import RoleInfo, Sampling
from emobench.run.binding import BoundRoles

JUDGE_ROLE = re.compile(r"^judge(?:_(\d+))?$")
# inspect's stop reasons in the words of the chat-completions API the parsers read ("length": cut short).
FINISH = {"max_tokens": "length", "model_length": "length", "stop": "stop", "content_filter": "content_filter",
          "tool_calls": "tool_calls", "unknown": None}
_MESSAGE = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}


def chat_messages(messages: list[dict[str, str]]) -> list[ChatMessage]:
    return [_MESSAGE[m["role"]](content=m["content"]) for m in messages]


def generate_config(sampling: Sampling, seed: int, response_format: dict[str, Any] | None) -> GenerateConfig:
    """The request emobench's clients send (endpoints/client.py chat_params), as inspect's config."""
    schema = None
    if response_format is not None:
        spec = response_format["json_schema"]
        schema = ResponseSchema(name=spec["name"], json_schema=JSONSchema.model_validate(spec["schema"]),
                                strict=spec.get("strict"))
    return GenerateConfig(
        temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens, seed=seed,
        frequency_penalty=sampling.frequency_penalty, presence_penalty=sampling.presence_penalty, response_schema=schema,
    )


def inspect_caller(role: str, model: Model, sampling: Sampling, label: str | None = None) -> RoleCaller:
    """A role played by an inspect model; its record names the model as inspect does."""
    name = str(model)
    info = RoleInfo(label=label or name, model=model.name, endpoint=f"inspect:{name}", sampling=sampling)

    async def call(messages: list[dict[str, str]], seed: int, response_format: dict[str, Any] | None) -> Completion:
        started = time.perf_counter()
        output = await model.generate(chat_messages(messages), config=generate_config(sampling, seed, response_format))
        usage = output.usage
        # inspect counts input tokens without those read from or written to the prompt cache;
        # emobench's prompt_tokens holds them all, the cached ones among them (records.ModelCall).
        read = (usage.input_tokens_cache_read or 0) if usage else 0
        written = (usage.input_tokens_cache_write or 0) if usage else 0
        return Completion(
            text=output.completion,
            finish_reason=FINISH.get(output.stop_reason, output.stop_reason),
            prompt_tokens=usage.input_tokens + read + written if usage else 0,
            completion_tokens=usage.output_tokens if usage else 0,
            latency_s=output.time if output.time is not None else time.perf_counter() - started,
            cached_prompt_tokens=read,
            cache_write_tokens=written,
        )

    return RoleCaller(role=role, info=info, call=call)


def judge_models() -> list[Model]:
    """The inspect roles judge, judge_2, judge_3, … in that order."""
    named = []
    for role in model_roles():
        found = JUDGE_ROLE.match(role)
        if found:
            named.append((int(found.group(1) or 1), role))
    return [get_model(role=role) for _, role in sorted(named)]


async def bind_inspect_roles(
    config: RunConfig, stack: AsyncExitStack, log_dir: Path, subject_from_config: bool = False
) -> BoundRoles:
    """Every role of one sample: inspect's where inspect names it, else the config's binding; the
    subject is inspect's model unless subject_from_config (a scripted reference, -T subject=…)."""
    pool: EndpointPool | None = None

    async def fallback(role: str, rc: RoleConfig) -> RoleCaller:
        nonlocal pool
        pool = pool or EndpointPool(stack, log_dir)
        client, info = await pool.resolve(rc)
        return role_caller(role, client, info)

    roles = model_roles()
    subject = (await fallback("subject", config.subjects[0]) if subject_from_config
               else inspect_caller("subject", get_model(), config.subjects[0].sampling))
    user = (inspect_caller("user", get_model(role="user"), config.user.sampling) if "user" in roles
            else await fallback("user", config.user))
    named = judge_models()
    if named:
        samplings = [config.judges[min(i, len(config.judges) - 1)].sampling for i in range(len(named))]
        # Labelled as `emobench run --judge` labels them: several are judge-0, judge-1, … (a judge's
        # label is part of its requests' seeds, so the same panel sends the same requests).
        labels = [f"judge-{i}" if len(named) > 1 else None for i in range(len(named))]
        judges = [inspect_caller("judge", m, s, label) for m, s, label in zip(named, samplings, labels, strict=True)]
    else:
        judges = [await fallback("judge", j) for j in config.judges]
    director = None
    if "director" in roles:
        sampling = config.director.sampling if config.director else Sampling()
        director = inspect_caller("director", get_model(role="director"), sampling)
    elif config.director is not None:
        director = await fallback("director", config.director)
    return BoundRoles(user=user, judges=tuple(judges), subjects=[subject], director=director)


def check_defaults(config: RunConfig, subject_from_config: bool) -> None:
    """Refuse, before anything plays, a role left to a config binding that only `emobench run` can start."""
    roles = model_roles()
    left = [("user", "user", config.user)] if "user" not in roles else []
    if not judge_models():
        left += [("judge", f"panel.judges[{i}]", j) for i, j in enumerate(config.judges)]
    if config.director is not None and "director" not in roles:
        left.append(("director", "director", config.director))
    if subject_from_config:
        left.append(("subject", "subjects[0]", config.subjects[0]))
    for role, place, rc in left:
        if parse_binding(rc.binding, source="config", field=place).kind == "vllm":
            raise InputError("config", f"{place}.binding", f"{rc.binding} is started by `emobench run` only; name the "
                             f"role for inspect instead (--model-role {role}=vllm/MODEL)")


def played_config(config: RunConfig, bound: BoundRoles) -> RunConfig:
    """The config as played: every role labelled by what played it, so the config hash tells
    evaluations of different models apart (the bindings stay the config's defaults)."""

    def labelled(rc: RoleConfig, caller: RoleCaller) -> RoleConfig:
        return rc.model_copy(update={"label": caller.info.label, "sampling": caller.info.sampling})

    judges = [labelled(config.judges[min(i, len(config.judges) - 1)], j) for i, j in enumerate(bound.judges)]
    update: dict[str, Any] = {
        "subjects": [labelled(config.subjects[0], bound.subjects[0])],
        "user": labelled(config.user, bound.user),
        "panel": config.panel.model_copy(update={"judges": judges}),
    }
    if bound.director is not None:  # a director only inspect named: its binding is recorded as the model it was
        default = config.director or RoleConfig(binding=f"litellm:{bound.director.info.label}")
        update["director"] = labelled(default, bound.director)
    return config.model_copy(update=update)
