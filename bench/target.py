"""A minimal HTTP/1.1 keep-alive server: every request gets the same 2 KB text/html page
(or, with `--eval`, one of the extraction eval set's pages).

Run in its own process so its CPU does not count as the worker's:
`python -m bench.target --port 0 --delay-ms 100` prints the port it listens on, then serves
until killed. Only what httpx sends is understood: a request head with no body, answered in
order (httpx does not pipeline). `--delay-ms` holds each answer back to simulate a server.

`--page-type TYPE` serves the 2 KB page as TYPE instead of `text/html; charset=utf-8`
(`text/plain`: a job without HTML extraction, what a peer that only fetches does).

`--eval DATA` serves the extraction eval set's pages instead (`bench.eval_pages.load_pages`):
`/page/<i>` is page i modulo their number, as `text/html` with no charset (the archive kept
no headers); `--eval-pages N` a fixed sample of N of them (`bench.pages`).

`--hosts N` listens on N loopback addresses, 127.0.0.1, ..., 127.0.0.250, 127.0.1.1, ...
(`address(i)`), all on the same port: Linux routes all of 127.0.0.0/8 to `lo`, so URLs on
those addresses are N distinct hosts (domains, connection pools) served by this one
process, without listening beyond the loopback.
"""

import argparse
import asyncio
import contextlib
import re
import sys
from collections.abc import Awaitable, Sequence
from pathlib import Path

from bench.eval_pages import load_pages

PAGE_BYTES = 2048


def page() -> bytes:
    head = b"<!doctype html><html><head><title>bench page</title></head><body><p>"
    tail = b"</p></body></html>\n"
    return head + b"x" * (PAGE_BYTES - len(head) - len(tail)) + tail


PAGE_TYPE = "text/html; charset=utf-8"


def response(body: bytes | None = None, content_type: str = PAGE_TYPE) -> bytes:
    body = page() if body is None else body
    head = f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


_PAGE_NUMBER = re.compile(rb"^GET /page/(\d+)")


class PageProtocol(asyncio.Protocol):
    """Answers each request with `answers[i % len(answers)]` for `/page/<i>` (one answer:
    every request gets it, the path unread)."""

    def __init__(self, answers: Sequence[bytes], delay: float) -> None:
        self.answers = answers
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
            answer = self.answers[0]
            if len(self.answers) > 1 and (number := _PAGE_NUMBER.match(request)):
                answer = self.answers[int(number[1]) % len(self.answers)]
            if self.delay:
                asyncio.get_running_loop().call_later(self.delay, self._answer, answer, close)
            else:
                self._answer(answer, close)

    def _answer(self, answer: bytes, close: bool) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self.transport.write(answer)
        if close:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


def address(i: int) -> str:
    """The i-th loopback address the target listens on (i from 0): 250 per /24, .1 to .250."""
    return f"127.0.{i // 250}.{i % 250 + 1}"


async def serve(port: int, delay_ms: float, hosts: int, answers: Sequence[bytes]) -> None:
    loop = asyncio.get_running_loop()

    def listen(hosts: list[str], port: int) -> Awaitable[asyncio.Server]:
        return loop.create_server(
            lambda: PageProtocol(answers, delay_ms / 1000), hosts, port, backlog=1024
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
    parser.add_argument("--eval", type=Path, default=None, help="serve this eval set's pages")
    parser.add_argument("--eval-pages", type=int, default=None, help="a sample of N of them")
    parser.add_argument("--page-type", default=PAGE_TYPE, help="the 2 KB page's Content-Type")
    args = parser.parse_args()
    answers = [response(content_type=args.page_type)]
    if args.eval is not None:
        pages = load_pages(args.eval, args.eval_pages)
        answers = [response(page.body, "text/html") for page in pages]
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port, args.delay_ms, args.hosts, answers))
    sys.exit(0)


if __name__ == "__main__":
    main()
