"""Hostile HTTP servers for the tests, on a loopback address of their choosing.

Each path misbehaves in its own way; every request is counted in `hits`. Bind one to
127.0.0.2 to play a private target that the SSRF guard must keep the fetcher away from.

    /page           a small HTML page (the control)
    /endless        200 text/plain that never ends
    /drip           200 text/plain, one byte every 0.1 s
    /bomb           100 MB of zeros in ~100 KB of gzip
    /loop           302 to itself, forever
    /huge-headers   200 with ~200 KiB of headers
    /bad-json       application/json that does not parse
    /binary         application/octet-stream
    /redirect?to=U  302 to U
"""

import threading
import time
import zlib
from collections import Counter
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import cast
from urllib.parse import parse_qs, urlsplit

PAGE = b"<html><head><title>Fine</title></head><body><p>A fine page.</p></body></html>"


@cache
def gzip_bomb() -> bytes:
    """100 MB of zeros, gzipped a megabyte at a time (so making it takes no memory)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    zeros = bytes(1_000_000)
    return b"".join(packer.compress(zeros) for _ in range(100)) + packer.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


class HostileServer:
    def __init__(self, host: str = "127.0.0.1") -> None:
        gzip_bomb()  # made now, not while a client waits for it
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._httpd = _Server((host, 0), self._handler())
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> "HostileServer":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def url(self, path: str, host: str | None = None) -> str:
        return f"http://{host or cast(str, self._httpd.server_address[0])}:{self.port}{path}"

    def _count(self, path: str) -> None:
        with self._lock:
            self.hits[path] += 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                server._count(url.path)
                route = getattr(self, "route_" + url.path.strip("/").replace("-", "_"), None)
                try:
                    if route is None:
                        self.answer(404, b"not here")
                    else:
                        route(parse_qs(url.query))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up, as it should
                self.close_connection = True

            def answer(
                self, status: int, body: bytes, content_type: str = "text/plain", **headers: str
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name.replace("_", "-"), value)
                self.end_headers()
                self.wfile.write(body)

            def route_page(self, _: dict) -> None:
                self.answer(200, PAGE, "text/html; charset=utf-8")

            def route_endless(self, _: dict) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Connection", "close")  # the body ends when the socket does
                self.end_headers()
                chunk = b"x" * 65536
                for _chunk in range(100_000):  # 6.5 GB: far past any limit, but not forever
                    self.wfile.write(chunk)

            def route_drip(self, _: dict) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", "600")
                self.end_headers()
                for _byte in range(600):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.1)

            def route_bomb(self, _: dict) -> None:
                self.answer(200, gzip_bomb(), Content_Encoding="gzip")

            def route_loop(self, _: dict) -> None:
                self.answer(302, b"", Location="/loop")

            def route_huge_headers(self, _: dict) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                for i in range(200):
                    self.send_header(f"X-Filler-{i}", "y" * 1024)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def route_bad_json(self, _: dict) -> None:
                self.answer(200, b'{"unterminated": ', "application/json")

            def route_binary(self, _: dict) -> None:
                self.answer(200, b"\x00\x01\x02" * 100_000, "application/octet-stream")

            def route_redirect(self, query: dict) -> None:
                self.answer(302, b"", Location=query["to"][0])

            def log_message(self, *_: object) -> None:
                pass

        return Handler


def wildcard_robots_txt(agent: str = "*", rules: int = 17_000) -> str:
    """The robots.txt of issue 41: ~510 KB of 17,000 rules for `agent`, each of seven `*`,
    so that every one searches a path of `a`s to its end (`Disallow:/*a*a*a*a*a*a*a*0001`).
    Rule i disallows /aaaaaaa{i:04x}."""
    body = "".join(f"Disallow:/*a*a*a*a*a*a*a*{i:04x}\n" for i in range(rules))
    return f"User-agent: {agent}\n{body}"
