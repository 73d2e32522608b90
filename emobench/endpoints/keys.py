"""Which key goes to which host: a key is sent only where the user said so.

A role's ``api_key_env`` names the variable whose value goes to that role's endpoints. Without
it, ``OPENAI_API_KEY`` goes to OpenAI's own API host only; any other host gets no key. litellm
would otherwise fill a missing key from ``OPENAI_API_KEY`` for every OpenAI-family provider,
wherever ``OPENAI_BASE_URL`` / ``OPENAI_API_BASE`` point it, so its calls are given their base
and key here.
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yarl

from emobench.endpoints.binding import Binding, parse_binding
from emobench.errors import InputError
from emobench.records import ParallelLayout, Sampling

OPENAI_HOST = "api.openai.com"
OPENAI_KEY = "OPENAI_API_KEY"
OPENAI_BASE = "https://api.openai.com/v1"
# litellm's OpenAI-family clients insist on some key; this one stands for "none" and is no secret.
NO_KEY = "no-key"
# The litellm providers that fall back to OPENAI_API_KEY and OPENAI_BASE_URL / OPENAI_API_BASE.
_OPENAI_FAMILY = {"openai", "text-completion-openai", "aiohttp_openai", "custom_openai"}


class ParallelSettings(Protocol):
    def layout(self) -> ParallelLayout: ...


class RoleSettings(Protocol):
    """What the endpoints need of a role (the config's RoleConfig has it): read-only."""

    @property
    def binding(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def sampling(self) -> Sampling: ...
    @property
    def max_concurrency(self) -> int: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def retries(self) -> int: ...
    @property
    def api_key_env(self) -> str | None: ...
    @property
    def server_args(self) -> Sequence[str]: ...
    @property
    def parallel(self) -> ParallelSettings | None: ...


def host(url: str) -> str:
    return (yarl.URL(url).host or "").lower()


def is_openai(url: str) -> bool:
    return host(url) == OPENAI_HOST


def is_loopback(url: str) -> bool:
    name = host(url)
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def key_variable(url: str, api_key_env: str | None) -> str | None:
    """The variable whose value may go to ``url``: the role's own, else OPENAI_API_KEY for
    OpenAI's host only."""
    if api_key_env:
        return api_key_env
    return OPENAI_KEY if is_openai(url) else None


def key_for(url: str, api_key_env: str | None) -> str | None:
    """The key to send to ``url``, read from the environment now (never stored), or None."""
    variable = key_variable(url, api_key_env)
    return read_key(variable) if variable else None


def read_key(variable: str) -> str | None:
    """The value of a key variable, or None when unset; see sendable."""
    return sendable(variable, os.environ.get(variable) or None)


def sendable(variable: str, value: str | None) -> str | None:
    """``value``, or InputError naming ``variable`` when an HTTP header cannot carry it (a pasted
    placeholder's `…`, a space, a line break): every call would fail on it, retried as a fault."""
    bad = next(((i, ch) for i, ch in enumerate(value or "") if not "!" <= ch <= "~"), None)
    if bad is not None:  # the key itself is never printed
        raise InputError(variable, "", f"the key holds U+{ord(bad[1]):04X} at character {bad[0] + 1}, which an HTTP "
                         "header cannot carry; set the key itself, not a placeholder")
    return value


def import_litellm() -> Any:
    """litellm, imported with its bundled price map unless the user chose otherwise: its fetch of
    the remote one at import prints 2-4 warning lines and sleeps seconds when offline."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


@dataclass(frozen=True)
class LiteLLMTarget:
    """Where a ``litellm:`` model's calls go when its provider speaks OpenAI's API: the base
    URL and model id litellm will use. None of this is known for other providers."""

    base_url: str
    model: str
    provider_key: str | None  # the provider's own key variable's value (DEEPSEEK_API_KEY, ...)


def litellm_target(model: str) -> LiteLLMTarget | None:
    """The OpenAI-compatible base a ``litellm:`` model reaches (its provider's, or OPENAI_BASE_URL
    / OPENAI_API_BASE for openai/), or None for a provider with its own API."""
    litellm = import_litellm()
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # litellm prints a banner on unknown providers
            name, provider, key, base = litellm.get_llm_provider(model)
    except Exception:  # an unknown provider: litellm's call will say so
        return None
    if key:  # the provider's own key variable (DEEPSEEK_API_KEY, ...), named by its value
        sendable(next((k for k, v in os.environ.items() if v == key), f"{provider}'s key variable"), key)
    if provider not in _OPENAI_FAMILY and provider not in set(litellm.openai_compatible_providers):
        return None
    base = base or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or OPENAI_BASE
    return LiteLLMTarget(str(base).rstrip("/"), name, key or None)


def litellm_call_params(model: str, api_key_env: str | None) -> dict[str, Any]:
    """The ``api_key`` (and ``api_base``) a ``litellm:`` call is given, so that litellm never
    fills in OPENAI_API_KEY for a host it does not belong to."""
    if api_key_env:
        key = read_key(api_key_env)
        return {"api_key": key} if key else {}
    target = litellm_target(model)
    if target is not None and not target.provider_key and is_openai(target.base_url):
        read_key(OPENAI_KEY)  # litellm reads it itself: refused here when no header could carry it
    if target is None or target.provider_key or is_openai(target.base_url):
        return {}  # litellm reads the provider's own key, or OPENAI_API_KEY for OpenAI itself
    return {"api_base": target.base_url, "api_key": NO_KEY}


def require_keys(roles: Iterable[tuple[str, RoleSettings]], source: str | Path) -> None:
    """Refuse, before the first call, a role whose key variable is not set: its ``api_key_env``,
    or OPENAI_API_KEY for a role bound to OpenAI's own host."""
    for field, role in roles:
        binding = parse_binding(role.binding)
        if binding.kind not in ("openai", "litellm"):
            continue
        for variable in (role.api_key_env, OPENAI_KEY if any(map(is_openai, role_urls(binding))) else None):
            try:
                read_key(variable) if variable else None
            except InputError as exc:
                raise InputError(source, f"{field}.api_key_env", f"the {role.name} role's key variable {variable}: "
                                 f"{exc.problem}") from None
        if role.api_key_env and not os.environ.get(role.api_key_env):
            raise InputError(
                source, f"{field}.api_key_env", f"the {role.name} role's key variable {role.api_key_env} is not set"
            )
        openai_urls = [u for u in binding.base_urls if is_openai(u)]
        if openai_urls and not role.api_key_env and not os.environ.get(OPENAI_KEY):
            raise InputError(
                source, f"{field}.binding", f"the {role.name} role calls {OPENAI_HOST}, which needs {OPENAI_KEY}; it is not set"
            )


def role_urls(binding: Binding) -> list[str]:
    """The base URLs an ``openai:`` role, or a ``litellm:`` role on an OpenAI-compatible
    provider, will call."""
    if binding.kind == "openai":
        return list(binding.base_urls)
    if binding.kind == "litellm":
        target = litellm_target(binding.model)
        return [target.base_url] if target else []
    return []


def migration_hint(roles: Iterable[tuple[str, RoleSettings]]) -> str | None:
    """One line for a user who relied on OPENAI_API_KEY reaching another remote host."""
    if not os.environ.get(OPENAI_KEY):
        return None
    hosts: list[str] = []
    for _, role in roles:
        if role.api_key_env:
            continue
        binding = parse_binding(role.binding)
        if binding.kind == "litellm" and (target := litellm_target(binding.model)) and target.provider_key:
            continue  # the provider's own key goes there
        for url in role_urls(binding):
            if not is_openai(url) and not is_loopback(url) and host(url) not in hosts:
                hosts.append(host(url))
    if not hosts:
        return None
    return (
        f"note: {OPENAI_KEY} is no longer sent to {', '.join(hosts)}; add `api_key_env: {OPENAI_KEY}` "
        "to the role if that host expects it"
    )
