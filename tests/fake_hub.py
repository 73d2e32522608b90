"""A stdlib stand-in for the few Hugging Face Hub HTTP routes `leaderboard publish` calls (create the
repo, validate the card's YAML, preupload, commit), on 127.0.0.1: it keeps each committed file and
every Authorization header, and answers 401 to a request without the expected token."""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class HubState:
    token: str
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # method, path, authorization


class FakeHub:
    def __init__(self, state: HubState) -> None:
        self.state = state
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state, self))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def __enter__(self) -> FakeHub:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(state: HubState, hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, payload: dict[str, Any], status: int = 200) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            auth = self.headers.get("authorization")
            state.requests.append(("GET", self.path, auth))
            ok = auth == f"Bearer {state.token}"
            self._send({} if ok else {"error": "Invalid credentials"}, 200 if ok else 401)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            auth = self.headers.get("authorization")
            state.requests.append(("POST", self.path, auth))
            if auth != f"Bearer {state.token}":
                return self._send({"error": "Invalid credentials"}, 401)
            if self.path.startswith("/api/repos/create"):
                asked = json.loads(body)
                name = "/".join(p for p in (asked.get("organization"), asked["name"]) if p)
                return self._send({"url": f"{hub.url}/datasets/{name}", "name": name})
            if self.path.startswith("/api/validate-yaml"):
                return self._send({"errors": [], "warnings": []})
            if "/preupload/" in self.path:
                files = json.loads(body)["files"]
                return self._send({"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                             for f in files]})
            if "/commit/" in self.path:
                for line in body.decode().splitlines():
                    item = json.loads(line)
                    if item.get("key") == "file":
                        state.files[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
                repo = self.path.split("/api/datasets/", 1)[1].split("/commit/", 1)[0]
                return self._send({"commitUrl": f"{hub.url}/datasets/{repo}/commit/{'1' * 40}", "commitOid": "1" * 40})
            return self._send({"error": "not here"}, 404)

    return Handler
