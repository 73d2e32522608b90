"""Reference subjects with no model behind them (docs/validity.md): ``scripted:echo``,
``scripted:platitude``, ``scripted:advice`` and ``scripted:dismissive``.

They answer in-process, deterministically from the request's seed, with the lean client's
interface, so they run through the same episode path as any model and cost no model call.
Their lines are data (prompts/scripted/NAME.yaml, and prompts/scripted/zh/NAME.yaml for Chinese
conversations); a call's template version is the content hash of that file, "zh-" first for
Chinese. A structured request (the persona probe) gets the file's honest ``no_answer``, which
no parser accepts, so it is recorded invalid instead of breaking a run.

The client is bound once per role, not per case, so the conversation itself says which lines
to use: Chinese when the person's first message has Chinese characters (a Chinese case's
opening always has), English otherwise.
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from emobench.endpoints.client import Completion, EndpointStats
from emobench.errors import InputError
from emobench.library_paths import library_root
from emobench.records import Sampling

LINES_DIR = library_root() / "prompts" / "scripted"
ENDPOINT = "in-process"
LANGUAGES = ("en", "zh")
# CJK Unified Ideographs and Extension A: what written Chinese is made of.
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


class _Lines(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["echo", "rotate", "fixed"]
    lines: list[str] = Field(default_factory=list)
    no_answer: str = Field(min_length=1)


@dataclass(frozen=True)
class ScriptedLines:
    name: str
    version: str  # content hash of the lines file
    mode: str
    lines: tuple[str, ...]
    no_answer: str

    @property
    def ref(self) -> str:
        return f"scripted-{self.name}@{self.version}"


@lru_cache(maxsize=16)
def load_lines(name: str, folder: Path = LINES_DIR, language: str = "en") -> ScriptedLines:
    path = folder / f"{name}.yaml" if language == "en" else folder / language / f"{name}.yaml"
    try:
        source = path.read_text(encoding="utf-8")
        data = _Lines.model_validate(yaml.safe_load(source))
    except OSError as exc:
        raise InputError(path, "", f"cannot read the scripted subject's lines: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise InputError(path, "", f"YAML syntax error: {exc}") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(path, ".".join(str(p) for p in err["loc"]), err["msg"]) from None
    if data.mode != "echo" and not data.lines:
        raise InputError(path, "lines", f"mode {data.mode!r} needs at least one line")
    digest = hashlib.sha256(source.encode()).hexdigest()[:10]
    version = digest if language == "en" else f"{language}-{digest}"
    return ScriptedLines(name, version, data.mode, tuple(data.lines), data.no_answer)


def conversation_language(messages: list[dict[str, str]]) -> str:
    """"zh" when the person's first message has Chinese characters, else "en"."""
    first = next((m["content"] for m in messages if m.get("role") == "user"), "")
    return "zh" if _HAN.search(first) else "en"


def scripted_reply(lines: ScriptedLines, messages: list[dict[str, str]], seed: int) -> str:
    """The reply to a conversation: a pure function of the lines, the messages and the seed."""
    if lines.mode == "echo":
        users = [m["content"] for m in messages if m.get("role") == "user"]
        return users[-1] if users else lines.no_answer
    if lines.mode == "fixed":
        return "\n".join(lines.lines)
    previous = next((m["content"] for m in reversed(messages) if m.get("role") == "assistant"), None)
    pick = random.Random(seed).randrange(len(lines.lines))
    if lines.lines[pick] == previous and len(lines.lines) > 1:
        pick = (pick + 1) % len(lines.lines)  # rotate: never the same line twice in a row
    return lines.lines[pick]


class ScriptedClient:
    """A ChatEndpoint that answers from a lines file, in-process, without HTTP."""

    def __init__(self, name: str, folder: Path = LINES_DIR) -> None:
        # Every language's lines are read here, so a broken file stops the run before its first call.
        self.by_language = {language: load_lines(name, folder, language) for language in LANGUAGES}
        self.name = ENDPOINT
        self.model = f"scripted:{name}"
        self.stats = EndpointStats()

    async def complete(
        self, messages: list[dict[str, str]], sampling: Sampling, seed: int, response_format: dict[str, Any] | None = None
    ) -> Completion:
        started = time.perf_counter()
        lines = self.by_language[conversation_language(messages)]
        text = lines.no_answer if response_format is not None else scripted_reply(lines, messages, seed)
        self.stats.calls += 1
        return Completion(
            text=text,
            finish_reason="stop",
            prompt_tokens=0,
            completion_tokens=0,
            latency_s=time.perf_counter() - started,
            template=lines.ref,
        )

    async def aclose(self) -> None:
        return None
