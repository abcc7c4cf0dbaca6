"""Property tests of the API's input edge, on both backends (hypothesis).

Whatever JSON text a client posts to /jobs or /jobs/batch (odd strings, lone surrogates,
NUL, huge numbers, NaN, deep nesting), and whatever query string it sends to GET /jobs, the
answer is never a 5xx. After every accepted submission GET /jobs and GET /jobs/{id} still
answer 200 and `ingest jobs list --json` prints lines that parse. The bodies are built as
raw text, so they can hold what Python's json.dumps would never write.
"""

import asyncio
import base64
import json
import string
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from app.api.schemas import TENANT_PATTERN
from app.cli import cli

EXAMPLES = settings(
    max_examples=150,
    deadline=None,
    # One app and database serve every example of a test: jobs pile up, which is the point.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
JSON = {"content-type": "application/json"}


def mostly(usual: st.SearchStrategy[str], odd: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
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
