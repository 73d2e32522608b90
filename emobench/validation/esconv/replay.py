"""`emobench validate --fidelity-replay esconv`: the simulator replays real ESConv seekers,
teacher-forced (docs/validity.md, "Replay against ESConv").

A chat is read as alternating blocks (consecutive turns by one speaker joined); supporter turns
before the seeker's first message are left out. For every seeker block after the first the
simulator gets the real conversation so far through its own prompt, output schema and retries,
with the meter its own earlier moves on this chat reached. Each finished chat is appended to a
JSONL file (only the simulator's turns), so an interrupted replay resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import jinja2.sandbox
from pydantic import BaseModel, ConfigDict

from emobench.config import RoleConfig, RunConfig
from emobench.endpoints.cache import ResponseCache
from emobench.endpoints.pool import EndpointPool
from emobench.episode.roles import derive_seed
from emobench.episode.simulator import USER_MOVE_FORMAT, parse_user_move, simulator_messages
from emobench.errors import InputError
from emobench.prompts import PromptTemplate
from emobench.records import Sampling
from emobench.registry import Case
from emobench.registry.hashing import sha256_hex
from emobench.run.runner import _caller
from emobench.validation.esconv.card import RECORD_FIELDS, record_case
from emobench.validation.esconv.data import EsconvChat
from emobench.yaml_io import read_yaml

STAND_IN = Path(__file__).with_name("esconv_seeker.yaml")
_env = jinja2.sandbox.SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False)


@dataclass(frozen=True)
class Target:
    """One real seeker turn the simulator writes: the k-th seeker block (k >= 2) and what came before."""

    index: int  # k, 1-based among the chat's seeker blocks
    history: tuple[tuple[str, str], ...]  # (seeker block, supporter block) for blocks 1..k-1
    real: str
    feedback: int | None  # the rating the seeker gave on this block (its last one), if any
    last: bool  # the person's last seeker block: after it they did not go on


def blocks(chat: EsconvChat) -> list[tuple[str, str, int | None]]:
    """(speaker, text, feedback) per run of turns by one speaker, from the seeker's first turn on."""
    out: list[tuple[str, str, int | None]] = []
    for turn in chat.turns:
        if not out and turn.speaker != "seeker":
            continue
        if out and out[-1][0] == turn.speaker:
            speaker, text, feedback = out[-1]
            out[-1] = (speaker, f"{text}\n{turn.text}", turn.feedback if turn.feedback is not None else feedback)
        else:
            out.append((turn.speaker, turn.text, turn.feedback))
    return out


def targets(chat: EsconvChat) -> list[Target]:
    runs = blocks(chat)
    seekers = [i for i, (speaker, _, _) in enumerate(runs) if speaker == "seeker"]
    out = []
    for k, at in enumerate(seekers[1:], start=2):
        # Blocks alternate, so runs[:at] is seeker, supporter, seeker, supporter, ...
        history = tuple((runs[i][1], runs[i + 1][1]) for i in range(0, at, 2))
        out.append(Target(index=k, history=history, real=runs[at][1], feedback=runs[at][2], last=k == len(seekers)))
    return out


def opening(chat: EsconvChat) -> str | None:
    runs = blocks(chat)
    return runs[0][1] if runs else None


@dataclass(frozen=True)
class SeekerSpec:
    """The stand-in file: its card with the record templates in place, the pinned sampling, and its provenance."""

    card: dict[str, Any]
    sampling: Sampling
    provenance: dict[str, Any]
    path: Path


def _with_templates(card: dict[str, Any], templates: dict[str, str], path: Path) -> dict[str, Any]:
    """The card with each from_record template at its field's path (a deep copy)."""
    out: dict[str, Any] = json.loads(json.dumps(card))
    for field, text in templates.items():
        *parents, leaf = field.split(".")
        node: Any = out
        for name in parents:
            node = node.get(name) if isinstance(node, dict) else None
        if not isinstance(node, dict) or leaf not in node:
            raise InputError(path, f"from_record.{field}", "the card has no such field")
        node[leaf] = text
    return out


def load_spec(path: Path = STAND_IN) -> SeekerSpec:
    data = read_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("card"), dict):
        raise InputError(path, "card", "missing mapping")
    templates = data.get("from_record")
    if not isinstance(templates, dict) or not all(isinstance(v, str) for v in templates.values()):
        raise InputError(path, "from_record", "must map card fields to template strings")
    try:
        for text in templates.values():
            _env.parse(text)  # a syntax error stops here, before any chat is read
        sampling = Sampling.model_validate(data.get("sampling"))
    except jinja2.TemplateSyntaxError as exc:
        raise InputError(path, "from_record", f"template syntax error: {exc.message}") from None
    except ValueError as exc:
        raise InputError(path, "sampling", str(exc).splitlines()[0]) from None
    provenance = {"file": path.name, "content_hash": sha256_hex(data), "card": data["card"],
                  "from_record": templates, "record_fields": list(RECORD_FIELDS)}
    return SeekerSpec(_with_templates(data["card"], templates, path), sampling, provenance, path)


def chat_case(spec: SeekerSpec, chat: EsconvChat) -> Case:
    """The simulator's card for one chat: the stand-in with the record's fields filled in and the
    seeker's own first message as the opening."""
    return record_case(spec.path, spec.card, chat, case_id=str(spec.card["id"]), opening=opening(chat))


class SimTurn(BaseModel):
    """The simulator's answer at one replayed seeker turn (message None: no valid reply)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int
    message: str | None
    meter_delta: int | None
    leave: bool | None
    meter: float  # the simulator's meter after this turn
    error: str | None = None


class ChatReplay(BaseModel):
    """One replayed chat, as a line of esconv_replay.jsonl."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str  # what the replay of this chat depends on; a resumed replay reuses a line only on the same key
    chat_id: str
    source: str
    meter_start: float
    turns: list[SimTurn]
    n_calls: int
    n_cached: int
    prompt_tokens: int
    completion_tokens: int


def replay_key(chat: EsconvChat, case: Case, template: PromptTemplate, user: dict[str, Any], seed: int, retries: int) -> str:
    text = json.dumps([chat.chat_id, [(t.speaker, t.text) for t in chat.turns], case.content_hash, template.version,
                       user, seed, retries], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_done(path: Path) -> dict[str, ChatReplay]:
    """Finished chats of an earlier replay, by key; a line cut by a crash is skipped (that chat reruns)."""
    done: dict[str, ChatReplay] = {}
    if not path.exists():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            item = ChatReplay.model_validate_json(line)
        except ValueError:
            continue
        done[item.key] = item
    return done


async def _replay_chat(
    caller: Any, template: PromptTemplate, case: Case, chat: EsconvChat, key: str, seed: int, retries: int,
    on_turn: Callable[[], None],
) -> ChatReplay:
    meter = start = float(case.persona.meter_start)
    turns, calls = [], []
    for target in targets(chat):
        messages = simulator_messages(template, case, list(target.history), meter, "")
        move, made, error = await caller.ask_valid(
            messages, lambda attempt, k=target.index: derive_seed(seed, "esconv-replay", chat.chat_id, k, attempt),
            template, USER_MOVE_FORMAT, lambda call: parse_user_move(call.text), retries)
        calls += made
        if move is None:
            turns.append(SimTurn(index=target.index, message=None, meter_delta=None, leave=None, meter=meter, error=error))
        else:
            meter = max(0.0, min(100.0, meter + move.meter_delta))
            turns.append(SimTurn(index=target.index, message=move.message, meter_delta=move.meter_delta,
                                 leave=move.leave, meter=meter))
        on_turn()
    return ChatReplay(key=key, chat_id=chat.chat_id, source=chat.source, meter_start=start, turns=turns,
                      n_calls=len(calls), n_cached=sum(c.cached for c in calls),
                      prompt_tokens=sum(c.prompt_tokens for c in calls),
                      completion_tokens=sum(c.completion_tokens for c in calls))


def user_role(binding: str, spec: SeekerSpec) -> RoleConfig:
    return RoleConfig(binding=binding, sampling=spec.sampling)


async def replay(
    chats: list[EsconvChat], role: RoleConfig, spec: SeekerSpec, template: PromptTemplate, *,
    cache: ResponseCache | None, log_dir: Path, done_file: Path, seed: int, tick: Callable[[str, int, int], None],
) -> tuple[list[ChatReplay], dict[str, Any]]:
    """Every chat replayed (reused from done_file where its key matches); the user role's provenance."""
    retries = int(RunConfig.model_fields["simulator_retries"].default)
    cases = {c.chat_id: chat_case(spec, c) for c in chats}
    earlier = read_done(done_file)
    total = sum(len(targets(c)) for c in chats)
    count = [0]

    def on_turn() -> None:
        count[0] += 1
        tick("replaying seeker turns", count[0], total)

    async with AsyncExitStack() as stack:
        pool = EndpointPool(stack, log_dir, cache)
        client, info = await pool.resolve(role)
        caller = _caller("user", client, info)
        user = {"label": info.label, "model": info.model, "sampling": info.sampling.model_dump(mode="json")}
        gate = asyncio.Semaphore(role.max_concurrency)
        done_file.parent.mkdir(parents=True, exist_ok=True)

        async def one(chat: EsconvChat) -> ChatReplay:
            key = replay_key(chat, cases[chat.chat_id], template, user, seed, retries)
            if key in earlier:
                for _ in targets(chat):
                    on_turn()
                return earlier[key]
            async with gate:
                result = await _replay_chat(caller, template, cases[chat.chat_id], chat, key, seed, retries, on_turn)
            with done_file.open("a", encoding="utf-8") as fh:  # one whole line per finished chat
                fh.write(result.model_dump_json() + "\n")
            return result

        tick("replaying seeker turns", 0, total)
        results = await asyncio.gather(*(one(c) for c in chats))
    reused = sum(1 for r in results if r.key in earlier)
    return list(results), {"user": user, "simulator_retries": retries, "template": template.ref,
                           "resumed_chats": reused, "results_file": done_file.name}
