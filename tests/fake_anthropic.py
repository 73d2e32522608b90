"""A stdlib loopback server speaking Anthropic's Messages API (``POST /v1/messages``), with its
prompt cache as the API documents it: a prefix is written at a block marked ``cache_control``
(from 1,024 tokens), and a request reads the longest written prefix that ends at one of the 20
block boundaries up to each of its marks. ``usage`` reports ``cache_read_input_tokens``,
``cache_creation_input_tokens`` and, as Anthropic does, ``input_tokens`` without either.
Every request's body and headers are kept in ``requests``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from emobench.endpoints.prompt_cache import prompt_tokens

MINIMUM = 1024
LOOKBACK = 20


def _blocks(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(role, block) for the system blocks, then each message's content blocks, in order."""
    system = body.get("system") or []
    out = [("system", b) for b in ([{"type": "text", "text": system}] if isinstance(system, str) else system)]
    for message in body["messages"]:
        content = message["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            out.append((message["role"], block))
    return out


@dataclass
class AnthropicState:
    reply: str = "That sounds like a lot to carry."
    requests: list[dict[str, Any]] = field(default_factory=list)
    written: set[bytes] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        sizes, chain, prefixes = [], b"", []
        for role, block in _blocks(body):
            text = block.get("text", "")
            chain = hashlib.blake2b(chain + json.dumps([role, text]).encode(), digest_size=16).digest()
            prefixes.append(chain)
            sizes.append((sizes[-1] if sizes else 0) + len(prompt_tokens([{"role": role, "content": text}])))
        marks = [i for i, (_, block) in enumerate(_blocks(body)) if "cache_control" in block]
        with self.lock:
            read = 0
            for mark in marks:
                hit = next((j for j in range(mark, max(-1, mark - LOOKBACK), -1) if prefixes[j] in self.written), None)
                read = max(read, sizes[hit] if hit is not None else 0)
            write = 0
            for mark in marks:
                if sizes[mark] >= MINIMUM and prefixes[mark] not in self.written:
                    self.written.add(prefixes[mark])
                    write = max(write, sizes[mark] - read)
        total = sizes[-1] if sizes else 0
        return {"input_tokens": total - read - write, "output_tokens": len(self.reply.split()),
                "cache_read_input_tokens": read, "cache_creation_input_tokens": write}


def _handler(state: AnthropicState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return None

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if self.path != "/v1/messages":
                return self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})
            with state.lock:
                state.requests.append({"body": body, "headers": dict(self.headers)})
            self._send(200, {"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"],
                             "content": [{"type": "text", "text": state.reply}], "stop_reason": "end_turn",
                             "stop_sequence": None, "usage": state.usage(body)})
            return None

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


class FakeAnthropicServer:
    def __init__(self, state: AnthropicState | None = None) -> None:
        self.state = state or AnthropicState()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.state))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeAnthropicServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
