"""A reader for meaning (`emobench scenarios validate --reader BINDING`): a model reads
each case's prose against its persona's facts and needs (prompts/reader.j2) and returns
structured findings, one line each naming file and field.

The rules in checks/ read words; on paraphrases written apart from them they catch a fraction
of what they catch on their own kit (scenarios/README.md). A reader is never run by default: it
costs a call per case and answers only as well as its model. Its readings are cached under the
user cache by the case's hash (which folds in both cards), the template's version and the
binding, so an unchanged library is read once.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from emobench.config import RoleConfig
from emobench.endpoints.binding import parse_binding
from emobench.endpoints.client import ChatEndpoint
from emobench.endpoints.pool import EndpointPool
from emobench.endpoints.structured import load_json_object
from emobench.errors import EndpointError, InputError
from emobench.prompts import ROOT, PromptTemplate, load_template
from emobench.records import Sampling
from emobench.registry.checks.fields import Field as ProseField
from emobench.registry.checks.fields import case_fields, persona_fields, scenario_fields
from emobench.registry.hashing import sha256_hex
from emobench.registry.loader import Registry, display_path
from emobench.registry.models import Case
from emobench.user_cache import cache_root

TEMPLATE = ROOT / "prompts" / "reader.j2"
# Greedy and long enough for a card's worth of findings; retries cover transient faults only.
SAMPLING = Sampling(temperature=0.0, top_p=1.0, max_tokens=2048)

_FINDING = {
    "type": "object",
    "properties": {
        "file": {"type": "string", "minLength": 1},
        "field": {"type": "string", "minLength": 1},
        "quote": {"type": "string", "minLength": 1},
        "contradicts": {"type": "string", "minLength": 1},
    },
    "required": ["file", "field", "quote", "contradicts"],
    "additionalProperties": False,
}
READER_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "card_findings",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"findings": {"type": "array", "items": _FINDING}},
            "required": ["findings"],
            "additionalProperties": False,
        },
    },
}


class Finding(BaseModel):
    """One fault a reader found: where, the words, and the fact or rule they break."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str = Field(min_length=1)
    field: str = Field(min_length=1)
    quote: str = Field(min_length=1)
    contradicts: str = Field(min_length=1)

    def problem(self, root: Path) -> InputError:
        """The finding as a problem naming the file as the rules name it (it was read relative
        to the library root)."""
        return InputError(display_path(root / self.file), self.field,
                          f"the reader: {self.quote!r} contradicts {self.contradicts}")


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    findings: list[Finding]


@dataclass(frozen=True)
class Reading:
    """What one case puts before the reader."""

    case: Case
    fields: list[ProseField]
    messages: list[dict[str, str]]
    key: str


def _within(reg: Registry, file: str | Path) -> str:
    """A card's path relative to the library root, as the reader sees it: a copy of the library
    elsewhere reads the same, and so hits the same cache entries."""
    return Path(file).resolve().relative_to(reg.root.resolve()).as_posix()


def readings(reg: Registry, template: PromptTemplate, binding: str) -> list[Reading]:
    """One reading per case of the edition, each with its cache key."""
    out = []
    for case in reg.edition_cases():
        fields = [ProseField(_within(reg, f.file), f.field, f.text, f.memory, f.since) for f in
                  [*case_fields(reg, case), *persona_fields(reg, case.persona), *scenario_fields(reg, case.scenario)]]
        context = {
            "present_year": reg.info.present_year, "persona": case.persona, "scenario": case.scenario,
            "persona_file": _within(reg, reg.current.personas[case.persona.id][0]),
            "scenario_file": _within(reg, reg.current.scenarios[case.scenario.id][0]),
            "hidden_need": case.case_need,
            "fields": [{"file": f.file, "field": f.field, "text": f.text, "year": f.since if f.memory else None}
                       for f in fields],
        }
        messages = [{"role": "system", "content": template.block("system", **context)},
                    {"role": "user", "content": template.block("user", **context)}]
        # The case hash folds in both cards; the messages add what else the reader is shown
        # (the present year, the file names), and the template and binding who reads it.
        key = sha256_hex({"case": case.content_hash, "template": template.ref, "binding": binding,
                          "messages": messages})
        out.append(Reading(case, fields, messages, key))
    return out


def _parse(text: str, finish_reason: str | None, reading: Reading) -> list[Finding]:
    """The findings of one answer, or ValueError naming what is wrong."""
    data = load_json_object(text, finish_reason)
    try:
        findings = _Answer.model_validate(data).findings
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
    offered = {(f.file, f.field) for f in reading.fields}
    for finding in findings:
        if (finding.file, finding.field) not in offered:
            raise ValueError(f"a finding names {finding.file}: {finding.field}, which case {reading.case.id} "
                             "does not show")
    return findings


class ReaderCache:
    """Each reading's findings as a JSON file named by its key."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or cache_root() / "reader"

    def get(self, key: str) -> list[Finding] | None:
        try:
            data = json.loads((self.folder / f"{key}.json").read_text(encoding="utf-8"))
            return _Answer.model_validate(data).findings
        except (OSError, ValueError):
            return None  # absent, or unreadable: read the case again

    def put(self, key: str, findings: list[Finding]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{key}.json"
        temporary = path.with_suffix(".tmp")
        temporary.write_text(_Answer(findings=findings).model_dump_json(), encoding="utf-8")
        temporary.replace(path)  # a reader stopped mid-write leaves no half file to trust


async def _read_one(client: ChatEndpoint, endpoint: str, reading: Reading, cache: ReaderCache) -> list[Finding]:
    if (cached := cache.get(reading.key)) is not None:
        return cached
    completion = await client.complete(reading.messages, SAMPLING, 0, READER_FORMAT)
    try:
        findings = _parse(completion.text, completion.finish_reason, reading)
    except ValueError as exc:
        raise EndpointError(endpoint, f"the reader's answer on case {reading.case.id} is not findings: {exc}") from None
    cache.put(reading.key, findings)
    return findings


async def read_library(reg: Registry, binding: str, cache: ReaderCache | None = None,
                       max_concurrency: int = 4) -> list[InputError]:
    """The reader's findings on every case of the edition, each once, as problems naming file and field."""
    spec = parse_binding(binding, source="--reader", field="binding")
    if spec.kind == "scripted":
        raise InputError("--reader", "binding", f"{binding!r} answers from a lines file and cannot read a card")
    template = load_template(TEMPLATE)
    cache = cache or ReaderCache()
    todo = readings(reg, template, spec.spec)
    role = RoleConfig(binding=binding, label="reader", sampling=SAMPLING, max_concurrency=max_concurrency)
    async with AsyncExitStack() as stack:
        pending = [r for r in todo if cache.get(r.key) is None]
        if pending:  # an endpoint is started or reached only when a case is not in the cache
            pool = EndpointPool(stack, cache.folder / "logs")
            client, info = await pool.resolve(role)
            # every call runs to its end, so what was read is cached and no connection is cut
            outcomes = await asyncio.gather(*(_read_one(client, info.endpoint, r, cache) for r in pending),
                                            return_exceptions=True)
            if failed := next((o for o in outcomes if isinstance(o, BaseException)), None):
                raise failed
    seen: dict[str, InputError] = {}
    for reading in todo:
        for finding in cache.get(reading.key) or []:
            problem = finding.problem(reg.root)
            seen.setdefault(str(problem), problem)  # a scenario is read once per player
    return list(seen.values())


def read(reg: Registry, binding: str, cache: ReaderCache | None = None) -> list[InputError]:
    return asyncio.run(read_library(reg, binding, cache))
