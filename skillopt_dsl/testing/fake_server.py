"""`FakeOpenAIServer`: a FAKE OpenAI-compatible chat server on 127.0.0.1, for tests and benches.

It answers `POST /v1/chat/completions` (and `/chat/completions`) after a fixed latency with a
deterministic answer computed from the request's messages, so litellm can reach it exactly as it
reaches a real provider (`openai/<any-name>` with `api_base=server.url`). It is bounded: it
refuses requests past `max_requests` (HTTP 503) and stops itself after `max_lifetime_s`.
`send_usage=False` answers without a `usage` object, as some providers and proxies do. Every
request body is kept (`server.bodies`), so tests can check what reached the endpoint.

>>> with FakeOpenAIServer(lambda messages: "even", latency_s=0.0) as server:
...     server.url.startswith("http://127.0.0.1:")
True
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.lm.base import Message

__all__ = ["FakeOpenAIServer", "echo_last_word"]

logger = logging.getLogger(__name__)

_KEPT_BODIES = 10_000
_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})


def echo_last_word(messages: list[Message]) -> str:
    """A default deterministic answer: the last word of the last message."""
    words = messages[-1].get("content", "").split() if messages else []
    return words[-1] if words else ""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    owner: FakeOpenAIServer

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, addr = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, addr


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        owner = self.server.owner
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.split("?")[0] not in _PATHS:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        if not owner._admit():
            self._send(503, {"error": {"message": "fake server request limit reached"}})
            return
        try:
            request = json.loads(body or b"{}")
            messages = list(request.get("messages", []))
        except (ValueError, AttributeError) as exc:
            self._send(400, {"error": {"message": f"bad JSON: {exc}", "type": "invalid"}})
            return
        owner._record(request)
        time.sleep(owner.latency_s)
        text = owner.respond(messages)
        self._send(200, _completion(request, messages, text, owner.send_usage))

    def _send(self, status: int, payload: JSONObject) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("fake server: " + format, *args)


def _completion(
    request: JSONObject, messages: list[Message], text: str, send_usage: bool
) -> JSONObject:
    prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
    completion_tokens = len(text.split())
    answer: JSONObject = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": str(request.get("model", "fake")),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
    }
    if send_usage:
        answer["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    return answer


class FakeOpenAIServer:
    """A FAKE OpenAI-compatible server (see the module docstring); start/stop it, or use `with`.

    Args:
        respond: `messages -> text`, deterministic and thread-safe.
        latency_s: fixed delay before every answer.
        max_requests: answered requests before it refuses with HTTP 503.
        max_lifetime_s: it shuts itself down after this many seconds.
        send_usage: include a `usage` object in answers (False: none, as some providers do).
    """

    def __init__(
        self,
        respond: Callable[[list[Message]], str] = echo_last_word,
        *,
        latency_s: float = 0.05,
        max_requests: int = 100_000,
        max_lifetime_s: float = 600.0,
        send_usage: bool = True,
    ) -> None:
        self.respond, self.latency_s, self.send_usage = respond, latency_s, send_usage
        self._bodies: deque[JSONObject] = deque(maxlen=_KEPT_BODIES)
        self._max_requests, self._max_lifetime_s = max_requests, max_lifetime_s
        self._lock = threading.Lock()
        self._requests = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    @property
    def requests(self) -> int:
        """Requests admitted so far."""
        with self._lock:
            return self._requests

    @property
    def bodies(self) -> list[JSONObject]:
        """The JSON bodies of the admitted requests (the latest 10,000), in arrival order."""
        with self._lock:
            return list(self._bodies)

    @property
    def url(self) -> str:
        """The `api_base` to give litellm (`http://127.0.0.1:<port>/v1`)."""
        if self._server is None:
            raise RuntimeError("the fake server is not running; call start() first")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FakeOpenAIServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        if self._server is not None:
            raise RuntimeError("the fake server is already running")
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self._max_lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        server, self._server = self._server, None
        if self._timer is not None:
            self._timer.cancel()
        if server is not None:
            server.shutdown()
            server.server_close()

    def _record(self, request: Any) -> None:
        with self._lock:
            self._bodies.append(request if isinstance(request, dict) else {})

    def _admit(self) -> bool:
        with self._lock:
            if self._requests >= self._max_requests:
                return False
            self._requests += 1
            return True

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
