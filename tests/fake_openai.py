"""A stdlib fake OpenAI-compatible chat server on 127.0.0.1, with fault injection.

It answers the three kinds of call an episode makes (simulator, subject, MDEP judge) by
looking at ``response_format``, and can inject 429s, 500s, timeouts, torn bodies and
malformed JSON for a seeded share of requests. ``GET <prefix>/models`` lists ``models``; every
request's headers are kept (POSTs in ``requests``, GETs in ``gets``), and with ``key`` set any
request without that bearer key is answered 401. With ``prompt_cache`` on it counts each prompt's
tokens and reports, as OpenAI does, the cached ones: the longest prefix (from 1,024 tokens, in
128-token blocks) shared with an earlier prompt to the same model.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from emobench.endpoints.prompt_cache import PrefixCache, prompt_tokens
from tests import fake_batches

FAULTS = ("429", "500", "timeout", "truncated", "malformed")

Responder = Callable[[dict[str, Any]], str]


def default_responder(body: dict[str, Any]) -> str:
    """Plausible, deterministic answers keyed on the request's seed and schema."""
    fmt = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    seed = int(body.get("seed") or 0)
    if fmt == "user_move":
        return json.dumps(
            {
                "message": f"I don't know, it's just a lot right now ({seed % 97}).",
                "meter_delta": 2,
                "inner": "testing them",
                "leave": False,
            }
        )
    if fmt == "mdep_verdict":
        axis = {"progress": 1, "regression": 0, "evidence": "that sounds hard", "reason": "names the feeling"}
        return json.dumps({"C": axis, "A": {**axis, "progress": 2}, "P": {**axis, "progress": 0, "evidence": "", "reason": ""}})
    if fmt == "persona_probe":
        return json.dumps(
            {
                "dominant_need": "A",
                "threshold": "high",
                "rationale": "guarded",
                "big_five": [{"trait": "neuroticism", "pole": "high"}, {"trait": "extraversion", "pole": "low"}],
            }
        )
    if fmt == "holistic_verdict":
        dim = {"score": 3 + seed % 5, "evidence": "that sounds hard", "reason": "plain and specific"}
        return json.dumps({d: dim for d in ("empathy", "humanlikeness", "persona_adaptation", "coherence")})
    if fmt == "pairwise_verdict":
        # A deterministic stand-in for a judge: prefers whichever conversation is shorter.
        # The two fenced conversations, wherever the template puts its labels.
        first, second = re.findall(r"<<<CONVERSATION\n(.*?)CONVERSATION>>>", body["messages"][-1]["content"], re.S)[:2]
        pick = "1" if len(first) <= len(second) else "2"
        return json.dumps(
            {d: {"winner": pick, "reason": "steadier"} for d in ("empathy", "humanlikeness", "persona_adaptation", "coherence")}
        )
    if fmt == "director_action":
        return json.dumps({"action": "wait", "target": None, "guidance": "keep testing them"})
    return "That sounds hard. What part of it weighs on you most?"


# A subject served under this model name answers dismissively, and the judges see it: a model
# made worse by construction, for the regression gate's tests.
WORSE_MODEL = "worse-model"
DISMISSIVE = "Whatever. Everyone has problems, just get on with it."


def scripted_responder(body: dict[str, Any]) -> str:
    """default_responder, except that WORSE_MODEL's replies are dismissive and judged so."""
    fmt = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    if fmt is None and body.get("model") == WORSE_MODEL:
        return DISMISSIVE
    judged = fmt in ("mdep_verdict", "holistic_verdict") and DISMISSIVE in body["messages"][-1]["content"]
    if judged and fmt == "mdep_verdict":
        axis = {"progress": 0, "regression": 2, "evidence": DISMISSIVE, "reason": "dismisses the feeling"}
        return json.dumps({"C": axis, "A": axis, "P": axis})
    if judged:
        dim = {"score": 1, "evidence": DISMISSIVE, "reason": "dismissive"}
        return json.dumps({d: dim for d in ("empathy", "humanlikeness", "persona_adaptation", "coherence")})
    return default_responder(body)


@dataclass
class FakeState:
    responder: Responder = default_responder
    fault_rate: float = 0.0
    fault_kinds: tuple[str, ...] = FAULTS
    fault_seed: int = 0
    latency_s: float = 0.0
    timeout_sleep_s: float = 3.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    injected: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    rng: random.Random = field(default_factory=random.Random)
    dead: bool = False
    prefix: str = "/v1"  # the base URL's path
    models: tuple[str, ...] = ()  # what GET /models lists
    roots: dict[str, str] = field(default_factory=dict)  # a listed model's "root", as vLLM names its folder
    key: str | None = None  # the bearer key it expects, if any
    open_models: bool = False  # GET /models answers without the key (as some hosts do)
    gets: list[dict[str, Any]] = field(default_factory=list)
    prompt_cache: bool = False  # count prompt tokens and report OpenAI's cached_tokens
    caches: dict[str, PrefixCache] = field(default_factory=dict)  # one per model, as a provider keeps them
    # The files and batches API (tests/fake_batches.py).
    files: dict[str, bytes] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    batch_polls: int = 0  # polls a batch stays in progress
    batch_expire_after: int | None = None  # a batch then expires with this many answers
    batch_max_requests: int = 50_000  # a larger input file is refused, as OpenAI refuses one
    batch_answered: int = 0

    def usage(self, body: dict[str, Any], completion: int) -> dict[str, Any]:
        if not self.prompt_cache:
            return {"prompt_tokens": 10, "completion_tokens": completion, "total_tokens": 10 + completion}
        tokens = prompt_tokens(body["messages"])
        with self.lock:
            cached = self.caches.setdefault(str(body.get("model")), PrefixCache()).admit(tokens)
        return {"prompt_tokens": len(tokens), "completion_tokens": completion, "total_tokens": len(tokens) + completion,
                "prompt_tokens_details": {"cached_tokens": cached}}

    def pick_fault(self) -> str | None:
        with self.lock:
            if self.fault_rate and self.rng.random() < self.fault_rate:
                kind = self.rng.choice(self.fault_kinds)
                self.injected[kind] += 1
                return kind
        return None


def _handler(state: FakeState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return None

        def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None, length: int | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload) if length is None else length))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)

        def _refused(self) -> bool:
            if state.key is not None and self.headers.get("Authorization") != f"Bearer {state.key}":
                self._send(401, b'{"error":"invalid api key"}')
                return True
            return False

        def do_GET(self) -> None:
            with state.lock:
                state.gets.append({"path": self.path, "headers": dict(self.headers)})
            if not state.open_models and self._refused():
                return
            if self.path.startswith(f"{state.prefix}/batches/"):
                return self._send(*fake_batches.poll(state, self.path.rsplit("/", 1)[1], self._completion))
            if self.path.startswith(f"{state.prefix}/files/") and self.path.endswith("/content"):
                return self._send(*fake_batches.content(state, self.path.split("/")[-2]))
            if self.path == f"{state.prefix}/models":
                listed = [{"id": m, "object": "model", **({"root": state.roots[m]} if m in state.roots else {})}
                          for m in state.models]
                return self._send(200, json.dumps({"object": "list", "data": listed}).encode())
            self._send(200, b'{"status":"ok"}')

        def do_POST(self) -> None:
            try:
                self._post()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up first (a timeout test); nothing to answer

        def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
            text = state.responder(body)
            return {"id": "fake", "object": "chat.completion", "model": body.get("model"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": state.usage(body, len(text.split()))}

        def _post(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path == f"{state.prefix}/files":
                return self._send(*fake_batches.upload(state, self.headers.get("Content-Type", ""), raw))
            body = json.loads(raw)
            if self.path == f"{state.prefix}/batches":
                return self._send(*fake_batches.create(state, body))
            if self.path != f"{state.prefix}/chat/completions":
                return self._send(404, b'{"error":"not found"}')
            if state.dead:
                self.close_connection = True
                self.connection.close()
                return
            with state.lock:
                state.requests.append({"body": body, "headers": dict(self.headers)})
            if self._refused():
                return None
            fault = state.pick_fault()
            if fault == "429":
                return self._send(429, b'{"error":"slow down"}', {"Retry-After": "0"})
            if fault == "500":
                return self._send(500, b'{"error":"boom"}')
            if fault == "timeout":
                time.sleep(state.timeout_sleep_s)
            if state.latency_s:
                time.sleep(state.latency_s)
            payload = json.dumps(self._completion(body)).encode()
            if fault == "malformed":
                return self._send(200, payload[: len(payload) // 2] + b"}}")
            if fault == "truncated":
                self._send(200, payload[: len(payload) // 2], length=len(payload))
                self.close_connection = True
                return None
            self._send(200, payload)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the default backlog of 5 stalls bursts of concurrent episodes


class FakeOpenAIServer:
    def __init__(self, state: FakeState | None = None, port: int = 0) -> None:
        """port 0: any free port; a fixed one (the docs' placeholder endpoints) raises OSError when taken."""
        self.state = state or FakeState()
        self.state.rng.seed(self.state.fault_seed)
        self._server = _Server(("127.0.0.1", port), _handler(self.state))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.state.prefix}"

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
