"""Which form of a structured-output request an endpoint gets.

- ``portable``: the strict JSON schema as written, which hosted APIs and any OpenAI-compatible
  server accept.
- ``bounded``: the same schema with a character bound on every free-text field
  (structured_bounds.yaml), for vLLM servers emobench launches itself with a grammar backend
  that enforces the bounds and allows no free whitespace between tokens.

The role's record (RoleInfo.structured_output, ModelCall.structured_output) says which was sent.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml

from emobench.endpoints.client import ChatEndpoint, Completion, EndpointStats
from emobench.records import Sampling

StructuredForm = Literal["portable", "bounded"]
BOUNDS_FILE = Path(__file__).with_name("structured_bounds.yaml")

# Server options for the bounded form: llguidance enforces maxLength without compiling a state per
# character (xgrammar's compile time grew sharply with it), and no whitespace may run between
# JSON tokens, where a small model otherwise emits newline after newline until max_tokens.
VLLM_BOUNDED_SERVER_ARGS = (
    "--structured-outputs-config",
    orjson.dumps({"backend": "guidance", "disable_any_whitespace": True}).decode(),
)


@functools.cache
def load_json_object(text: str, finish_reason: str | None) -> dict[str, Any]:
    """The reply as a JSON object, or ValueError naming the fault: the first step of every parser."""
    # A reply cut at max_tokens may still parse (a closed prefix); it is not what the model meant.
    if finish_reason == "length":
        raise ValueError("truncated: the response hit max_tokens")
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def _bounds() -> tuple[int, Mapping[str, int], Mapping[str, int]]:
    data = yaml.safe_load(BOUNDS_FILE.read_text(encoding="utf-8"))
    return int(data["default_max_chars"]), dict(data["fields"]), dict(data.get("min_chars") or {})


def _bound(schema: Any, name: str | None) -> Any:
    if isinstance(schema, list):
        return [_bound(item, None) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _bound(value, None) for key, value in schema.items() if key not in ("properties", "items")}
    if "properties" in schema:
        out["properties"] = {prop: _bound(sub, prop) for prop, sub in schema["properties"].items()}
    if "items" in schema:
        out["items"] = _bound(schema["items"], name)
    if schema.get("type") == "string" and "enum" not in schema:
        default, fields, minimum = _bounds()
        out.setdefault("maxLength", fields.get(name or "", default))
        if name is not None and name in minimum:
            out["minLength"] = max(out.get("minLength", 0), minimum[name])
    return out


def bounded_format(response_format: dict[str, Any]) -> dict[str, Any]:
    """The response_format with every free-text string property bounded (see the module doc)."""
    spec = response_format.get("json_schema")
    if response_format.get("type") != "json_schema" or not isinstance(spec, dict) or "schema" not in spec:
        return response_format
    out = copy.copy(response_format)
    out["json_schema"] = {**spec, "schema": _bound(spec["schema"], None)}
    return out


class BoundedEndpoint:
    """Sends the bounded form of every structured request to the wrapped endpoint.

    It wraps the response cache, so the cache key holds the request that was actually sent.
    """

    def __init__(self, inner: ChatEndpoint) -> None:
        self._inner = inner
        self.name = inner.name
        self.model = inner.model
        self._formats: dict[bytes, dict[str, Any]] = {}

    @property
    def stats(self) -> EndpointStats:
        return self._inner.stats

    def _bounded(self, response_format: dict[str, Any]) -> dict[str, Any]:
        # The same few schema constants come back on every call: transform each once.
        key = orjson.dumps(response_format, option=orjson.OPT_SORT_KEYS)
        if key not in self._formats:
            self._formats[key] = bounded_format(response_format)
        return self._formats[key]

    async def complete(
        self, messages: list[dict[str, str]], sampling: Sampling, seed: int, response_format: dict[str, Any] | None = None
    ) -> Completion:
        sent = None if response_format is None else self._bounded(response_format)
        return await self._inner.complete(messages, sampling, seed, sent)

    async def aclose(self) -> None:
        await self._inner.aclose()
