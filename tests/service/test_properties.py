"""Property tests of the API's input edge and of the fetch side, on both backends (hypothesis).

Whatever JSON text a client posts to /jobs or /jobs/batch (odd strings, lone surrogates,
NUL, huge numbers, NaN, deep nesting), and whatever query string it sends to GET /jobs, the
answer is never a 5xx. After every accepted submission GET /jobs and GET /jobs/{id} still
answer 200 and `ingest jobs list --json` prints lines that parse. The bodies are built as
raw text, so they can hold what Python's json.dumps would never write.

Whatever a server answers (any status line, headers of any bytes, a body in any declared
charset, framed right or wrong, or late), the job leaves `running` within its fetch
deadline, its outcome is recorded with its batch, and every read of it still works: the
API's, the dashboard's and the CLI's.
"""

import asyncio
import base64
import codecs
import json
import logging
import string
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from typing import TypeVar

import httpx
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from app.api.schemas import TENANT_PATTERN
from app.cli import cli
from tests.conftest import eventually, running_app
from tests.support.webserver import RawServer

EXAMPLES = settings(
    max_examples=150,
    deadline=None,
    # One app and database serve every example of a test: jobs pile up, which is the point.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
JSON = {"content-type": "application/json"}
T = TypeVar("T")


def mostly(usual: st.SearchStrategy[T], odd: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    """`usual` three times in four. (st.one_of flattens nested choices into equal shares.)"""
    return st.integers(0, 3).flatmap(lambda n: odd if n == 0 else usual)


# Raw JSON text. json.dumps escapes every non-ASCII character, so a lone surrogate travels
# as "\ud800", as a client's JSON encoder would send it. Odd values are one choice among
# plain ones, so that a good share of the job-shaped bodies is accepted and stored.
odd_characters = st.one_of(
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    st.sampled_from("\x00\u2028\ufffd\U0001f600"),
)
strings = st.one_of(
    st.text(max_size=12),
    st.text(st.one_of(st.characters(), odd_characters), max_size=12),
).map(json.dumps)
numbers = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats().map(lambda x: json.dumps(x)),  # NaN, Infinity and -Infinity included
    st.sampled_from(["1e400", "-1e400", "1e-400", "-0", "0.1e+999", "9" * 4400]),
)
scalars = st.one_of(st.sampled_from(["null", "true", "false"]), strings, numbers)


def _object(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{key}:{value}" for key, value in pairs) + "}"


values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda items: "[" + ",".join(items) + "]"),
        st.lists(st.tuples(strings, inner), max_size=4).map(_object),
    ),
    max_leaves=25,
)
objects = st.lists(st.tuples(strings, values), max_size=4).map(_object)
deep = st.integers(min_value=10, max_value=1200).map(lambda n: "[" * n + "]" * n)
offsets = st.timedeltas(min_value=-timedelta(hours=23, minutes=59), max_value=timedelta(hours=23))
times = st.one_of(
    st.builds(
        lambda moment, offset: json.dumps(moment.replace(tzinfo=timezone(offset)).isoformat()),
        st.datetimes(),
        offsets,
    ),
    st.sampled_from(['"9999-12-31T23:59:59-14:00"', '"0001-01-01T00:00:00+14:00"']),
)
fine_urls = st.text(string.ascii_letters + string.digits + "-._~/?=&%", max_size=20).map(
    lambda path: json.dumps("http://example.test/" + path)
)
odd_urls = st.one_of(
    st.builds(lambda path: json.dumps("http://example.test/" + path), st.text(max_size=20)),
    st.sampled_from(['"http://10.0.0.1/"', '"http://' + "a." * 130 + 'b/"', '"http://x:0/"']),
    strings,
)
urls = mostly(fine_urls, odd_urls)
fields = st.one_of(
    st.tuples(st.just('"priority"'), st.one_of(st.integers(-1000, 1000).map(str), numbers)),
    st.tuples(st.just('"max_attempts"'), st.one_of(st.integers(1, 100).map(str), numbers)),
    st.tuples(st.just('"not_before"'), times),
    st.tuples(st.just('"metadata"'), mostly(objects, st.one_of(values, deep))),
    st.tuples(st.just('"callback_url"'), urls),
    st.tuples(
        st.just('"tenant"'), st.one_of(st.from_regex(TENANT_PATTERN).map(json.dumps), strings)
    ),
)
jobs = st.builds(
    lambda url, rest: _object([('"url"', url), *rest]), urls, st.lists(fields, max_size=3)
)
bodies = st.one_of(
    jobs, jobs, values, deep, st.binary(max_size=40).map(lambda raw: raw.decode("latin-1"))
)
batches = mostly(
    st.lists(jobs, min_size=1, max_size=5).map(lambda items: '{"jobs":[' + ",".join(items) + "]}"),
    bodies,
)


def latin1(text: str) -> bytes:
    # Raw bytes survive as latin-1 code points; JSON text built above is ASCII anyway.
    return text.encode("latin-1", "backslashreplace")


@pytest.fixture
def cli_env(database_url, monkeypatch, tmp_path):
    """Point `ingest` at the test database, away from any .env."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INGEST_DATABASE_URL", database_url)


async def still_readable(client: httpx.AsyncClient, ids: list[str]) -> None:
    """The lists, each new job, and the CLI's JSON lines: all of them still read."""
    listed = await client.get("/jobs", params={"limit": 500})
    assert 200 == listed.status_code, listed.text
    for job_id in ids:
        one = await client.get(f"/jobs/{job_id}")
        assert 200 == one.status_code, one.text
    result = await asyncio.to_thread(CliRunner().invoke, cli, ["jobs", "list", "--json"])
    assert 0 == result.exit_code, result.output
    # One JSON document a line; not splitlines(), which also splits on U+0085, U+2028 and
    # the like, which JSON leaves unescaped inside strings (metadata may hold them).
    lines = [line for line in result.stdout.split("\n") if line]
    assert all(json.loads(line)["id"] for line in lines)


@EXAMPLES
@given(body=bodies)
async def test_no_job_body_is_a_server_error(client, cli_env, body):
    """POST /jobs: any body is a 2xx or a 4xx; an accepted job leaves every read working."""
    response = await client.post("/jobs", content=latin1(body), headers=JSON)
    event(f"HTTP {response.status_code}")
    assert response.status_code < 500, body
    if response.status_code == 201:
        await still_readable(client, [response.json()["id"]])


@EXAMPLES
@given(body=batches)
async def test_no_batch_body_is_a_server_error(client, cli_env, body):
    """POST /jobs/batch: likewise, for every job of an accepted batch."""
    response = await client.post("/jobs/batch", content=latin1(body), headers=JSON)
    event(f"HTTP {response.status_code}")
    assert response.status_code < 500, body
    if response.status_code == 201:
        await still_readable(client, [job["id"] for job in response.json()["items"]])


def _cursor(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode("utf-8", "surrogatepass")).decode().rstrip("=")


query_text = st.one_of(
    st.text(max_size=20),
    st.text(st.sampled_from("\x00%ED,-|: .aé😀"), max_size=12),
    st.sampled_from(["example.test", "default", "dead"]),
)
edges = st.sampled_from([datetime.min, datetime.max])
cursors = st.one_of(
    query_text,
    st.builds(
        lambda moment, offset, job_id: _cursor(
            f"{moment.replace(tzinfo=timezone(offset)).isoformat()}|{job_id}"
        ),
        mostly(st.datetimes(), edges),
        offsets,
        st.one_of(
            st.uuids().map(str), st.text(st.one_of(st.characters(), odd_characters), max_size=8)
        ),
    ),
    st.builds(_cursor, st.text(st.one_of(st.characters(), odd_characters), max_size=40)),
)
queries = st.fixed_dictionaries(
    {},
    optional={
        "status": mostly(st.sampled_from(["dead", "pending,running", ""]), query_text),
        "domain": query_text,
        "tenant": query_text,
        "limit": mostly(
            st.integers(1, 500).map(str), st.one_of(st.integers().map(str), query_text)
        ),
        "cursor": cursors,
    },
)


@EXAMPLES
@given(params=queries)
async def test_no_list_query_is_a_server_error(client, params):
    """GET /jobs (and the dashboard, which lists the same way): any query is 2xx or 4xx."""
    await client.post("/jobs", json={"url": "http://example.test/"})
    for path in ("/jobs", "/dashboard"):
        response = await client.get(path, params=params)
        event(f"{path} HTTP {response.status_code}")
        assert response.status_code < 500, (path, params)


# ---- the fetch side -----------------------------------------------------------------------

FETCH_TIMEOUT = 0.5
STALL = 0.8
"""How late a late server answers: past the fetch deadline."""
ANSWERS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _line(raw: bytes) -> bytes:
    """`raw` without CR and LF: any other byte, so the answer's framing stays as built."""
    return raw.replace(b"\r", b"").replace(b"\n", b"")


TOKEN = string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~"
status_lines = st.one_of(
    st.builds(
        lambda status, reason: b"HTTP/1.1 %d " % status + _line(reason),
        st.integers(100, 599),
        st.binary(max_size=12),
    ),
    st.sampled_from([b"HTTP/1.1 200 OK", b"HTTP/1.0 200 OK", b"HTTP/1.1 200", b"HTTP/1.1 999 X"]),
)
ODD_VALUES = [
    b"\xb2",
    "١٢".encode(),
    b"1e3",
    b"-1",
    b"9" * 30,
    b"Mon, 30 Nov 2026 12:02:00 GMT",
    "€".encode(),
    b"\x1b]52;c;aGk=\x07",
    b"gzip",
    b"chunked",
    b"0",
]
header_values = st.one_of(st.binary(max_size=30).map(_line), st.sampled_from(ODD_VALUES))
named = st.sampled_from(
    [b"Retry-After", b"Content-Encoding", b"Content-Length", b"Transfer-Encoding", b"Set-Cookie"]
)
# No Location of any bytes: one naming a real host would send the worker to the internet.
locations = st.sampled_from([b"/elsewhere", b"http://[::1", b"", b"//", b"http://127.0.0.1:1/"])
headers = st.lists(
    st.one_of(
        st.tuples(st.text(TOKEN, min_size=1, max_size=10).map(str.encode), header_values),
        st.tuples(named, header_values),
        st.tuples(st.just(b"Location"), locations),
    ),
    max_size=4,
)
LABELS = [
    "utf-8",
    "utf-7",
    "UTF-16",
    "utf-16be",
    "utf-32",
    "koi8-r",
    "shift_jis",
    "iso-2022-jp",
    "iso-2022-kr",
    "hz",
    "cp037",
    "latin1",
    "x-user-defined",
    "bogus",
    '"utf-8"',
    "",
]
media_types = mostly(
    st.sampled_from(["text/html", "text/plain", "application/json", "application/xml"]),
    st.sampled_from(["text/csv", "image/png", "application/octet-stream", "TEXT/HTML"]),
)
content_types = mostly(
    st.builds(
        lambda media, label: f"{media}; charset={label}".encode(),
        media_types,
        st.sampled_from(LABELS),
    ),
    st.binary(max_size=40).map(_line),
)
texts = st.text(st.one_of(st.characters(), st.sampled_from("\x00\x1b\u202e<>&")), max_size=40)
documents = st.one_of(
    texts,
    texts.map(lambda text: f"<html><head><title>{text}</title></head><body>{text}</body></html>"),
)


def _encoded(text: str, content_type: bytes) -> bytes:
    """`text` in the charset `content_type` declares, as far as Python has that codec."""
    label = content_type.partition(b"charset=")[2].decode("latin-1").strip('"')
    try:
        return text.encode(codecs.lookup(label).name, "replace")
    except (LookupError, ValueError, UnicodeError):
        return text.encode("utf-8", "surrogatepass")


answer_bodies = st.one_of(st.binary(max_size=60), st.builds(lambda d: d, documents))
FRAMINGS = ["length", "close", "short", "long", "chunked"]


@st.composite
def answers(draw: st.DrawFn) -> tuple[bytes, float]:
    """A whole answer's bytes, and how long the server waits before sending them."""
    content_type = draw(content_types)
    body = draw(answer_bodies)
    if isinstance(body, str):
        body = _encoded(body, content_type)
    lines = [draw(mostly(st.just(b"HTTP/1.1 200 OK"), status_lines))]
    lines += [b"Content-Type: " + content_type]
    lines += [name + b": " + value for name, value in draw(mostly(st.just([]), headers))]
    framing = draw(st.sampled_from(FRAMINGS))
    event(f"framing {framing}")
    if framing == "chunked":
        lines.append(b"Transfer-Encoding: chunked")
        body = (b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)) if body else b"0\r\n\r\n"
    elif framing != "close":
        declared = {"length": len(body), "short": len(body) + 5, "long": max(len(body) - 3, 0)}
        lines.append(b"Content-Length: %d" % declared[framing])
    lines.append(b"Connection: close")
    late = draw(st.integers(0, 9)) == 0
    return b"\r\n".join(lines) + b"\r\n\r\n" + body, STALL if late else 0.0


@pytest.fixture
def raw_server() -> Iterator[RawServer]:
    with RawServer() as server:
        yield server


@pytest.fixture
async def fetching(make_settings) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its worker: one attempt a job, no deferral, sub-second deadlines."""
    settings = make_settings(
        fetch_timeout_seconds=FETCH_TIMEOUT,
        connect_timeout_seconds=FETCH_TIMEOUT,
        read_timeout_seconds=FETCH_TIMEOUT,
        max_attempts=1,
        max_deferrals=0,
        max_redirects=2,
        retry_after_max_seconds=1.0,
    )
    async with running_app(settings) as (_, client):
        yield client


class Trouble(logging.Handler):
    """Keeps the worker's lines that say a batch was not recorded or a job task failed."""

    SIGNS = ("recording ", "cannot be recorded", "gave up recording", "job task failed")

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if any(sign in message for sign in self.SIGNS):
            self.lines.append(message)


@pytest.fixture
def trouble() -> Iterator[Trouble]:
    handler = Trouble()
    logger = logging.getLogger("ingest.worker")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


async def _attempted(client: httpx.AsyncClient, job_id: str) -> dict | None:
    """The job once its attempt is recorded (it left `running`), else None."""
    job = (await client.get(f"/jobs/{job_id}")).json()
    items = (await client.get(f"/jobs/{job_id}/attempts")).json()["items"]
    ended = job["status"] != "running" and items and items[0]["outcome"] is not None
    return job if ended else None


async def readable_everywhere(client: httpx.AsyncClient, job_id: str) -> None:
    """Every read of the job answers: the API's, the dashboard's, the CLI's (JSON and
    table, the table without a raw ESC)."""
    for path in (
        f"/jobs/{job_id}",
        f"/jobs/{job_id}/attempts",
        "/jobs",
        f"/dashboard/jobs/{job_id}",
    ):
        response = await client.get(path)
        assert 200 == response.status_code, (path, response.text)
    for path in (f"/jobs/{job_id}/content", f"/jobs/{job_id}/text"):
        for where in ("", "/dashboard"):
            response = await client.get(where + path)
            assert response.status_code in (200, 404), (where + path, response.text)
    shown = await asyncio.to_thread(CliRunner().invoke, cli, ["jobs", "show", job_id, "--json"])
    assert 0 == shown.exit_code, shown.output
    assert job_id == json.loads(shown.stdout)["id"]
    table = await asyncio.to_thread(CliRunner().invoke, cli, ["jobs", "show", job_id])
    assert 0 == table.exit_code, table.output
    assert "\x1b" not in table.stdout


def _answer(head: bytes, body: bytes = b"") -> tuple[bytes, float]:
    length = b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
    return head + b"\r\n" + length + body, 0.0


KNOWN = [
    _answer(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-7", b"+2AA-"),
    _answer(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; x=" + "€".encode(), b"cost"),
    _answer(b"HTTP/1.1 429 Slow\r\nContent-Type: text/plain\r\nRetry-After: \xb2"),
    _answer(b"HTTP/1.1 200 OK\r\nContent-Type: text/html", b"<title>\x1b]52;c;aGk=\x07</title>"),
    _answer(b"HTTP/1.1 302 Found\r\nContent-Type: text/plain\r\nLocation: http://[::1"),
]
"""Answers that once broke a job or a read: a lone surrogate (UTF-7), a Content-Type outside
Latin-1, a Retry-After of `²`, a title that drives the terminal, a Location that is no URL."""


@ANSWERS
@given(answer=answers())
@example(answer=KNOWN[0])
@example(answer=KNOWN[1])
@example(answer=KNOWN[2])
@example(answer=KNOWN[3])
@example(answer=KNOWN[4])
async def test_no_answer_breaks_a_job_or_a_read(fetching, raw_server, cli_env, trouble, answer):
    """Any answer: the job leaves `running` within its fetch deadline (and the time to claim
    and record it), no batch fails, and every read of the job works."""
    raw, stall = answer
    path = f"/answer/{time.monotonic_ns()}"
    response = await fetching.post("/jobs", json={"url": raw_server.script(path, raw, stall)})
    job = response.json()
    done = await eventually(lambda: _attempted(fetching, job["id"]), timeout=FETCH_TIMEOUT + 10)
    event(f"{done['status']} {(done['last_error'] or {}).get('type')}")
    await readable_everywhere(fetching, job["id"])
    assert [] == trouble.lines
    # A failure may have paused the one domain of every answer: the next example's job runs.
    await fetching.post(f"/domains/{job['domain']}/resume")
