"""Chat completions through OpenAI's Batch API, at its batch price (half the price of a call).

Judging that waits on nothing (`emobench judge --batch`: the rescore of a finished run, its
per-turn replay, holistic rubric and pairwise comparisons; `emobench run --batch`: each wave's
holistic rubric and pairwise comparisons, run/batch_judging.py) asks through this endpoint as it asks
any other: each request waits while the judging stage queues the rest, and once no new one has
come for a moment, all of them go as one batch (a JSONL file uploaded to ``/files``, then
``/batches``), or as several where one would pass OpenAI's limits (50,000 requests, 200 MB).
The batch is polled until it ends, and each request gets its answer from the output file. So the
judging code and the records are the same as without --batch.

A batch may take up to its completion window (24 hours) to finish. Its id and the requests in it
are appended to the ledger (``batches.jsonl`` in the output folder) as soon as it is created, so
a command killed while it waits resumes by polling the same batch, not by paying for another.
A batch that expires keeps the answers it finished; the requests it did not reach are sent again
in a new batch (counted as a ``batch_expired`` fault). A failed or cancelled batch is an error
naming it; the rerun sends its requests again.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from emobench.endpoints.cache import cache_key
from emobench.endpoints.client import Completion, EndpointStats, OpenAICompatClient, chat_params, prompt_cache_usage
from emobench.errors import EndpointError, InputError
from emobench.records import Sampling

WINDOW = "24h"
QUIET_S = 0.5  # no new request for this long: the judging stage has queued what it can
# OpenAI's limits on one batch's input file: more requests than this go in several batches.
MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024
ENDED = ("completed", "expired", "failed", "cancelled")
Answer = Completion | EndpointError


class BatchEndpoint:
    """One OpenAI-compatible endpoint's requests, sent in batches; see the module's note."""

    def __init__(self, client: OpenAICompatClient, ledger: Path, poll_s: float = 30.0) -> None:
        self.inner, self.name, self.model = client, client.name, client.model
        self._ledger, self._poll_s = ledger, poll_s
        self._pending: dict[str, tuple[bytes, asyncio.Future[Completion]]] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._known: dict[str, str] = {}  # request key -> the batch it went in, from the ledger
        self._results: dict[str, asyncio.Task[dict[str, Answer]]] = {}
        self._session: aiohttp.ClientSession | None = None
        for line in ledger.read_bytes().splitlines() if ledger.exists() else []:
            try:
                entry = orjson.loads(line)
                self._known |= dict.fromkeys(entry["keys"], entry["batch"])
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue  # a line torn by a kill: its batch is sent again

    @property
    def stats(self) -> EndpointStats:
        return self.inner.stats

    async def complete(
        self, messages: list[dict[str, str]], sampling: Sampling, seed: int, response_format: dict[str, Any] | None = None
    ) -> Completion:
        key = cache_key(self.name, self.model, messages, sampling, seed, response_format)
        if key in self._known:  # sent before this command was killed: wait for that batch
            answer = (await self._finished(self._known[key])).get(key)
            if isinstance(answer, Completion):
                return answer
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._pending[key] = (orjson.dumps({"model": self.model, **chat_params(messages, sampling, seed, response_format)}),
                              future)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        queued = -1
        while queued != len(self._pending):  # wait until the judging stage has queued what it can
            queued = len(self._pending)
            await asyncio.sleep(QUIET_S)
        pending, self._pending = self._pending, {}
        try:
            batches = [await self._submit(part) for part in split(_lines(pending))]
            answers = {key: answer for done in await asyncio.gather(*map(self._finished, batches))
                       for key, answer in done.items()}
        except Exception as exc:  # every waiting request hears of it, or it would wait for ever
            failed = exc if isinstance(exc, EndpointError) else EndpointError(self.name, f"batch: {exc!r}")
            answers = dict.fromkeys(pending, failed)
        for key, (body, future) in pending.items():
            answer = answers.get(key)
            if answer is None:  # the batch expired before it: send it again
                await self.stats.fault("batch_expired")
                self._pending[key] = (body, future)
            elif isinstance(answer, EndpointError):
                future.set_exception(answer)
            else:
                future.set_result(answer)
        if self._pending:
            self._flusher = asyncio.create_task(self._flush())

    async def _submit(self, lines: dict[str, bytes]) -> str:
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", b"\n".join(lines.values()), filename="requests.jsonl", content_type="application/jsonl")
        uploaded = await self._call("POST", "/files", data=form)
        created = await self._call("POST", "/batches", json={
            "input_file_id": uploaded["id"], "endpoint": "/v1/chat/completions", "completion_window": WINDOW})
        batch = str(created["id"])
        with self._ledger.open("ab") as ledger:  # before the wait: a killed command finds this batch again
            ledger.write(orjson.dumps({"batch": batch, "keys": list(lines)}) + b"\n")
        self._known |= dict.fromkeys(lines, batch)
        return batch

    def _finished(self, batch: str) -> asyncio.Task[dict[str, Answer]]:
        if batch not in self._results:
            self._results[batch] = asyncio.ensure_future(self._poll(batch))
        return self._results[batch]

    async def _poll(self, batch: str) -> dict[str, Answer]:
        started = time.perf_counter()
        while (state := await self._call("GET", f"/batches/{batch}"))["status"] not in ENDED:
            await asyncio.sleep(self._poll_s)
        if state["status"] in ("failed", "cancelled"):
            raise EndpointError(self.name, f"batch {batch} {state['status']}: {state.get('errors') or 'no reason given'}")
        answers: dict[str, Answer] = {}
        if state.get("output_file_id"):
            output = await self._call("GET", f"/files/{state['output_file_id']}/content", raw=True)
            for line in output.splitlines():
                item = orjson.loads(line)
                answers[item["custom_id"]] = self._answer(item, time.perf_counter() - started)
        return answers

    def _answer(self, item: dict[str, Any], waited: float) -> Answer:
        response = item.get("response") or {}
        if response.get("status_code") != 200:
            return EndpointError(self.name, f"batch request {item['custom_id'][:12]}: {item.get('error') or response}")
        body = response["body"]
        choice, usage = body["choices"][0], body.get("usage") or {}
        cached, written = prompt_cache_usage(usage)
        self.stats.calls += 1
        return Completion(text=choice["message"].get("content") or "", finish_reason=choice.get("finish_reason"),
                          prompt_tokens=int(usage.get("prompt_tokens") or 0),
                          completion_tokens=int(usage.get("completion_tokens") or 0), latency_s=waited,
                          cached_prompt_tokens=cached, cache_write_tokens=written, batched=True)

    async def _call(self, method: str, path: str, raw: bool = False, **kwargs: Any) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        headers = {k: v for k, v in self.inner._headers().items() if k != "Content-Type"}
        try:
            async with self._session.request(method, self.name + path, headers=headers, **kwargs) as resp:
                body = await resp.read()
                if resp.status >= 400:
                    raise EndpointError(self.name, f"{method} {path}: HTTP {resp.status}: {body[:200].decode(errors='replace')}")
        except aiohttp.ClientError as exc:
            raise EndpointError(self.name, f"{method} {path}: {exc}") from None
        return body if raw else orjson.loads(body)

    async def aclose(self) -> None:
        for task in self._results.values():
            task.cancel()
        if self._session is not None:
            await self._session.close()
        await self.inner.aclose()


def _lines(pending: dict[str, tuple[bytes, Any]]) -> dict[str, bytes]:
    """Each request's line of a batch's input file."""
    return {key: b'{"custom_id":"%s","method":"POST","url":"/v1/chat/completions","body":%s}' % (key.encode(), body)
            for key, (body, _) in pending.items()}


def split(lines: dict[str, bytes]) -> list[dict[str, bytes]]:
    """The lines in order, in as few input files as OpenAI's limits allow (requests and bytes)."""
    parts: list[dict[str, bytes]] = [{}]
    size = 0
    for key, line in lines.items():
        if parts[-1] and (len(parts[-1]) == MAX_REQUESTS or size + len(line) + 1 > MAX_BYTES):
            parts.append({})
            size = 0
        parts[-1][key] = line
        size += len(line) + 1
    return parts


def batched(client: Any, ledger: Path, poll_s: float) -> BatchEndpoint:
    """The endpoint a --batch command calls through; only an ``openai:`` binding has a Batch API."""
    if not isinstance(client, OpenAICompatClient):
        raise InputError("--batch", "", f"{client.name}: batches need an openai:MODEL@URL binding (a Batch API)")
    return BatchEndpoint(client, ledger, poll_s)
