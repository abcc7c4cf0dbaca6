"""The API's input edge on both backends: oversize bodies, strings that are not text, values
the databases cannot hold. Each answers a 4xx, and nothing stored can break a read."""

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
import sqlalchemy as sa
import uvicorn
from typer.testing import CliRunner

from app.api.app import create_app
from app.cli import cli
from app.settings import Settings
from tests.conftest import eventually, running_app
from tests.fetch.test_hostile import MiB, PeakRSS

URL = "http://example.test/page"
KEY = "k" * 20
JSON = {"content-type": "application/json"}


async def post_raw(client: httpx.AsyncClient, body: bytes, path: str = "/jobs") -> httpx.Response:
    return await client.post(path, content=body, headers=JSON)


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


@asynccontextmanager
async def served(settings: Settings) -> AsyncIterator[int]:
    """The app served by uvicorn on a free loopback port, which it yields."""
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=0, log_level="warning")
    )
    serving = asyncio.create_task(server.serve())
    try:

        async def started() -> bool:
            return server.started

        await eventually(started)
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        await serving


async def test_a_real_server_refuses_a_huge_upload_without_buffering_it(make_settings):
    """Through uvicorn: a chunked upload far over the limit gets its 413 while the client is
    still sending, and the server's memory does not grow with what was sent."""
    async with served(make_settings(worker_enabled=False, max_request_bytes=MiB)) as port:
        with PeakRSS() as rss:
            status, sent = await _upload_forever(port)
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


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"k": "x" * 16 * 1024}, "metadata is 16392 bytes of JSON; at most 16384"),
        ({"a": [[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]}, "metadata is nested deeper than 16 levels"),
    ],
)
async def test_metadata_is_bounded(client, metadata, message):
    """metadata over 16 KiB of JSON or nested deeper than 16 levels is a 422."""
    response = await client.post("/jobs", json={"url": URL, "metadata": metadata})
    assert 422 == response.status_code
    assert message in response.json()["detail"][0]["msg"]
    deepest = {"a": [[[[[[[[[[[[[[1]]]]]]]]]]]]]]}  # 16 levels, the metadata object included
    assert 201 == (await client.post("/jobs", json={"url": URL, "metadata": deepest})).status_code


# Refused input is shown in excerpts


def _many(item: bytes, count: int, open_: bytes = b"[", close: bytes = b"]") -> bytes:
    return open_ + b",".join(item % i if b"%d" in item else item for i in range(count)) + close


async def test_a_large_refused_body_is_a_short_422_and_holds_up_no_one(make_settings):
    """A 4 MB metadata array (an object is required) is a 422 of a few hundred bytes within a
    second, and /healthz, asked meanwhile, waits no more than half a second beyond what
    parsing the JSON takes (echoing the input whole held the event loop for seconds)."""
    body = b'{"url": "%s", "metadata": %s}' % (URL.encode(), _many(b'"abcdefg"', 400_000))
    started = time.monotonic()
    json.loads(body)
    parse = time.monotonic() - started
    async with (
        served(make_settings(worker_enabled=False)) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client,
    ):
        assert 200 == (await client.get("/healthz")).status_code

        async def timed_post() -> tuple[httpx.Response, float]:
            started = time.monotonic()
            response = await post_raw(client, body)
            return response, time.monotonic() - started

        posted = asyncio.create_task(timed_post())
        health_waits = []
        while not posted.done():
            started = time.monotonic()
            assert 200 == (await client.get("/healthz")).status_code
            health_waits.append(time.monotonic() - started)
        refusal, took = await posted
    waited = max(health_waits)
    print(
        f"{len(body)} bytes: parsed in {parse:.3f}s, refused in {took:.3f}s, /healthz {waited:.3f}s"
    )
    assert (422, ["body", "metadata"]) == (refusal.status_code, refusal.json()["detail"][0]["loc"])
    assert len(refusal.content) < 2048
    assert took < parse + 1.0
    assert waited < parse + 0.5


async def test_metadata_of_many_values_is_refused_without_reading_them_all(client):
    """metadata of 300,000 keys is refused once it holds more values than 16 KiB of JSON
    could, with a short 422 that does not echo it."""
    metadata = _many(b'"k%d":0', 300_000, b"{", b"}")
    response = await post_raw(client, b'{"url": "%s", "metadata": %s}' % (URL.encode(), metadata))
    assert 422 == response.status_code
    assert len(response.content) < 2048
    assert "metadata holds more than 16384 values" in response.json()["detail"][0]["msg"]


@pytest.mark.parametrize("path", ["/jobs", "/jobs/batch"])
async def test_a_body_of_many_unknown_keys_is_one_short_422(client, path):
    """300,000 unknown keys are one error, not one each (building those took seconds)."""
    fields = (
        b'"url": "%s"' % URL.encode()
        if path == "/jobs"
        else b'"jobs": [{"url": "%s"}]' % (URL.encode())
    )
    body = b"{" + fields + b"," + _many(b'"k%d":0', 300_000, b"", b"") + b"}"
    parse = _parse_seconds(body)
    started = time.monotonic()
    response = await post_raw(client, body, path)
    took = time.monotonic() - started
    parse = max(parse, _parse_seconds(body))
    assert [
        {
            "type": "value_error",
            "loc": ["body"],
            "msg": "Value error, the object has 300001 keys; at most 32",
            "ctx": {"error": "the object has 300001 keys; at most 32"},
        }
    ] == response.json()["detail"]
    # Against parsing the body here, before and after: a busy machine slows both alike.
    assert took < 0.5 + 5 * parse


def _parse_seconds(body: bytes) -> float:
    """How long parsing `body` as JSON takes in this process now (a quiet machine: 0.2 s)."""
    started = time.monotonic()
    json.loads(body)
    return time.monotonic() - started


async def test_a_refused_value_is_shown_cut_and_a_container_not_at_all(client):
    """A refused string is echoed to its first 200 characters, a refused list not at all; a
    few unknown keys are still named one by one."""
    response = await client.post(
        "/jobs", json={"url": URL, "tenant": "!" * 5000, "priority": [1, 2], "colour": "red"}
    )
    assert [
        {
            "type": "int_type",
            "loc": ["body", "priority"],
            "msg": "Input should be a valid integer",
        },
        {
            "type": "string_pattern_mismatch",
            "loc": ["body", "tenant"],
            "msg": "String should match pattern '^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$'",
            "input": "!" * 199 + "…",
            "ctx": {"pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"},
        },
        {
            "type": "extra_forbidden",
            "loc": ["body", "colour"],
            "msg": "Extra inputs are not permitted",
            "input": "red",
        },
    ] == response.json()["detail"]


# Strings that are not text


@pytest.mark.parametrize(
    "body",
    [
        b'{"url": "http://example.test/", "metadata": {"k": "\\ud800"}}',
        b'{"url": "http://example.test/", "metadata": {"\\udfff": 1}}',
        b'{"url": "http://example.test/", "metadata": {"k": ["ok", {"deep": "a\\udc80b"}]}}',
        b'{"url": "http://example.test/\\ud800"}',
        b'{"url": "http://example.test/", "callback_url": "http://example.test/\\ud800"}',
        b'{"url": "http://example.test/", "tenant": "\\ud800"}',
        b'{"url": "http://example.test/", "\\ud800": 1}',
        b'{"url": "http://example.test/", "priority": "\\ud800"}',
    ],
)
async def test_a_lone_surrogate_anywhere_is_422_and_nothing_is_stored(client, body):
    """A string, key or value, that is not Unicode text is refused before it is stored."""
    single = await post_raw(client, body)
    batch = await post_raw(client, b'{"jobs": [' + body + b"]}", "/jobs/batch")
    listed = await client.get("/jobs")
    assert (422, 422) == (single.status_code, batch.status_code)
    assert "must be Unicode text" in single.json()["detail"][0]["msg"]
    assert (200, []) == (listed.status_code, listed.json()["items"])


async def test_a_valid_surrogate_pair_is_text(client):
    """Escaped surrogate pairs are one character, kept as sent."""
    response = await post_raw(
        client, b'{"url": "http://example.test/", "metadata": {"\\ud83d\\ude00": "\\ud83d\\ude00"}}'
    )
    assert (201, {"😀": "😀"}) == (response.status_code, response.json()["metadata"])


@pytest.mark.parametrize(
    "body",
    [
        b'{"url": "http://example.test/\\u0000"}',
        b'{"url": "http://example.test/", "callback_url": "http://example.test/\\u0000"}',
        b'{"url": "http://example.test/", "tenant": "a\\u0000"}',
    ],
)
async def test_nul_in_a_text_field_is_422(client, body):
    """NUL, which PostgreSQL text cannot hold, is refused in the fields stored as text."""
    assert 422 == (await post_raw(client, body)).status_code


async def test_nul_in_metadata_is_kept(client):
    """metadata is a JSON column: both databases keep an escaped NUL, key or value."""
    response = await post_raw(
        client, b'{"url": "http://example.test/", "metadata": {"a\\u0000": "b\\u0000"}}'
    )
    job = response.json()
    assert (201, {"a\x00": "b\x00"}) == (response.status_code, job["metadata"])
    assert job == (await client.get(f"/jobs/{job['id']}")).json()


async def _plant(database_url: str, job_id: str, metadata_json: str) -> None:
    """Write a job's metadata behind the API's back, as a row stored before it checked."""
    settings = Settings(_env_file=None, database_url=database_url, worker_enabled=False)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        database = app.state.runtime.database
        cast = "CAST(:m AS json)" if database.backend.name == "postgresql" else ":m"
        update = sa.text(f"UPDATE jobs SET metadata = {cast} WHERE id = :id")
        values = {"m": metadata_json, "id": job_id}
        await database.transact(lambda conn: conn.execute(update, values))


def _nulled(levels: int) -> object:
    """`levels` nested lists around a null: how a deeper nesting is shown."""
    value: object = None
    for _ in range(levels):
        value = [value]
    return value


STORED = {
    "surrogates": (
        '{"k\\ud800": ["\\udfff", {"x": "a\\udc80b"}]}',
        {"k\ufffd": ["\ufffd", {"x": "a\ufffdb"}]},
    ),
    # 32 levels are shown (the metadata object and 31 lists), the rest is null.
    "deep": ('{"k": ' + "[" * 300 + "]" * 300 + "}", {"k": _nulled(31)}),
}


@pytest.mark.parametrize("stored", sorted(STORED))
def test_stored_bad_metadata_breaks_no_read(
    database_url, make_settings, monkeypatch, tmp_path, stored
):
    """Metadata already stored with lone surrogates (or nested 300 deep) is shown with U+FFFD
    (null) by GET /jobs, GET /jobs/{id} and `ingest jobs list --json`."""
    planted, expected = STORED[stored]

    async def submit_and_plant() -> tuple[str, list, dict]:
        async with running_app(make_settings(worker_enabled=False)) as (_, client):
            job_id = (await client.post("/jobs", json={"url": URL})).json()["id"]
        await _plant(database_url, job_id, planted)
        async with running_app(make_settings(worker_enabled=False)) as (_, client):
            listed = await client.get("/jobs")
            one = await client.get(f"/jobs/{job_id}")
            assert (200, 200) == (listed.status_code, one.status_code)
            return job_id, listed.json()["items"], one.json()

    job_id, listed, one = asyncio.run(submit_and_plant())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INGEST_DATABASE_URL", database_url)
    result = CliRunner().invoke(cli, ["jobs", "list", "--json"])
    assert 0 == result.exit_code, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [expected] * 3 == [listed[0]["metadata"], one["metadata"], lines[0]["metadata"]]
    assert [job_id] * 3 == [listed[0]["id"], one["id"], lines[0]["id"]]


# Values the databases cannot hold, odd times and ids


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b'{"url": "http://example.test/", "metadata": {"k": NaN}}', "metadata"),
        (b'{"url": "http://example.test/", "metadata": {"k": [Infinity]}}', "metadata"),
        (b'{"url": "http://example.test/", "metadata": {"k": -Infinity}}', "metadata"),
        (b'{"url": "http://example.test/", "metadata": {"k": 1e400}}', "metadata"),
        (b'{"url": "http://example.test/", "priority": NaN}', "priority"),
        (b'{"url": "http://example.test/", "max_attempts": 1e400}', "max_attempts"),
        (
            b'{"url": "http://example.test/", "not_before": "9999-12-31T23:59:59-14:00"}',
            "not_before",
        ),
        (
            b'{"url": "http://example.test/", "not_before": "0001-01-01T00:00:00+14:00"}',
            "not_before",
        ),
        (b'{"url": "http://' + b"a." * 130 + b'test/"}', "url"),
    ],
)
async def test_values_no_database_can_hold_are_422(client, body, where):
    """NaN and Infinity, times out of range once in UTC, hosts longer than DNS allows: 422."""
    response = await post_raw(client, body)
    batch = await post_raw(client, b'{"jobs": [' + body + b"]}", "/jobs/batch")
    assert (422, 422) == (response.status_code, batch.status_code)
    assert where == response.json()["detail"][0]["loc"][-1]


def cursor(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "raw",
    [
        "9999-12-31T23:59:59-14:00|0172ff91-2bc7-4277-8c54-cfd050bbf331",
        "0001-01-01T00:00:00+14:00|0172ff91-2bc7-4277-8c54-cfd050bbf331",
        "2026-01-01T00:00:00+00:00|a\x00b",
        "2026-01-01T00:00:00+00:00|not-an-id",
    ],
)
async def test_a_cursor_out_of_range_or_not_ours_is_400(client, raw):
    """A cursor whose time leaves the calendar in UTC, or whose id is not a job id: 400."""
    assert is_problem(await client.get("/jobs", params={"cursor": cursor(raw)}), 400)


async def test_nul_in_ids_and_filters_names_nothing(client):
    """NUL in a job id, a domain or tenant filter, or a domain to resume: 404 or nothing
    found, never the database's error."""
    job = (
        await client.post("/jobs", json={"url": URL, "not_before": "2999-01-01T00:00:00Z"})
    ).json()
    for method, path in [
        ("GET", "/jobs/a%00b"),
        ("GET", "/jobs/a%00b/attempts"),
        ("GET", "/jobs/a%00b/deliveries"),
        ("GET", "/jobs/a%00b/content"),
        ("GET", "/jobs/a%00b/text"),
        ("POST", "/jobs/a%00b/retry"),
        ("POST", "/jobs/a%00b/cancel"),
        ("DELETE", "/jobs/a%00b"),
        ("POST", "/domains/a%00b/resume"),
        ("POST", "/dashboard/jobs/a%00b/retry"),
    ]:
        response = await client.request(method, path)
        assert response.status_code in (404, 303), (path, response.status_code)
    for params in ({"domain": "a\x00b"}, {"tenant": "a\x00b"}, {"domain": "example.test\x00"}):
        listed = await client.get("/jobs", params=params)
        assert (200, []) == (listed.status_code, listed.json()["items"])
    requeued = await client.post("/jobs/retry", params={"domain": "a\x00b"})
    dashboard = await client.get("/dashboard", params={"domain": "a\x00b"})
    assert (200, {"requeued": 0, "left_over_quota": 0}) == (
        requeued.status_code,
        requeued.json(),
    )
    assert 200 == dashboard.status_code
    assert 200 == (await client.get(f"/jobs/{job['id']}")).status_code
