"""OpenAI's files and batches endpoints for the fake server (tests/fake_openai.py): upload a JSONL
file, create a batch of chat completions from it, poll it, download its output file.

A batch is answered by the server's own responder, as its chat completions are. It stays
``in_progress`` for ``batch_polls`` polls; with ``batch_expire_after`` set it then ends
``expired`` with only that many answers in its output file (the rest in its error file).
"""

from __future__ import annotations

import json
from email.parser import BytesParser
from typing import Any

Reply = tuple[int, bytes]


def upload(state: Any, content_type: str, body: bytes) -> Reply:
    message = BytesParser().parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    parts = {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
             for part in message.get_payload()}
    if parts.get("purpose") != b"batch" or not parts.get("file"):
        return 400, b'{"error": "purpose=batch and a file are required"}'
    with state.lock:
        file_id = f"file-{len(state.files)}"
        state.files[file_id] = parts["file"]
    return 200, json.dumps({"id": file_id, "object": "file", "purpose": "batch"}).encode()


def create(state: Any, body: dict[str, Any]) -> Reply:
    lines = state.files.get(body.get("input_file_id"), b"").splitlines()
    if not lines or body.get("endpoint") != "/v1/chat/completions":
        return 400, b'{"error": "an uploaded input file and the chat completions endpoint are required"}'
    if len(lines) > state.batch_max_requests:
        return 400, b'{"error": "too many requests in one batch"}'
    with state.lock:
        batch_id = f"batch_{len(state.batches)}"
        state.batches[batch_id] = {"id": batch_id, "object": "batch", "status": "in_progress", "polls": 0,
                                   "requests": [json.loads(line) for line in lines], "output_file_id": None}
    return 200, json.dumps(public(state.batches[batch_id])).encode()


def public(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in batch.items() if k not in ("requests", "polls")}


def poll(state: Any, batch_id: str, answer: Any) -> Reply:
    """``answer(body)``: the chat completion payload the server would send for body."""
    batch = state.batches.get(batch_id)
    if batch is None:
        return 404, b'{"error": "no such batch"}'
    with state.lock:
        batch["polls"] += 1
        due = batch["status"] == "in_progress" and batch["polls"] > state.batch_polls
    if due:
        requests = batch["requests"]
        done = requests if state.batch_expire_after is None else requests[: state.batch_expire_after]
        output = [{"id": f"req-{i}", "custom_id": r["custom_id"], "error": None,
                   "response": {"status_code": 200, "body": answer(r["body"])}} for i, r in enumerate(done)]
        errors = [{"custom_id": r["custom_id"], "response": None,
                   "error": {"code": "batch_expired", "message": "not reached in the completion window"}}
                  for r in requests[len(done):]]
        with state.lock:
            state.batch_answered += len(done)
            for name, rows in (("output_file_id", output), ("error_file_id", errors)):
                if rows:
                    batch[name] = f"file-{len(state.files)}"
                    state.files[batch[name]] = b"\n".join(json.dumps(row).encode() for row in rows)
            batch["status"] = "completed" if not errors else "expired"
    return 200, json.dumps(public(batch)).encode()


def content(state: Any, file_id: str) -> Reply:
    data = state.files.get(file_id)
    return (200, data) if data is not None else (404, b'{"error": "no such file"}')
