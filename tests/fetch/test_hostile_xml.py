"""Hostile XML against `ingest serve` and its worker, on both backends.

A megabyte of `<`, or of `<![CDATA[`, served as application/xml (allowed by default) was
quadratic to strip of its tags, in the worker's parser thread: it held the interpreter lock,
and serve's API with it, for minutes, past the job's lease. Its text is now one pass, in the
extraction processes under their deadline; the API answers all the while.
"""

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.processes import service
from tests.support.webserver import Reply, ScriptedServer

MiB = 1024 * 1024
BODIES = {"/unclosed-tags.xml": b"<" * MiB, "/unclosed-cdata.xml": b"<![CDATA[" * (MiB // 9)}
JOB_SECONDS = 60.0
"""Loose: each job takes a fraction of it, but serve starts its extraction process first on
a busy 2-core machine; before, a job took minutes."""
HEALTHZ_SECONDS = 2.0
"""Loose too: /healthz answers in milliseconds; before, it waited for minutes."""
ENDED = {
    ("succeeded", None),
    ("dead", "ExtractionTimeout"),
    ("dead", "ExtractionFailed"),
}
"""How a job may end: a body past the deadline is a classified failure, not a hang."""


@pytest.mark.timeout(150)  # serve's start on a busy machine, then the jobs
async def test_megabytes_of_unclosed_xml_end_while_the_api_answers(
    database_url: str, web: ScriptedServer, tmp_path: Path
) -> None:
    """1 MB of `<` and 1 MB of `<![CDATA[`: each job ends (succeeded, or dead of a classified
    extraction failure) within a minute, and every /healthz meanwhile answers within 2 s."""
    urls = [
        web.script(path, Reply(body=body, content_type="application/xml"))
        for path, body in BODIES.items()
    ]
    args = ("--host", "127.0.0.1", "--port", "0")
    settings: dict[str, Any] = {
        "extract_processes": 1,
        "extract_timeout_seconds": 10,
        "max_attempts": 1,
        "poll_interval_seconds": 0.1,
    }
    with service("serve", tmp_path / "serve.log", database_url, *args, **settings) as serve:
        await serve.wait_for_line("Application startup complete")
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", serve.text())
        assert found, serve.text()
        base_url = f"http://127.0.0.1:{found[1]}"
        async with httpx.AsyncClient(base_url=base_url, trust_env=False, timeout=30) as client:
            ids = [(await client.post("/jobs", json={"url": url})).json()["id"] for url in urls]
            latencies, jobs = await _watch(client, ids)
    assert {web.count(path) for path in BODIES} == {1}
    assert all((status, error) in ENDED for status, error in jobs), jobs
    slowest = max(seconds for _, seconds in latencies)
    print(f"/healthz answered {len(latencies)} times, slowest {slowest:.3f}s; jobs {jobs}")
    assert {200} == {status for status, _ in latencies}
    assert slowest < HEALTHZ_SECONDS, f"/healthz took {slowest:.2f}s"


async def _watch(
    client: httpx.AsyncClient, ids: list[str]
) -> tuple[list[tuple[int, float]], list[tuple[str, str | None]]]:
    """/healthz asked again and again, timed, until every job has ended: the answers' status
    and seconds, and each job's status and error type."""
    latencies: list[tuple[int, float]] = []
    ended: dict[str, tuple[str, str | None]] = {}
    deadline = time.monotonic() + JOB_SECONDS
    while len(ended) < len(ids):
        assert time.monotonic() < deadline, f"jobs not ended within {JOB_SECONDS}s: {ended}"
        start = time.monotonic()
        health = await client.get("/healthz")
        latencies.append((health.status_code, time.monotonic() - start))
        for job_id in ids:
            job = (await client.get(f"/jobs/{job_id}")).json()
            if job["status"] in ("succeeded", "dead"):
                ended[job_id] = (job["status"], (job["last_error"] or {}).get("type"))
        await asyncio.sleep(0.05)
    return latencies, [ended[job_id] for job_id in ids]
