"""`?diff=` on a version's text and Markdown, on both backends: `diff -u`'s text (a last line
without a newline included), and its bounds: size and lines refused, a deadline that kills
the process, a client that leaves killing it too, and a cap of diffs in flight per key."""

import asyncio
import hashlib
import multiprocessing
import random
from collections.abc import MutableMapping
from typing import Any

import pytest
from fastapi import FastAPI
from pebble import ProcessPool

from app.clock import utc_now
from app.model import Fetched
from tests.conftest import eventually, running_app
from tests.support.outcomes import record, succeeded
from tests.support.stores import queue_on

URL = "http://example.test/"
SLOW_LINES = 100_000
"""Lines of each side of a diff that runs far past every deadline of these tests."""
KEY = "k" * 20
OTHER_KEY = "o" * 20


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def job_with_versions(
    app: FastAPI, client: Any, *texts: str, markdowns: tuple[str, ...] = (), **headers: str
) -> str:
    """A job that keeps a version per text, 1 first, each with its Markdown from `markdowns`
    (else the text): each recorded as a worker records a success (the first, then refreshes)."""
    response = await client.post("/jobs", json={"url": URL}, headers=headers)
    assert 201 == response.status_code, response.text
    job_id: str = response.json()["id"]
    runtime = app.state.runtime
    queue = queue_on(runtime.database, runtime.settings)
    for number, text in enumerate(texts, start=1):
        if number > 1:
            await runtime.jobs.refresh(job_id)
        now = utc_now()
        (lease,) = await queue.claim("w", 1, now, 60)
        body = text.encode()
        fetched = Fetched(
            200,
            URL,
            "text/plain",
            len(body),
            hashlib.sha256(body).hexdigest(),
            None,
            len(text),
            body=body,
            text=text,
            markdown=markdowns[number - 1] if markdowns else text,
            text_sha256=hashlib.sha256(body).hexdigest(),
        )
        assert await record(queue, succeeded(lease, fetched), now)
    return job_id


def quadratic(lines: int, seed: int) -> str:
    """Lines from a vocabulary just large enough that none is frequent enough for difflib
    to skip as junk: its matching then costs about the square of the lines."""
    choose = random.Random(seed).choice
    vocabulary = [f"{i:x}" for i in range(lines // 100 - 8)]
    return "\n".join(choose(vocabulary) for _ in range(lines))


@pytest.fixture
def scheduled(monkeypatch) -> list[Any]:
    """The future of every task scheduled on a pebble pool, in order."""
    futures: list[Any] = []
    schedule = ProcessPool.schedule

    def kept(self, *args, **kwargs):
        futures.append(schedule(self, *args, **kwargs))
        return futures[-1]

    monkeypatch.setattr(ProcessPool, "schedule", kept)
    return futures


def diff_processes() -> set[int | None]:
    return {p.pid for p in multiprocessing.active_children() if p.name == "pebble_pool_worker"}


@pytest.mark.parametrize("end", ["", "\n"])
async def test_a_changed_last_line_is_a_removed_and_an_added_line(make_settings, end):
    """The last line changed, with or without a final newline: `-` and `+` on lines of their
    own, each marked `\\ No newline at end of file` when it has none, as `diff -u` does."""
    mark = "" if end else "\\ No newline at end of file\n"
    async with running_app(make_settings(worker_enabled=False)) as (app, client):
        job_id = await job_with_versions(app, client, f"a\nb\nold{end}", f"a\nb\nnew{end}")
        diff = await client.get(f"/jobs/{job_id}/versions/2/text", params={"diff": 1})
    assert (200, "text/x-diff; charset=utf-8") == (diff.status_code, diff.headers["content-type"])
    expected = f"--- version 1\n+++ version 2\n@@ -1,3 +1,3 @@\n a\n b\n-old\n{mark}+new\n{mark}"
    assert expected == diff.text


async def test_a_markdown_diff(make_settings):
    """`/versions/{n}/markdown?diff=m` answers the diff of the two versions' Markdown, not of
    their text."""
    async with running_app(make_settings(worker_enabled=False)) as (app, client):
        job_id = await job_with_versions(
            app, client, "Title\nold", "Title\nnew", markdowns=("# Title\n\nold", "# Title\n\nnew")
        )
        diff = await client.get(f"/jobs/{job_id}/versions/2/markdown", params={"diff": 1})
        plain = await client.get(f"/jobs/{job_id}/versions/1/markdown")
    assert (200, "text/x-diff; charset=utf-8") == (diff.status_code, diff.headers["content-type"])
    assert (
        "--- version 1\n+++ version 2\n@@ -1,3 +1,3 @@\n # Title\n \n-old\n"
        "\\ No newline at end of file\n+new\n\\ No newline at end of file\n"
    ) == diff.text
    assert ("# Title\n\nold", "text/markdown; charset=utf-8") == (
        plain.text,
        plain.headers["content-type"],
    )


async def test_versions_past_the_size_or_lines_cap_are_refused(make_settings):
    """A side past INGEST_DIFF_MAX_BYTES (counted as UTF-8) or INGEST_DIFF_MAX_LINES answers
    422 at `["query", "diff"]`, naming the limit and its setting; under both, 200."""
    settings = make_settings(worker_enabled=False, diff_max_bytes=100, diff_max_lines=3)
    async with running_app(settings) as (app, client):
        wide = await job_with_versions(app, client, "short", "é" * 51)  # 51 characters, 102 bytes
        long = await job_with_versions(app, client, "a\nb\nc\nd", "a")
        fits = await job_with_versions(app, client, "é" * 50, "a\nb\nc\n")
        answers = [
            await client.get(f"/jobs/{job_id}/versions/2/text", params={"diff": 1})
            for job_id in (wide, long, fits)
        ]
    assert [422, 422, 200] == [a.status_code for a in answers]
    (too_wide,), (too_long,) = answers[0].json()["detail"], answers[1].json()["detail"]
    assert ("diff_too_large", ["query", "diff"], 1) == (
        too_wide["type"],
        too_wide["loc"],
        too_wide["input"],
    )
    assert too_wide["msg"].startswith("version 2 is larger than INGEST_DIFF_MAX_BYTES (100 bytes)")
    assert too_long["msg"].startswith("version 1 has 4 lines, more than INGEST_DIFF_MAX_LINES (3)")


async def test_a_diff_past_its_deadline_is_killed(make_settings):
    """A diff still running at INGEST_DIFF_TIMEOUT_SECONDS answers 422 naming the setting;
    its process is killed, and the next diff is served by a new one."""
    settings = make_settings(
        worker_enabled=False, diff_timeout_seconds=0.5, diff_processes=1, diff_max_lines=10**6
    )
    async with running_app(settings) as (app, client):
        small = await job_with_versions(app, client, "a\nb", "a\nc")
        slow = await job_with_versions(
            app, client, quadratic(SLOW_LINES, 1), quadratic(SLOW_LINES, 2)
        )
        first = await client.get(f"/jobs/{small}/versions/2/text", params={"diff": 1})
        (process,) = diff_processes()
        late = await client.get(f"/jobs/{slow}/versions/2/text", params={"diff": 1})
        await eventually(lambda: _gone(process))
        again = await client.get(f"/jobs/{small}/versions/2/text", params={"diff": 1})
    assert (200, 422, 200) == (first.status_code, late.status_code, again.status_code)
    (refusal,) = late.json()["detail"]
    assert "diff_timeout" == refusal["type"]
    assert "INGEST_DIFF_TIMEOUT_SECONDS (0.5 s)" in refusal["msg"]
    assert first.text == again.text


async def test_a_diff_whose_client_left_is_killed(make_settings, scheduled):
    """The client disconnects while its diff runs: the diff is cancelled and its process
    killed long before the deadline, and the next diff is served."""
    settings = make_settings(
        worker_enabled=False, diff_timeout_seconds=60, diff_processes=1, diff_max_lines=10**6
    )
    async with running_app(settings) as (app, client):
        small = await job_with_versions(app, client, "a\nb", "a\nc")
        slow = await job_with_versions(
            app, client, quadratic(SLOW_LINES, 1), quadratic(SLOW_LINES, 2)
        )
        await client.get(f"/jobs/{small}/versions/2/text", params={"diff": 1})
        (process,) = diff_processes()
        sent: list[MutableMapping[str, Any]] = []
        received = 0

        async def receive() -> dict[str, Any]:
            nonlocal received
            received += 1
            if received == 1:
                return {"type": "http.request", "body": b"", "more_body": False}
            await eventually(lambda: _started(scheduled))
            return {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)

        await asyncio.wait_for(
            app(_get(f"/jobs/{slow}/versions/2/text", b"diff=1"), receive, send), 30
        )
        await eventually(lambda: _gone(process))
        again = await client.get(f"/jobs/{small}/versions/2/text", params={"diff": 1})
    assert 499 == sent[0]["status"]
    assert scheduled[1].cancelled()
    assert 200 == again.status_code


async def test_diffs_in_flight_past_the_per_key_cap_answer_429(make_settings, scheduled):
    """With INGEST_DIFF_PER_KEY=1, a key's second diff while its first runs answers 429 with
    Retry-After; another key's diff is served; the first one cancelled frees the key."""
    keys = {KEY: "t", OTHER_KEY: "t"}
    settings = make_settings(
        worker_enabled=False,
        api_keys=keys,
        diff_per_key=1,
        diff_timeout_seconds=60,
        diff_max_lines=10**6,
    )
    async with running_app(settings) as (app, client):
        headers: dict[str, Any] = auth(KEY)  # else mypy checks them against `markdowns`
        small = await job_with_versions(app, client, "a\nb", "a\nc", **headers)
        slow = await job_with_versions(
            app, client, quadratic(SLOW_LINES, 1), quadratic(SLOW_LINES, 2), **headers
        )
        path = f"/jobs/{slow}/versions/2/text?diff=1"
        first = asyncio.create_task(client.get(path, headers=headers))
        await eventually(lambda: _started(scheduled))
        second = await client.get(f"/jobs/{small}/versions/2/text?diff=1", headers=headers)
        other = await client.get(f"/jobs/{small}/versions/2/text?diff=1", headers=auth(OTHER_KEY))
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        freed = await client.get(f"/jobs/{small}/versions/2/text?diff=1", headers=headers)
    assert (429, "60") == (second.status_code, second.headers["retry-after"])
    assert "application/problem+json" == second.headers["content-type"]
    assert "INGEST_DIFF_PER_KEY" in second.json()["detail"]
    assert (200, 200) == (other.status_code, freed.status_code)
    assert scheduled[0].cancelled()


async def _gone(pid: int | None) -> bool:
    return pid not in diff_processes()


async def _started(futures: list[Any]) -> bool:
    """Whether the last task scheduled runs in a process."""
    return bool(futures) and bool(futures[-1].running())


def _get(path: str, query: bytes) -> dict[str, Any]:
    """An ASGI scope of `GET path?query`, as `running_app`'s client sends it."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query,
        "headers": [(b"host", b"ingest")],
        "client": ("127.0.0.1", 50000),
        "server": ("ingest", 80),
    }
