"""One poison outcome costs its batch-mates nothing, on both backends: an outcome the
database refuses is written apart from the others, and the worker goes on claiming."""

import logging
from dataclasses import replace

from app.rules import policy
from tests.conftest import running_app, submit, wait_for_status
from tests.support.webserver import Reply

BATCHED = {"worker_concurrency": 4, "record_delay_seconds": 1.0}
"""Four slots, and outcomes held up to a second: four jobs that finish together are
recorded in one batch (a full batch is written at once)."""


async def test_an_outcome_the_database_refuses_costs_its_batch_mates_nothing(
    make_settings, web, monkeypatch, caplog
):
    """Four jobs finish together, one of them with an attempt's duration no integer column
    holds: the batch fails, the three others are recorded at once (fetched once, succeeded),
    the refused one is given up with its error logged, and the worker claims the next job."""
    real_settle = policy.settle

    def settle(lease, *args, **kwargs):
        outcome = real_settle(lease, *args, **kwargs)
        return replace(outcome, duration_ms=2**70) if lease.url.endswith("/poison") else outcome

    monkeypatch.setattr(policy, "settle", settle)
    caplog.set_level(logging.INFO, logger="ingest.worker")
    paths = ["/ok/0", "/ok/1", "/ok/2", "/poison"]
    async with running_app(make_settings(lease_seconds=30, **BATCHED)) as (app, client):
        completer = app.state.runtime.worker.completer
        body = {"jobs": [{"url": web.url(path)} for path in paths]}
        created = (await client.post("/jobs/batch", json=body)).json()["items"]
        ok = [await wait_for_status(client, job["id"], "succeeded") for job in created[:3]]
        assert not completer.failing
        later = await submit(client, web.url("/later"))
        await wait_for_status(client, later["id"], "succeeded")
        poison = (await client.get(f"/jobs/{created[3]['id']}")).json()
    assert [1, 1, 1] == [job["attempts"] for job in ok]
    assert [1, 1, 1, 1] == [web.count(path) for path in paths]
    assert "running" == poison["status"]  # until its lease runs out
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("recording 4 finished jobs failed") for line in lines), lines
    given_up = f"job {created[3]['id']} attempt 1: its outcome cannot be recorded"
    assert any(line.startswith(given_up) for line in lines), lines


async def test_a_utf7_page_beside_other_jobs_leaves_every_job_succeeded(make_settings, web):
    """A page served as UTF-7 whose body decodes to a lone surrogate, fetched beside three
    others with one attempt each: all four succeed, the UTF-7 one with its text as sent."""
    poison = Reply(200, b"+2AA-", "text/plain; charset=utf-7")
    urls = [web.url(f"/ok/{i}") for i in range(3)] + [web.script("/utf7", poison)]
    async with running_app(make_settings(max_attempts=1, **BATCHED)) as (_, client):
        body = {"jobs": [{"url": url} for url in urls]}
        created = (await client.post("/jobs/batch", json=body)).json()["items"]
        done = [await wait_for_status(client, job["id"], "succeeded", "dead") for job in created]
        text = await client.get(f"/jobs/{created[3]['id']}/text")
    assert ["succeeded"] * 4 == [job["status"] for job in done]
    assert (200, "+2AA-") == (text.status_code, text.text)
