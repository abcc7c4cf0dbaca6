"""A real HTTP server on 127.0.0.1 whose answers the tests script, and which counts hits.

`server.script("/flaky", Reply(503), Reply(503), Reply(200))` answers the first two GETs of
/flaky with 503 and every later one with 200 (the last reply repeats). Unscripted paths
answer 200 with a small HTML page.

`RawServer` answers with bytes as given, status line and headers included, whatever an
HTTP library would refuse to write.
"""

import socket
import socketserver
import threading
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOLD_SECONDS = 30.0


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b"<html><head><title>Hello</title></head><body>hi</body></html>"
    content_type: str | bytes = "text/html; charset=utf-8"
    """A str is sent as Latin-1 (`"²"` is the byte 0xB2); bytes as they are (`"€".encode()`)."""
    headers: Mapping[str, str | bytes] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds to wait before answering."""
    hold: threading.Event | None = None
    """Answer only once this is set (or HOLD_SECONDS have passed): a server as slow as the
    test needs, whatever the machine's speed."""
    drop: bool = False
    """Close the connection without answering (the client sees RemoteProtocolError)."""


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # the default 5 drops connections when workers open many at once


class ScriptedServer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scripts: dict[str, list[Reply]] = {}
        self.hits: dict[str, list[float]] = defaultdict(list)
        self.posts: dict[str, list[tuple[dict[str, str], bytes]]] = defaultdict(list)
        """Each POST's headers and body, per path (a POST is answered like a GET)."""
        self.headers: dict[str, list[dict[str, str]]] = defaultdict(list)
        """Each request's headers (GET or POST), per path."""
        self.body_bytes: dict[str, int] = defaultdict(int)
        """Bytes of body written in answers, per path."""
        self.in_flight = 0
        self.max_in_flight = 0
        self._httpd = _Server(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> "ScriptedServer":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def url(self, path: str) -> str:
        return self.base_url + path

    def script(self, path: str, *replies: Reply) -> str:
        with self._lock:
            self._scripts[path] = list(replies)
        return self.url(path)

    def count(self, path: str) -> int:
        with self._lock:
            return len(self.hits[path])

    def _next_reply(self, path: str) -> Reply:
        with self._lock:
            self.hits[path].append(time.monotonic())
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            replies = self._scripts.get(path)
            if not replies:
                return Reply()
            return replies.pop(0) if len(replies) > 1 else replies[0]

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes
            _headers_buffer: list[bytes]  # send_response's, which typeshed leaves out

            def do_GET(self) -> None:
                with server._lock:
                    server.headers[self.path].append(dict(self.headers.items()))
                reply = server._next_reply(self.path)
                try:
                    if reply.delay:
                        time.sleep(reply.delay)
                    if reply.hold is not None:
                        reply.hold.wait(HOLD_SECONDS)
                    if reply.drop:
                        self.close_connection = True
                        return
                    self.send_response(reply.status)
                    self.header("Content-Type", reply.content_type)
                    self.send_header("Content-Length", str(len(reply.body)))
                    for name, value in reply.headers.items():
                        self.header(name, value)
                    self.end_headers()
                    self.wfile.write(reply.body)
                    with server._lock:
                        server.body_bytes[self.path] += len(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                finally:
                    server._done()

            def header(self, name: str, value: str | bytes) -> None:
                if isinstance(value, str):
                    self.send_header(name, value)  # as Latin-1
                else:
                    self._headers_buffer.append(name.encode() + b": " + value + b"\r\n")

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with server._lock:
                    server.posts[self.path].append((dict(self.headers.items()), body))
                self.do_GET()

            def log_message(self, *_: object) -> None:
                pass

        return Handler


class RawServer:
    """`server.script("/x", raw)` answers each GET of /x with the bytes `raw` (after `stall`
    seconds), then closes the connection; unscripted paths answer 404."""

    NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scripts: dict[str, tuple[bytes, float]] = {}
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> "RawServer":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def script(self, path: str, raw: bytes, stall: float = 0.0) -> str:
        with self._lock:
            self._scripts[path] = (raw, stall)
        return self.base_url + path

    def _answer(self, path: str) -> tuple[bytes, float]:
        with self._lock:
            return self._scripts.get(path, (self.NOT_FOUND, 0.0))

    def _handler(self) -> type[socketserver.BaseRequestHandler]:
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                connection: socket.socket = self.request
                head = b""
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    chunk = connection.recv(4096)
                    if not chunk:
                        return
                    head += chunk
                target = head.split(b" ", 2)[1].decode("latin-1") if b" " in head else "/"
                raw, stall = server._answer(target)
                try:
                    if stall:
                        time.sleep(stall)
                    connection.sendall(raw)
                except OSError:
                    pass  # the client gave up first

        return Handler
