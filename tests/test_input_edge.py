"""The API's input edge on both backends: oversize bodies answer 413 before anything reads
them."""

import asyncio
from collections.abc import AsyncIterator

import httpx
import uvicorn

from app.main import create_app
from tests.conftest import eventually, running_app
from tests.test_hostile import MiB, PeakRSS

URL = "http://example.test/page"
KEY = "k" * 20
JSON = {"content-type": "application/json"}


def is_problem(response: httpx.Response, status: int) -> bool:
    return (status, "application/problem+json", status) == (
        response.status_code,
        response.headers["content-type"],
        response.json()["status"],
    )


# Oversize bodies


class Chunks:
    """A request body of 64 KiB chunks, 8 MiB in all, that counts how many were read."""

    def __init__(self) -> None:
        self.read = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(128):
            self.read += 1
            yield b"[" * 65536


async def test_declared_oversize_body_is_413_before_the_key_is_checked(make_settings):
    """Content-Length over the limit: 413 problem+json without reading a byte, key or not."""
    settings = make_settings(worker_enabled=False, api_keys={KEY: "*"}, max_request_bytes=MiB)
    declared = {"content-length": str(400 * MiB), **JSON}
    async with running_app(settings) as (_, client):
        answers = []
        for auth in (
            {},
            {"authorization": "Bearer " + "x" * 20},
            {"authorization": f"Bearer {KEY}"},
        ):
            body = Chunks()
            response = await client.post("/jobs", content=body, headers=declared | auth)
            answers.append((is_problem(response, 413), response.headers["connection"], body.read))
        fits = await client.post(
            "/jobs", json={"url": URL}, headers={"authorization": f"Bearer {KEY}"}
        )
    assert [(True, "close", 0)] * 3 == answers
    assert 201 == fits.status_code


async def test_streamed_oversize_body_is_413_and_read_no_further(make_settings):
    """A body without Content-Length is counted as it streams: 413 once past the limit, with
    no API key, and the rest is never read."""
    settings = make_settings(worker_enabled=False, api_keys={KEY: "*"}, max_request_bytes=MiB)
    async with running_app(settings) as (_, client):
        answers = {}
        for path in ("/jobs", "/jobs/batch"):
            body = Chunks()
            response = await client.post(path, content=body, headers=JSON)
            answers[path] = (is_problem(response, 413), body.read)
    # 1 MiB is 16 chunks: the 17th passes the limit.
    assert {"/jobs": (True, 17), "/jobs/batch": (True, 17)} == answers


async def test_a_real_server_refuses_a_huge_upload_without_buffering_it(make_settings):
    """Through uvicorn: a chunked upload far over the limit gets its 413 while the client is
    still sending, and the server's memory does not grow with what was sent."""
    settings = make_settings(worker_enabled=False, max_request_bytes=MiB)
    app = create_app(settings)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    try:

        async def started() -> bool:
            return server.started

        await eventually(started)
        port = server.servers[0].sockets[0].getsockname()[1]
        with PeakRSS() as rss:
            status, sent = await _upload_forever(port)
    finally:
        server.should_exit = True
        await serving
    print(f"huge upload: 413 after {sent / MiB:.1f} MiB sent, RSS +{rss.growth / MiB:.1f} MiB")
    assert b"413" == status
    # What was sent before the answer came is bounded by the limit and the sockets' buffers.
    assert sent < 16 * MiB, f"sent {sent / MiB:.0f} MiB before the answer"
    assert rss.growth < 32 * MiB, f"RSS grew {rss.growth / MiB:.0f} MiB"


async def _upload_forever(port: int) -> tuple[bytes, int]:
    """POST /jobs a chunked body until the answer's status line arrives (at most 32 MiB)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /jobs HTTP/1.1\r\nHost: ingest\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    answer = asyncio.create_task(reader.readline())
    chunk = b"10000\r\n" + b" " * 65536 + b"\r\n"
    sent = 0
    try:
        while not answer.done() and sent < 32 * MiB:
            writer.write(chunk)
            sent += 65536
            drained = asyncio.ensure_future(writer.drain())
            await asyncio.wait([drained, answer], timeout=30, return_when=asyncio.FIRST_COMPLETED)
            if not drained.done():
                drained.cancel()
        status_line = await asyncio.wait_for(answer, timeout=30)
    except ConnectionError:
        status_line = await asyncio.wait_for(answer, timeout=30)
    finally:
        writer.close()
    return status_line.split()[1], sent
