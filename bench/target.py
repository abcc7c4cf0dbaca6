"""A minimal HTTP/1.1 keep-alive server: every request gets the same 2 KB text/html page.

Run in its own process so its CPU does not count as the worker's:
`python -m bench.target --port 0 --delay-ms 100` prints the port it listens on, then serves
until killed. Only what httpx sends is understood: a request head with no body, answered in
order (httpx does not pipeline). `--delay-ms` holds each answer back to simulate a server.

`--hosts N` listens on N loopback addresses, 127.0.0.1, ..., 127.0.0.250, 127.0.1.1, ...
(`address(i)`), all on the same port: Linux routes all of 127.0.0.0/8 to `lo`, so URLs on
those addresses are N distinct hosts (domains, connection pools) served by this one
process, without listening beyond the loopback.
"""

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Awaitable

PAGE_BYTES = 2048


def page() -> bytes:
    head = b"<!doctype html><html><head><title>bench page</title></head><body><p>"
    tail = b"</p></body></html>\n"
    return head + b"x" * (PAGE_BYTES - len(head) - len(tail)) + tail


def response() -> bytes:
    body = page()
    head = (
        "HTTP/1.1 200 OK\r\n"
        "Content-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "\r\n"
    )
    return head.encode() + body


class PageProtocol(asyncio.Protocol):
    def __init__(self, answer: bytes, delay: float) -> None:
        self.answer = answer
        self.delay = delay
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            request, self.buffer = self.buffer[:end], self.buffer[end + 4 :]
            close = b"connection: close" in request.lower()
            if self.delay:
                asyncio.get_running_loop().call_later(self.delay, self._answer, close)
            else:
                self._answer(close)

    def _answer(self, close: bool) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self.transport.write(self.answer)
        if close:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


def address(i: int) -> str:
    """The i-th loopback address the target listens on (i from 0): 250 per /24, .1 to .250."""
    return f"127.0.{i // 250}.{i % 250 + 1}"


async def serve(port: int, delay_ms: float, hosts: int) -> None:
    loop = asyncio.get_running_loop()
    answer = response()

    def listen(hosts: list[str], port: int) -> Awaitable[asyncio.Server]:
        return loop.create_server(
            lambda: PageProtocol(answer, delay_ms / 1000), hosts, port, backlog=1024
        )

    first = await listen([address(0)], port)
    port = first.sockets[0].getsockname()[1]
    # The others on the port the first one got.
    rest = await listen([address(i) for i in range(1, hosts)], port) if hosts > 1 else None
    print(port, flush=True)
    async with first:
        if rest is not None:
            await rest.start_serving()
        await first.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="hold each answer back")
    parser.add_argument("--hosts", type=int, default=1, help="loopback addresses to listen on")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port, args.delay_ms, args.hosts))
    sys.exit(0)


if __name__ == "__main__":
    main()
