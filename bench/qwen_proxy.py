"""A counting HTTP proxy in front of an OpenAI-compatible server: calls counted AT the server's door.

Every request a benchmarked system sends to the model goes through this proxy, which forwards it
unchanged to the upstream server and counts the chat-completion requests that reached it (and
their outcome). The benchmark reads the count before and after each method, so GEPA's reflection
calls, DSPy's proposal calls and our optimizer calls are all counted the same way, whatever each
system's own bookkeeping says.

    python bench/qwen_proxy.py --upstream http://127.0.0.1:8811 --port 8812
    curl http://127.0.0.1:8812/__count     # {"chat_completions": 17, "errors": 0, ...}

or in-process: `with CountingProxy("http://127.0.0.1:8811") as proxy: ... proxy.count()`.
The proxy listens on 127.0.0.1 only, sets TCP_NODELAY on both legs, and forwards one request per
upstream connection (llama-cpp-python's server answers one at a time anyway).
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

COUNT_PATH = "/__count"
_CHAT_SUFFIX = "/chat/completions"
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
               "proxy-authorization", "proxy-authenticate", "host", "content-length"}  # fmt: skip


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    owner: CountingProxy

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, addr = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, addr


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        if self.path == COUNT_PATH:
            self._reply(200, json.dumps(self.server.owner.count()).encode())
            return
        self._forward(b"")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._forward(body)

    def _forward(self, body: bytes) -> None:
        owner = self.server.owner
        is_chat = self.command == "POST" and self.path.split("?")[0].endswith(_CHAT_SUFFIX)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        started = time.perf_counter()
        try:
            conn = http.client.HTTPConnection(owner.host, owner.port, timeout=owner.timeout_s)
            conn.connect()
            assert conn.sock is not None
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.request(self.command, owner.prefix + self.path, body=body or None,
                         headers=headers)  # fmt: skip
            response = conn.getresponse()
            payload = response.read()
            status = response.status
            conn.close()
        except OSError as exc:
            owner._record(is_chat, 502, time.perf_counter() - started)
            self._reply(502, json.dumps({"error": {"message": f"proxy: {exc}"}}).encode())
            return
        owner._record(is_chat, status, time.perf_counter() - started)
        self._reply(status, payload, response.getheader("Content-Type") or "application/json")

    def _reply(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class CountingProxy:
    """Forward to `upstream` (e.g. `http://127.0.0.1:8811`), counting chat completions.

    `url` is the proxy's own base (`http://127.0.0.1:PORT`); `count()` returns a snapshot:
    `chat_completions` (requests that reached the server), `errors` (non-2xx answers among them),
    `seconds` (server time spent on them).
    """

    def __init__(self, upstream: str, *, port: int = 0, timeout_s: float = 600.0) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"upstream must be an http:// URL, got {upstream!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/").removesuffix("/v1")
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._chat = 0
        self._errors = 0
        self._seconds = 0.0
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The proxy's base URL (append `/v1` for an OpenAI-style `api_base`)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def count(self) -> dict[str, Any]:
        """A snapshot of what reached the upstream server."""
        with self._lock:
            return {"chat_completions": self._chat, "errors": self._errors,
                    "seconds": round(self._seconds, 3)}  # fmt: skip

    def _record(self, is_chat: bool, status: int, seconds: float) -> None:
        if not is_chat:
            return
        with self._lock:
            self._chat += 1
            self._errors += int(status >= 300)
            self._seconds += seconds

    def start(self) -> CountingProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> CountingProxy:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="e.g. http://127.0.0.1:8811")
    parser.add_argument("--port", type=int, default=8812)
    args = parser.parse_args()
    proxy = CountingProxy(args.upstream, port=args.port).start()
    print(f"counting proxy {proxy.url} -> {args.upstream} (counts at {proxy.url}{COUNT_PATH})")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        proxy.stop()


if __name__ == "__main__":
    main()
