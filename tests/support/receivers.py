"""Hostile webhook receivers: asyncio servers on 127.0.0.1 that read a POST and then answer
it badly, counting what they manage to send.

    endless   200, a chunked body that never ends, 16 KiB every 10 ms
    bomb      200, 10 MB of zeros in ~10 KB of gzip whose trailer (CRC) is wrong, so only a
              client that inflates all of it can notice
    silent    reads the request and never answers
"""

import asyncio
import contextlib
import time
import zlib
from collections.abc import Awaitable, Callable
from functools import cache

CHUNK = 16 * 1024


@cache
def broken_gzip_bomb(size: int = 10_000_000) -> bytes:
    """`size` zeros gzipped, with the CRC of the trailer flipped."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    body = packer.compress(bytes(size)) + packer.flush()
    crc = int.from_bytes(body[-8:-4], "little") ^ 0xFFFFFFFF
    return body[:-8] + crc.to_bytes(4, "little") + body[-4:]


class Receiver:
    def __init__(self, behaviour: str) -> None:
        self._answer: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]] = (
            getattr(self, "_" + behaviour)
        )
        self.requests: list[tuple[float, dict[str, str]]] = []
        """When each request was read (monotonic) and its headers, names lower-cased."""
        self.sent = 0
        """Bytes of answer bodies written (as far as the socket took them)."""
        self.gone = asyncio.Event()
        """Set when the client closed a connection it was being answered on."""
        self.gone_at = 0.0
        self.url = ""
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> "Receiver":
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/hook"
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")[1:]
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (line.partition(":") for line in lines if line)
            }
            self.requests.append((time.monotonic(), headers))
            await reader.readexactly(int(headers.get("content-length", "0")))
            await self._answer(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            self._went()
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _endless(self, _: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n")
        writer.write(b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n" % CHUNK + b"x" * CHUNK + b"\r\n"
        while True:
            writer.write(chunk)
            await writer.drain()
            self.sent += CHUNK
            await asyncio.sleep(0.01)

    async def _bomb(self, _: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = broken_gzip_bomb()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\n")
        writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
        self.sent += len(body)

    async def _silent(self, reader: asyncio.StreamReader, _: asyncio.StreamWriter) -> None:
        await reader.read()  # the end of the stream: the client gave up
        self._went()

    def _went(self) -> None:
        self.gone_at = time.monotonic()
        self.gone.set()
