"""Tenants' quotas: a submit that would pass INGEST_TENANT_MAX_PENDING answers 429 with
Retry-After and stores nothing, on both backends; other tenants are not held back. A retry
or a refresh counts as a submit: one over the quota is refused, many are requeued up to it
and the answer says how many were left."""

from collections.abc import Callable
from datetime import datetime, timedelta

from app.clock import utc_now
from app.model import DeadReason, ErrorKind, Failure, JobStatus, Lease, MarkDead, Outcome
from app.store.jobs import JobStore
from app.store.queue import Queue
from app.store.quotas import Requeue
from tests.api.test_dashboard import banner
from tests.conftest import running_app, submit, wait_for_status
from tests.support.outcomes import failed, succeeded
from tests.support.stores import NOW, RESULT, new, queue_on

TENANT_KEYS = {"a" * 16: "shop", "b" * 16: "news"}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_a_tenant_at_its_pending_quota_is_refused(make_settings, web):
    settings = make_settings(worker_enabled=False, tenant_max_pending=3, api_keys=TENANT_KEYS)
    shop, news = bearer("a" * 16), bearer("b" * 16)
    async with running_app(settings) as (_, client):
        accepted = [
            (await client.post("/jobs", json={"url": web.url(f"/{i}")}, headers=shop)).status_code
            for i in range(3)
        ]
        refused = await client.post("/jobs", json={"url": web.url("/4")}, headers=shop)
        batch = await client.post(
            "/jobs/batch", json={"jobs": [{"url": web.url("/5")}]}, headers=shop
        )
        other = await client.post(
            "/jobs/batch",
            json={"jobs": [{"url": web.url(f"/n{i}")} for i in range(3)]},
            headers=news,
        )
        too_many = await client.post(
            "/jobs/batch",
            json={"jobs": [{"url": web.url(f"/m{i}")} for i in range(4)]},
            headers=news,
        )
        shops = (await client.get("/jobs", headers=shop)).json()["items"]
        newss = (await client.get("/jobs", headers=news)).json()["items"]
    assert [201, 201, 201] == accepted
    assert (429, 429, 201, 429) == tuple(r.status_code for r in (refused, batch, other, too_many))
    assert "30" == refused.headers["retry-after"]
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert (
        "tenant 'shop' has 3 pending jobs; 1 more would pass its limit of 3 "
        "(INGEST_TENANT_MAX_PENDING)"
    ) == refused.json()["detail"]
    assert (3, 3) == (len(shops), len(newss))


async def test_jobs_that_left_pending_free_the_quota(make_settings, web):
    """The quota counts pending jobs only: once the worker fetched them, the tenant submits
    again."""
    async with running_app(make_settings(tenant_max_pending=2)) as (_, client):
        for i in range(2):
            await wait_for_status(
                client, (await submit(client, web.url(f"/{i}")))["id"], "succeeded"
            )
        again = await client.post("/jobs", json={"url": web.url("/again")})
    assert 201 == again.status_code


async def test_a_key_over_its_rate_of_submits_is_refused(make_settings, web):
    """INGEST_KEY_SUBMITS_PER_SECOND: a key's bucket of 3 lets a single submit and a batch of
    5 through (the batch on the bucket's last tokens, into debt), then refuses its submits
    with 429 and a Retry-After of the debt's time, storing nothing; another key of the same
    tenant submits on."""
    keys = {"a" * 16: "shop", "c" * 16: "shop"}
    settings = make_settings(
        worker_enabled=False, key_submits_per_second=0.01, key_submit_burst=3, api_keys=keys
    )
    first, second = bearer("a" * 16), bearer("c" * 16)
    async with running_app(settings) as (_, client):
        single = await client.post("/jobs", json={"url": web.url("/1")}, headers=first)
        batch = await client.post(
            "/jobs/batch",
            json={"jobs": [{"url": web.url(f"/b{i}")} for i in range(5)]},
            headers=first,
        )
        refused = await client.post("/jobs", json={"url": web.url("/2")}, headers=first)
        other_key = await client.post("/jobs", json={"url": web.url("/3")}, headers=second)
        stored = (await client.get("/jobs", headers=first)).json()["items"]
    assert (201, 201, 429, 201) == tuple(r.status_code for r in (single, batch, refused, other_key))
    assert refused.headers["content-type"].startswith("application/problem+json")
    # 3 tokens - 1 - 5 = -3: 4 tokens to a whole one again, at 0.01 a second.
    assert 399 <= int(refused.headers["retry-after"]) <= 400
    assert "INGEST_KEY_SUBMITS_PER_SECOND" in refused.json()["detail"]
    assert 7 == len(stored)


async def test_stats_show_each_tenants_load_weight_and_the_quotas(make_settings, web):
    """GET /stats lists each tenant with jobs pending or running (the most pending first), its
    weight and the quotas; a tenant's key sees its own tenant only; the dashboard shows the
    same table, against the limits."""
    keys = {"a" * 16: "shop", "b" * 16: "news", "c" * 16: "*"}
    settings = make_settings(
        worker_enabled=False,
        api_keys=keys,
        tenant_weights="shop:3",
        tenant_max_pending=10,
        tenant_max_in_flight=4,
        key_submits_per_second=50,
    )
    shop, news, admin = bearer("a" * 16), bearer("b" * 16), bearer("c" * 16)
    async with running_app(settings) as (_, client):
        for i in range(3):
            await client.post("/jobs", json={"url": web.url(f"/s{i}")}, headers=shop)
        await client.post("/jobs", json={"url": web.url("/n")}, headers=news)
        everyone = (await client.get("/stats", headers=admin)).json()
        own = (await client.get("/stats", headers=news)).json()
        page = (await client.get("/dashboard", headers=admin)).text
    assert [
        {"tenant": "shop", "weight": 3, "pending": 3, "running": 0},
        {"tenant": "news", "weight": 1, "pending": 1, "running": 0},
    ] == everyone["tenants"]
    assert {
        "tenant_max_pending": 10,
        "tenant_max_in_flight": 4,
        "key_submits_per_second": 50.0,
        "key_submit_burst": 0,
        "tenant_max_storage_bytes": 0,
    } == everyone["quotas"]
    assert [{"tenant": "news", "weight": 1, "pending": 1, "running": 0}] == own["tenants"]
    assert 'data-tenant="shop"' in page
    assert '<td class="num">3/10</td>' in page
    assert '<td class="num">0/4</td>' in page


async def test_a_tenant_filter_no_row_can_hold_shows_no_tenants(make_settings):
    """A NUL in the dashboard's tenant filter matches no tenant: the Tenants table is empty,
    not a server error (PostgreSQL refuses such a string rather than match nothing)."""
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        page = await client.get("/dashboard", params={"tenant": "a\x00b"})
    assert 200 == page.status_code
    assert 'id="tenants"' not in page.text


FATAL = Failure(ErrorKind.FATAL, "HTTPStatus", "HTTP 404", 404)


def dead(lease: Lease) -> Outcome:
    return failed(lease, MarkDead(DeadReason.FATAL, FATAL))


def done(lease: Lease) -> Outcome:
    return succeeded(lease, RESULT)


async def finished(
    jobs: JobStore,
    queue: Queue,
    tenant: str,
    count: int,
    outcome: Callable[[Lease], Outcome],
    at: Callable[[], datetime] = lambda: NOW,
    newest_first: bool = False,
) -> list[str]:
    """`count` jobs of `tenant` submitted one after the other, claimed and ended with
    `outcome` a second apart, the first at `at()` (the newest first, with `newest_first`),
    through `jobs` (a store without a quota); their ids, oldest first. No other job may be
    pending."""
    ids = [(await jobs.submit([new(f"/{tenant}/{i}", tenant=tenant)]))[0].id for i in range(count)]
    start = at()
    leases = {lease.id: lease for lease in await queue.claim("w", count, start, 60)}
    assert set(ids) == set(leases)
    for i, job_id in enumerate(reversed(ids) if newest_first else ids):
        await queue.record([outcome(leases[job_id])], start + timedelta(seconds=i))
    return ids


async def test_a_refresh_or_retry_over_the_quota_is_refused(make_settings):
    """At its quota, a tenant's refresh and retry answer 429 with Retry-After, the problem
    naming the setting, and the job is left as it was; the dashboard's buttons say so. Once
    a pending job is cancelled, the retry goes through."""
    settings = make_settings(worker_enabled=False, tenant_max_pending=2)
    async with running_app(settings) as (app, client):
        runtime = app.state.runtime
        free, queue = JobStore(runtime.database, utc_now), queue_on(runtime.database, settings)
        (gone,) = await finished(free, queue, "default", 1, dead, utc_now)
        (fetched,) = await finished(free, queue, "default", 1, done, utc_now)
        pending = [await submit(client, f"http://p{i}.test/") for i in range(2)]
        refreshed = await client.post(f"/jobs/{fetched}/refresh")
        retried = await client.post(f"/jobs/{gone}/retry")
        dead_refreshed = await client.post(f"/jobs/{gone}/refresh")
        pressed = [
            await banner(client, await client.post(f"/dashboard/jobs/{job_id}/{action}"))
            for job_id, action in ((gone, "retry"), (fetched, "refresh"))
        ]
        left = [(await client.get(f"/jobs/{i}")).json()["status"] for i in (gone, fetched)]
        await client.post(f"/jobs/{pending[0]['id']}/cancel")
        again = await client.post(f"/jobs/{gone}/retry")
    assert [429, 429, 429] == [r.status_code for r in (refreshed, retried, dead_refreshed)]
    assert "30" == retried.headers["retry-after"]
    assert retried.headers["content-type"].startswith("application/problem+json")
    assert (
        "tenant 'default' has 2 pending jobs; 1 more would pass its limit of 2 "
        "(INGEST_TENANT_MAX_PENDING)"
    ) == retried.json()["detail"]
    assert [
        f"Job {job_id} is left as it was: its tenant has as many pending jobs as "
        "INGEST_TENANT_MAX_PENDING allows."
        for job_id in (gone, fetched)
    ] == pressed
    assert ["dead", "succeeded"] == left
    assert (200, "pending") == (again.status_code, again.json()["status"])


async def test_bulk_retry_and_refresh_requeue_up_to_the_quota(make_settings):
    """POST /jobs/retry and POST /jobs/refresh requeue as many jobs as the tenant's quota
    leaves room for and say how many were left; so does the dashboard's "Retry all dead"."""
    settings = make_settings(worker_enabled=False, tenant_max_pending=3)
    async with running_app(settings) as (app, client):
        runtime = app.state.runtime
        free, queue = JobStore(runtime.database, utc_now), queue_on(runtime.database, settings)
        await finished(free, queue, "default", 4, dead, utc_now)
        await finished(free, queue, "default", 2, done, utc_now)
        await submit(client, "http://p.test/")
        retried = await client.post("/jobs/retry")
        refreshed = await client.post("/jobs/refresh")
        shown = await banner(client, await client.post("/dashboard/retry"))
        counts = (await client.get("/stats")).json()["counts"]
    assert {"requeued": 2, "left_over_quota": 2} == retried.json()
    assert {"refreshed": 0, "left_over_quota": 2} == refreshed.json()
    assert (
        "Requeued 0 dead job(s); 2 left dead: their tenants have as many pending jobs as "
        "INGEST_TENANT_MAX_PENDING allows."
    ) == shown
    assert (3, 2, 2) == (counts["pending"], counts["dead"], counts["succeeded"])


async def test_a_bulk_requeue_fills_each_tenants_quota_oldest_first(stores):
    """Held to 3 pending jobs a tenant: of tenant t (1 pending), the 2 oldest dead jobs are
    retried, the rest left; tenant u, under its quota, has both retried. Then, t's retried
    jobs cancelled, t's 2 jobs fetched longest ago are refreshed, and 1 of u's 2, which
    fills its quota."""
    jobs, queue = stores
    held = JobStore(jobs.db, jobs.clock, max_pending=3)
    dead_t = await finished(jobs, queue, "t", 4, dead)
    dead_u = await finished(jobs, queue, "u", 2, dead)
    fetched_t = await finished(jobs, queue, "t", 3, done, newest_first=True)
    fetched_u = await finished(jobs, queue, "u", 2, done)
    await jobs.submit([new("/t/pending", tenant="t")])
    retried = await held.retry_all([JobStatus.DEAD])
    after_retry = [(await jobs.get(job_id)).status for job_id in dead_t + dead_u]
    for job_id in dead_t[:2]:
        await jobs.cancel(job_id)
    refreshed = await held.refresh_all()
    after_refresh = [(await jobs.get(job_id)).status for job_id in fetched_t + fetched_u]
    assert Requeue(4, 2) == retried
    assert ["pending"] * 2 + ["dead"] * 2 + ["pending"] * 2 == after_retry
    assert Requeue(3, 2) == refreshed
    assert ["succeeded"] + ["pending"] * 2 + ["pending", "succeeded"] == after_refresh
