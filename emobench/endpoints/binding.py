"""Role binding strings: which server or provider plays a role.

- ``vllm:<hf-model-or-path>``: emobench launches a vLLM OpenAI server and stops it afterwards;
  ``vllm:embedded`` is the bundled SmolLM2-135M-Instruct.
- ``openai:<model>@<base_url>[,<base_url>...]``: any OpenAI-compatible server; several base
  URLs are replicas of one model, spread by the litellm Router. A base URL is any http(s) URL
  (``…/v1``, ``https://api.deepseek.com``, ``…/v1beta/openai/``); the clients append
  ``/chat/completions`` and ``/models`` to it as given, a trailing slash dropped.
- ``litellm:<provider/model>``: any litellm provider.
- ``scripted:echo|platitude|advice|dismissive``: a reference subject answered in-process from
  a lines file, with no model behind it (docs/validity.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import yarl

from emobench.errors import InputError

EMBEDDED = "embedded"

Kind = Literal["vllm", "openai", "litellm", "scripted"]
SCRIPTED = ("echo", "platitude", "advice", "dismissive")


@dataclass(frozen=True)
class Binding:
    kind: Kind
    model: str
    base_urls: tuple[str, ...] = ()

    @property
    def spec(self) -> str:
        if self.kind == "openai":
            return f"openai:{self.model}@{','.join(self.base_urls)}"
        return f"{self.kind}:{self.model}"


def parse_binding(spec: str, *, source: str = "role", field: str = "binding") -> Binding:
    """Parse a binding string, naming the source and field in any error."""
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise InputError(
            source, field, f"bad role binding {spec!r}: expected vllm:MODEL, openai:MODEL@URL or litellm:PROVIDER/MODEL"
        )
    if kind == "vllm":
        return Binding("vllm", rest)
    if kind == "litellm":
        if "/" not in rest:
            raise InputError(source, field, f"bad role binding {spec!r}: litellm needs PROVIDER/MODEL")
        return Binding("litellm", rest)
    if kind == "scripted":
        if rest not in SCRIPTED:
            raise InputError(source, field, f"bad role binding {spec!r}: scripted subjects are {', '.join(SCRIPTED)}")
        return Binding("scripted", rest)
    if kind == "openai":
        model, at, urls = rest.rpartition("@")
        if not at or not model:
            raise InputError(source, field, f"bad role binding {spec!r}: expected openai:MODEL@BASE_URL")
        base_urls = tuple(u.strip().rstrip("/") for u in urls.split(",") if u.strip())
        for url in base_urls:
            problem = _url_problem(url)
            if problem:
                raise InputError(source, field, f"bad base URL {url!r} in {spec!r}: {problem}")
        if not base_urls:
            raise InputError(source, field, f"bad role binding {spec!r}: no base URL")
        return Binding("openai", model, base_urls)
    raise InputError(source, field, f"bad role binding {spec!r}: unknown kind {kind!r} (vllm, openai, litellm, scripted)")


def _url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a base URL, or None; checked here so that no client meets it later."""
    if not url.startswith(("http://", "https://")):
        return "must start with http:// or https://"
    if any(c.isspace() or not c.isprintable() for c in url):
        return "contains a space or a control character"
    try:
        parsed = yarl.URL(url)
        host, port = parsed.host, parsed.explicit_port
    except ValueError as exc:  # a port out of range, an unclosed IPv6 bracket, a host IDNA rejects
        return str(exc)
    if not host:
        return "no host"
    if parsed.query_string or parsed.fragment or "?" in url or "#" in url:
        return "has a query or a fragment; give the base URL alone (the client appends /chat/completions)"
    if port is not None and not 0 < port < 65536:
        return f"port {port} is out of range 1-65535"
    return None
