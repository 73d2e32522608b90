"""Resolve role bindings to live endpoints: launch vLLM servers, give every role its own client.

Roles that call the same server share its connections, never a key, timeout, concurrency cap
or retry budget they did not ask for.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path

from emobench.endpoints.binding import EMBEDDED, Binding, parse_binding
from emobench.endpoints.cache import CachedEndpoint, ResponseCache
from emobench.endpoints.client import ChatEndpoint, OpenAICompatClient, RetryPolicy, SharedSessions
from emobench.endpoints.embedded import (
    SERVED_NAME,
    URL_ENV,
    attach_embedded,
    embedded_server_args,
    prepare_embedded_model,
    served_dtype,
)
from emobench.endpoints.keys import RoleSettings, require_keys
from emobench.endpoints.litellm_client import LiteLLMClient
from emobench.endpoints.reach import Unreachable, list_models
from emobench.endpoints.scripted import ENDPOINT, ScriptedClient
from emobench.endpoints.structured import VLLM_BOUNDED_SERVER_ARGS, BoundedEndpoint, StructuredForm
from emobench.endpoints.vllm_server import parallel_args, vllm_server
from emobench.errors import EndpointError, InputError
from emobench.records import RoleInfo


class EndpointPool:
    """Owns every server and client of a run; closing it stops them all."""

    def __init__(
        self,
        stack: AsyncExitStack,
        log_dir: Path,
        cache: ResponseCache | None = None,
        on_fault: Callable[[str, str], Awaitable[None] | None] | None = None,
        wrap: Callable[[ChatEndpoint], ChatEndpoint] | None = None,
    ) -> None:
        self._stack = stack
        self._wrap = wrap  # a model client goes through it before the cache (judge --batch: the Batch API)
        self._on_fault = on_fault  # (endpoint, kind) of every transient fault, as it happens
        self._log_dir = log_dir
        self._cache = cache
        # (vllm model, server args) -> (base_url, served name, dtype or None when vLLM chooses)
        self._servers: dict[tuple[str, tuple[str, ...]], tuple[str, str, str | None]] = {}
        self._clients: list[ChatEndpoint] = []
        self._sessions = SharedSessions()
        stack.push_async_callback(self._sessions.aclose)  # after every client is closed

    async def _vllm(self, model: str, server_args: tuple[str, ...]) -> tuple[str, str, str | None]:
        key = (model, server_args)
        if key not in self._servers and model == EMBEDDED and not server_args and os.environ.get(URL_ENV):
            url = os.environ[URL_ENV].rstrip("/")
            self._servers[key] = (url, SERVED_NAME, await attach_embedded(url))
        if key not in self._servers:
            dtype = _dtype_arg(server_args)
            path, served = model, model
            args: tuple[str, ...] = VLLM_BOUNDED_SERVER_ARGS
            if model == EMBEDDED:
                if dtype is None:  # the dtype this machine serves fastest
                    dtype = served_dtype()
                    args = embedded_server_args(dtype)
                path, served = str(prepare_embedded_model(dtype)), SERVED_NAME
            slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", served) + (f"-{len(self._servers)}" if self._servers else "")
            log = self._log_dir / f"vllm-{slug}.log"
            args = (*args, *server_args)
            base = await self._stack.enter_async_context(vllm_server(path, served, log, extra_args=args))
            try:  # the server is up: reached as preflight reaches every other endpoint
                listed = (await list_models(base, None, None)).models
            except Unreachable as exc:
                raise EndpointError(base, str(exc)) from None
            if served not in listed:
                raise EndpointError(base, f"serves {', '.join(listed) or 'no model'}, not {served}")
            self._servers[key] = (base, served, dtype)
        return self._servers[key]

    def _client(self, identity: str, make: Callable[[], ChatEndpoint]) -> ChatEndpoint:
        client = make()
        if self._on_fault is not None:
            client.stats.sink = partial(self._on_fault, client.name)
        if self._wrap is not None:
            client = self._wrap(client)
        if self._cache is not None:
            client = CachedEndpoint(client, self._cache, identity)
        self._clients.append(client)
        self._stack.push_async_callback(client.aclose)
        return client

    async def resolve(self, role: RoleSettings) -> tuple[ChatEndpoint, RoleInfo]:
        binding: Binding = parse_binding(role.binding)
        # Commands without a preflight (calibrate, validate, the training env) meet it here, still
        # before their first call.
        require_keys([("role", role)], role.name)
        cap, timeout, key_env = role.max_concurrency, role.timeout_s, role.api_key_env
        retry = RetryPolicy(attempts=role.retries + 1)
        form: StructuredForm = "portable"
        dtype: str | None = None
        if binding.kind == "scripted":
            # In-process and free: no server, and no cache (answering costs less than a lookup).
            client: ChatEndpoint = ScriptedClient(binding.model)
            endpoint = ENDPOINT
        elif binding.kind == "vllm":
            layout = role.parallel.layout() if role.parallel is not None else None
            if layout is not None and layout.executor == "ray" and importlib.util.find_spec("ray") is None:
                raise InputError(role.name, "parallel.executor", "ray needs Ray installed beside vLLM (pip install ray)")
            server_args = (*parallel_args(layout), *role.server_args)
            base, served, dtype = await self._vllm(binding.model, server_args)
            # Answers of two dtypes (or two server settings) never share cache entries.
            identity = " ".join((binding.spec, *(("--dtype", dtype) if dtype else ()), *server_args))
            client = self._client(
                identity,
                lambda: OpenAICompatClient(
                    base, served, max_concurrency=cap, timeout_s=timeout, retry=retry, sessions=self._sessions
                ),
            )
            # emobench started this server with a grammar backend that enforces the bounded form.
            client, form = BoundedEndpoint(client), "bounded"
            endpoint = f"{binding.spec} ({base})"
        elif binding.kind == "openai" and len(binding.base_urls) == 1:
            url = binding.base_urls[0]
            client = self._client(
                url,
                lambda: OpenAICompatClient(
                    url,
                    binding.model,
                    max_concurrency=cap,
                    timeout_s=timeout,
                    api_key_env=key_env,
                    retry=retry,
                    sessions=self._sessions,
                ),
            )
            endpoint = url
        else:
            client = self._client(
                binding.spec,
                lambda: LiteLLMClient(
                    binding.model,
                    base_urls=binding.base_urls,
                    max_concurrency=cap,
                    timeout_s=timeout,
                    api_key_env=key_env,
                    retry=retry,
                ),
            )
            endpoint = binding.spec
        return client, RoleInfo(
            label=role.name,
            model=client.model,
            endpoint=endpoint,
            sampling=role.sampling,
            structured_output=form,
            served_dtype=dtype,
            parallel=role.parallel.layout() if binding.kind == "vllm" and role.parallel is not None else None,
        )

    def clients(self) -> list[ChatEndpoint]:
        """The clients that call a model, whose calls and faults the progress line counts: a
        scripted subject answers in-process and is not among them."""
        return list(self._clients)


def _dtype_arg(server_args: tuple[str, ...]) -> str | None:
    """The value of ``--dtype`` in a role's server arguments (``--dtype X`` or ``--dtype=X``)."""
    for i, arg in enumerate(server_args):
        if arg == "--dtype" and i + 1 < len(server_args):
            return server_args[i + 1]
        if arg.startswith("--dtype="):
            return arg.partition("=")[2]
    return None
