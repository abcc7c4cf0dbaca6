"""Webhooks end to end: a receiver on 127.0.0.1 gets signed callbacks, on both backends."""

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from app.model import ErrorKind, Failure, NewJob
from app.observability.events import JsonFormatter
from app.settings import Settings
from app.store.database import Database
from app.store.deliveries import DeliveryStore
from app.store.jobs import JobStore
from app.worker.webhooks import cut
from tests.conftest import eventually, running_app, wait_for_status
from tests.observability.test_metrics import parse
from tests.support.outcomes import take_back_expired
from tests.support.receivers import Receiver
from tests.support.stores import queue_on
from tests.support.webserver import Reply, ScriptedServer

SECRET = "s3cret-for-tests"


async def submit(client, url: str, callback_url: str) -> dict:
    response = await client.post("/jobs", json={"url": url, "callback_url": callback_url})
    assert response.status_code == 201, response.text
    return response.json()


async def deliveries(client, job_id: str) -> list[dict]:
    response = await client.get(f"/jobs/{job_id}/deliveries")
    assert response.status_code == 200, response.text
    return response.json()["items"]


async def settled(client, job_id: str, status: str) -> dict:
    """The job's one delivery, once it has that status."""

    async def check() -> dict | None:
        items = await deliveries(client, job_id)
        return items[0] if items and items[0]["status"] == status else None

    return await eventually(check)


async def test_succeeded_job_posts_a_signed_callback(
    make_settings: Callable[..., Settings], web: ScriptedServer
):
    """A succeeded job's callback carries the job and a signature the receiver can verify."""
    url, hook = web.url("/page"), web.url("/hook")
    async with running_app(make_settings(webhook_secret=SECRET)) as (_, client):
        job = await submit(client, url, hook)
        await wait_for_status(client, job["id"], "succeeded")
        delivery = await settled(client, job["id"], "delivered")
        current = (await client.get(f"/jobs/{job['id']}")).json()
    [(headers, body)] = web.posts["/hook"]
    timestamp = headers["Ingest-Timestamp"]
    expected = hmac.new(SECRET.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    assert hmac.compare_digest("sha256=" + expected.hexdigest(), headers["Ingest-Signature"])
    assert abs(time.time() - int(timestamp)) < 60
    assert "application/json" == headers["Content-Type"]
    assert {"event": "job.succeeded", "job": current} == json.loads(body)
    assert ("job.succeeded", hook, 1, None) == (
        delivery["event"],
        delivery["url"],
        delivery["attempts"],
        delivery["last_error"],
    )


async def test_dead_job_posts_job_dead(make_settings, web):
    """A job that dies sends job.dead with its dead_reason; without a secret, unsigned."""
    url, hook = web.script("/gone", Reply(404)), web.url("/hook")
    async with running_app(make_settings()) as (_, client):
        job = await submit(client, url, hook)
        await wait_for_status(client, job["id"], "dead")
        await settled(client, job["id"], "delivered")
    [(headers, body)] = web.posts["/hook"]
    event = json.loads(body)
    assert ("job.dead", "dead", "fatal") == (
        event["event"],
        event["job"]["status"],
        event["job"]["dead_reason"],
    )
    assert "Ingest-Signature" not in headers
    assert "Ingest-Timestamp" in headers


async def test_failing_receiver_is_retried_with_backoff(make_settings, web, caplog):
    """A receiver that answers 500 twice then 200 gets exactly 3 POSTs; the job stays
    succeeded. Each POST is one JSON delivery event, and counted by outcome."""
    caplog.set_level(logging.INFO, logger="ingest.webhooks")
    hook = web.script("/hook", Reply(500), Reply(500), Reply(200))
    async with running_app(make_settings(webhook_secret=SECRET)) as (_, client):
        job = await submit(client, web.url("/page"), hook)
        delivery = await settled(client, job["id"], "delivered")
        assert "succeeded" == (await client.get(f"/jobs/{job['id']}")).json()["status"]
        samples = parse((await client.get("/metrics")).text)
    posted = [
        json.loads(JsonFormatter().format(r)) for r in caplog.records if r.name == "ingest.webhooks"
    ]
    assert [
        ("delivery.failed", job["id"], 1, "pending", 500),
        ("delivery.failed", job["id"], 2, "pending", 500),
        ("delivery.delivered", job["id"], 3, "delivered", None),
    ] == [(e["event"], e["job_id"], e["attempt"], e["status"], e["http_status"]) for e in posted]
    assert {delivery["id"]} == {e["delivery_id"] for e in posted}
    deliveries_total = "ingest_webhook_deliveries_total"
    assert (2, 1) == (
        samples[(deliveries_total, (("outcome", "retrying"),))],
        samples[(deliveries_total, (("outcome", "delivered"),))],
    )
    assert 3 == len(web.posts["/hook"])
    assert (3, "transient", 500) == (
        delivery["attempts"],
        delivery["last_error"]["kind"],
        delivery["last_error"]["http_status"],
    )
    first, *_, last = web.hits["/hook"]
    assert last - first >= 0.2 + 0.4 - 0.05  # the backoff of make_settings: 0.2 s, then 0.4 s


async def test_a_retry_after_of_odd_digits_is_retried_by_the_backoff(make_settings, web):
    """A receiver's 429 with `Retry-After: ²` (a digit to str.isdigit, not to float) is a
    failure like any: recorded, tried again after the backoff, then delivered."""
    hook = web.script("/hook", Reply(429, headers={"Retry-After": "²"}), Reply(200))
    async with running_app(make_settings()) as (_, client):
        job = await submit(client, web.url("/page"), hook)
        delivery = await settled(client, job["id"], "delivered")
    assert (2, "rate_limited", 429) == (
        delivery["attempts"],
        delivery["last_error"]["kind"],
        delivery["last_error"]["http_status"],
    )


async def test_rejected_callback_is_dead_and_job_unaffected(make_settings, web):
    """A 410 from the receiver ends the delivery dead after one POST; the job is untouched."""
    hook = web.script("/hook", Reply(410))
    async with running_app(make_settings()) as (_, client):
        job = await submit(client, web.url("/page"), hook)
        delivery = await settled(client, job["id"], "dead")
        after = (await client.get(f"/jobs/{job['id']}")).json()
    assert ("succeeded", 1) == (after["status"], after["attempts"])
    assert (1, "fatal", 410) == (
        delivery["attempts"],
        delivery["last_error"]["kind"],
        delivery["last_error"]["http_status"],
    )
    assert 1 == len(web.posts["/hook"])


async def test_deliveries_route(client, web):
    """No callback_url, no deliveries; an unknown job is 404."""
    job = (await client.post("/jobs", json={"url": web.url("/page")})).json()
    assert [] == await deliveries(client, job["id"])
    assert 404 == (await client.get("/jobs/nope/deliveries")).status_code


async def test_store_owes_claims_and_fences(database_url):
    """An expired last lease owes job.dead; a delivery is claimed once, and a stale
    sender's late write changes nothing."""
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    database = Database(database_url)
    try:
        jobs, queue = JobStore(database, lambda: now), queue_on(database, Settings(_env_file=None))
        store = DeliveryStore(database)
        fields: dict[str, Any] = {"domain": "a.test", "tenant": "t", "max_attempts": 1}
        hooked, plain = await jobs.submit(
            [
                NewJob("http://a.test/1", callback_url="http://r.test/hook", **fields),
                NewJob("http://a.test/2", **fields),
            ]
        )
        await queue.claim("w", 2, now, 1)
        later = now + timedelta(seconds=2)
        assert 2 == len(await take_back_expired(queue, later))
        assert [] == await store.for_job(plain.id)
        (first,) = await store.claim(5, later, 1)
        assert ("job.dead", 1) == (first.event, first.attempt)
        assert [] == await store.claim(5, later, 1)  # leased: not claimed twice
        (again,) = await store.claim(5, later + timedelta(seconds=2), 1)  # the lease lapsed
        failure = Failure(ErrorKind.TRANSIENT, "HTTPStatus", "HTTP 500", 500)
        assert False is await store.failed(first, failure, later, None)
        assert True is await store.delivered(again, later + timedelta(seconds=3))
        (delivery,) = await store.for_job(hooked.id)
        assert ("delivered", 2) == (delivery.status, delivery.attempts)
    finally:
        await database.dispose()


async def hostile_delivery(make_settings, web, receiver: Receiver, **overrides) -> dict:
    """A job whose callback goes to `receiver`; its one delivery once it is settled."""
    settings = make_settings(webhook_max_attempts=1, **overrides)
    async with running_app(settings) as (_, client):
        job = await submit(client, web.url("/page"), receiver.url)

        async def check() -> dict | None:
            items = await deliveries(client, job["id"])
            return items[0] if items and items[0]["status"] != "pending" else None

        return await eventually(check, timeout=30)


async def test_endless_answer_is_not_read(make_settings, web):
    """A receiver that answers 200 and then streams forever: delivered at once, with only
    what the socket buffers took sent, and the connection closed by the sender."""
    async with Receiver("endless") as receiver:
        delivery = await hostile_delivery(make_settings, web, receiver, webhook_timeout_seconds=5.0)
        await asyncio.wait_for(receiver.gone.wait(), 10)
    assert ("delivered", None) == (delivery["status"], delivery["last_error"])
    assert receiver.sent < 4 * 1024 * 1024, receiver.sent


async def test_gzip_bomb_answer_is_never_inflated(make_settings, web):
    """A 200 whose gzip body inflates to 10 MB and then fails its CRC: delivered, because
    the sender asked for no coding and never decoded (or read) the body."""
    async with Receiver("bomb") as receiver:
        delivery = await hostile_delivery(make_settings, web, receiver)
    assert ("delivered", None) == (delivery["status"], delivery["last_error"])
    [(_, headers)] = receiver.requests
    assert "identity" == headers["accept-encoding"]


async def test_silent_receiver_fails_transient_within_the_deadline(make_settings, web):
    """A receiver that never answers: the POST gives up at webhook_timeout_seconds, a
    transient FetchTimeout, and the connection is closed."""
    async with Receiver("silent") as receiver:
        delivery = await hostile_delivery(make_settings, web, receiver, webhook_timeout_seconds=1.0)
        await asyncio.wait_for(receiver.gone.wait(), 10)
    assert ("transient", "FetchTimeout") == (
        delivery["last_error"]["kind"],
        delivery["last_error"]["type"],
    )
    [(asked_at, _)] = receiver.requests
    assert receiver.gone_at - asked_at < 1.0 + 4.0


async def test_callback_carries_the_content_chosen_cut_to_the_limit(make_settings, web):
    """callback_content text and markdown: the callback's `content` holds the job's stored
    text or Markdown, cut to INGEST_WEBHOOK_CONTENT_MAX_BYTES on a character boundary
    (truncated true); a job without the field gets no `content` key, a dead one null."""
    page = web.script("/page", Reply(200, ("é" * 40).encode(), "text/plain; charset=utf-8"))
    gone = web.script("/gone", Reply(404))
    hooks = {name: web.url(f"/hook-{name}") for name in ("text", "markdown", "none", "dead")}
    async with running_app(make_settings(webhook_content_max_bytes=11)) as (_, client):
        text = await submit_with(client, page, hooks["text"], callback_content="text")
        markdown = await submit_with(client, page, hooks["markdown"], callback_content="markdown")
        plain = await submit_with(client, page, hooks["none"])
        dead = await submit_with(client, gone, hooks["dead"], callback_content="text")
        for job in (text, markdown, plain, dead):
            await settled(client, job["id"], "delivered")
        stored = {
            part: (await client.get(f"/jobs/{job['id']}/{part}")).text
            for part, job in (("text", text), ("markdown", markdown))
        }
    bodies = {name: json.loads(web.posts[f"/hook-{name}"][0][1]) for name in hooks}
    assert {
        "text": {"format": "text", "text": "ééééé", "truncated": True},
        "markdown": dict(
            zip(
                ("format", "text", "truncated"),
                ("markdown", *cut(stored["markdown"], 11)),
                strict=True,
            )
        ),
        "dead": None,
    } == {name: body["content"] for name, body in bodies.items() if "content" in body}
    assert ("é" * 40, "text", "none") == (
        stored["text"],
        bodies["text"]["job"]["callback_content"],
        bodies["none"]["job"]["callback_content"],
    )


async def submit_with(client, url: str, callback_url: str, **fields) -> dict:
    body = {"url": url, "callback_url": callback_url, **fields}
    response = await client.post("/jobs", json=body)
    assert response.status_code == 201, response.text
    return response.json()


async def test_callback_content_needs_a_callback_url(make_settings):
    """callback_content other than none without callback_url is refused with 422, alone
    and in a batch; an unknown format too; none alone is accepted."""
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        alone = await client.post(
            "/jobs", json={"url": "http://a.test/", "callback_content": "text"}
        )
        batch = await client.post(
            "/jobs/batch",
            json={"jobs": [{"url": "http://a.test/", "callback_content": "markdown"}]},
        )
        unknown = await client.post(
            "/jobs",
            json={
                "url": "http://a.test/",
                "callback_url": "http://a.test/h",
                "callback_content": "pdf",
            },
        )
        none = await client.post(
            "/jobs", json={"url": "http://a.test/", "callback_content": "none"}
        )
    assert (422, 422, 422, 201) == (
        alone.status_code,
        batch.status_code,
        unknown.status_code,
        none.status_code,
    )
    assert "callback_content goes with callback_url" in alone.text
