"""The same URL twice (issue 43), on both backends: `unique` and `max_age` submits, single and
in batches, per-item idempotency keys, racing submits, `GET /jobs?url=` per tenant, and
the retries and refreshes that bring a job back beside one that holds its URL key."""

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from app.model import JobStatus
from app.rules.url_key import url_key
from app.store.jobs import JobStore
from app.store.maintenance import MaintenanceStore
from app.store.tables import jobs as job_rows
from tests.cli.test_cli import ingest, json_lines
from tests.conftest import running_app
from tests.support.outcomes import record, succeeded
from tests.support.stores import NOW, RESULT, new, open_stores, queue_on

URL = "http://example.test/page?id=1"
SAME = "HTTP://Example.TEST:80/page?utm_source=mail&id=1#top"
"""`URL` as another link may write it: one key."""
KEY_A, KEY_B, ADMIN = "a" * 20, "b" * 20, "c" * 20


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def app_client(make_settings):
    async with running_app(make_settings(worker_enabled=False)) as (app, client):
        yield app, client


async def succeed(app, job_id: str) -> None:
    """Run the job's attempt by hand and record a success now."""
    queue = queue_on(app.state.runtime.database, app.state.runtime.settings)
    now = datetime.now(UTC)
    leases = await queue.claim("t", 100, now, 60)
    (lease,) = [lease for lease in leases if lease.id == job_id]
    assert await record(queue, succeeded(lease, RESULT), now)


async def change(store: JobStore, job_id: str, **values: object) -> None:
    """Set a job's columns as time would have: its last success's end, its refresh due."""
    stmt = sa.update(job_rows).where(job_rows.c.id == job_id).values(**values)
    await store.db.transact(lambda conn: conn.execute(stmt))


async def test_a_unique_submit_of_the_same_url_is_answered_by_the_first_job(client):
    """201 and the job, then 200, its Location and the same job for the same URL however
    written; a submit without `unique` makes a job all the same. Each job shows its key."""
    first = await client.post("/jobs", json={"url": URL, "unique": True})
    again = await client.post("/jobs", json={"url": SAME, "unique": True})
    plain = await client.post("/jobs", json={"url": SAME})
    assert (201, 200, 201) == (first.status_code, again.status_code, plain.status_code)
    assert first.json()["id"] == again.json()["id"] != plain.json()["id"]
    assert f"/jobs/{first.json()['id']}" == again.headers["location"]
    assert URL == again.json()["url"]
    key = "http://example.test/page?id=1"
    assert [key, key] == [first.json()["url_key"], plain.json()["url_key"]]
    assert key == (await client.get(f"/jobs/{first.json()['id']}")).json()["url_key"]


async def test_max_age_lets_a_recent_success_answer(app_client):
    """A succeeded job answers a submit whose `max_age` it finished within (which implies
    `unique`); not one without `max_age`, nor one whose `max_age` it is older than."""
    app, client = app_client
    job = (await client.post("/jobs", json={"url": URL})).json()
    await succeed(app, job["id"])
    recent = await client.post("/jobs", json={"url": SAME, "max_age": 3600})
    await change(
        app.state.runtime.jobs, job["id"], finished_at=datetime.now(UTC) - timedelta(minutes=2)
    )
    too_old = await client.post("/jobs", json={"url": URL, "max_age": 60})
    assert (200, "succeeded") == (recent.status_code, recent.json()["status"])
    assert job["id"] == recent.json()["id"]
    assert 201 == too_old.status_code
    refused = await client.post("/jobs", json={"url": URL, "unique": False, "max_age": 5})
    negative = await client.post("/jobs", json={"url": URL, "max_age": -1})
    assert (422, 422) == (refused.status_code, negative.status_code)
    assert "max_age goes with unique" in refused.text


async def test_max_age_counts_from_the_last_success(stores):
    """On the store's clock: a success answers while within `max_age`, a pending job
    always; without `unique` nothing answers."""
    jobs, queue = stores
    [made] = await jobs.submit_each([new("/p", unique=True)])
    (lease,) = await queue.claim("w", 1, NOW, 60)
    assert await record(queue, succeeded(lease, RESULT), NOW)
    later = JobStore(jobs.db, lambda: NOW + timedelta(seconds=30))
    within = await later.submit_each([new("/p", unique=True, max_age=60)])
    beyond = await later.submit_each([new("/p", unique=True, max_age=10)])
    pending = await later.submit_each([new("/p", unique=True, max_age=10)])
    assert made.created and (made.job.id, False) == (within[0].job.id, within[0].created)
    assert beyond[0].created and beyond[0].job.id != made.job.id
    assert (beyond[0].job.id, False) == (pending[0].job.id, pending[0].created)


async def test_a_batch_answers_its_jobs_by_each_other_and_by_jobs_before(client):
    """Within a batch a unique job of a URL made by an earlier item is answered by it; the
    same batch again makes nothing (200, every item `created` false)."""
    batch = {
        "jobs": [
            {"url": URL, "unique": True},
            {"url": SAME, "unique": True},
            {"url": "http://example.test/other", "unique": True},
            {"url": URL},
            {"url": URL, "max_age": 60},
        ]
    }
    first = await client.post("/jobs/batch", json=batch)
    again = await client.post("/jobs/batch", json=batch | {"jobs": batch["jobs"][:3]})
    items = first.json()["items"]
    assert (201, 200) == (first.status_code, again.status_code)
    assert [True, False, True, True, False] == [item["created"] for item in items]
    ids = [item["id"] for item in items]
    assert ids[0] == ids[1] == ids[4] and len({ids[0], ids[2], ids[3]}) == 3
    assert ids[:3] == [item["id"] for item in again.json()["items"]]
    assert [False] * 3 == [item["created"] for item in again.json()["items"]]
    assert 3 == len((await client.get("/jobs")).json()["items"])


async def test_batch_items_take_idempotency_keys(client):
    """An item's key as the header's: the same key and body make one job, in one batch or
    across batches and single submits; the same key with another body is 409 and the
    batch makes nothing."""
    one = {"url": URL, "idempotency_key": "k1"}
    first = await client.post("/jobs/batch", json={"jobs": [one, one, {"url": URL}]})
    again = await client.post("/jobs/batch", json={"jobs": [one]})
    alone = await client.post("/jobs", json={"url": URL}, headers={"Idempotency-Key": "k1"})
    other = {"url": URL + "2", "idempotency_key": "k1"}
    conflict = await client.post("/jobs/batch", json={"jobs": [{"url": URL + "3"}, other]})
    within = await client.post(
        "/jobs/batch",
        json={"jobs": [{"url": URL, "idempotency_key": "k2"}, other | {"idempotency_key": "k2"}]},
    )
    ids = [item["id"] for item in first.json()["items"]]
    assert (201, 200, 200) == (first.status_code, again.status_code, alone.status_code)
    assert [True, False, True] == [item["created"] for item in first.json()["items"]]
    assert ids[0] == ids[1] == again.json()["items"][0]["id"] == alone.json()["id"] != ids[2]
    assert (409, 409) == (conflict.status_code, within.status_code)
    assert 2 == len((await client.get("/jobs")).json()["items"])
    empty = await client.post("/jobs/batch", json={"jobs": [{"url": URL, "idempotency_key": ""}]})
    assert 422 == empty.status_code


async def test_unique_submits_at_the_same_moment_make_one_job(client):
    """Many unique submits of one URL at once, single and in batches: one job; one answer
    201, the others 200 with it. The database settles the race, not the look before it."""
    singles = [client.post("/jobs", json={"url": URL, "unique": True}) for _ in range(12)]
    batch = {"jobs": [{"url": SAME, "unique": True}, {"url": URL + "&b=1", "unique": True}]}
    batches = [client.post("/jobs/batch", json=batch) for _ in range(4)]
    answers = await asyncio.gather(*singles, *batches)
    ids = {a.json()["id"] for a in answers[:12]} | {
        a.json()["items"][0]["id"] for a in answers[12:]
    }
    others = {a.json()["items"][1]["id"] for a in answers[12:]}
    made = [a.status_code for a in answers[:12]].count(201) + sum(
        item["created"] for a in answers[12:] for item in a.json()["items"]
    )
    assert (1, 1, 2) == (len(ids), len(others), made)
    assert 2 == len((await client.get("/jobs")).json()["items"])


async def test_racing_store_submits_make_one_job_each_url(stores):
    """The store alone, many unique submits of the same batch at once: one job a URL."""
    jobs, _ = stores
    batch = [new(f"/p{i}", unique=True) for i in range(10)]
    answers = await asyncio.gather(*(jobs.submit_each(batch) for _ in range(8)))
    assert 10 == len({answer.job.id for each in answers for answer in each})
    assert 10 == sum(answer.created for each in answers for answer in each)
    assert 10 == (await jobs.stats()).counts["pending"]


async def test_jobs_are_found_by_url_within_their_tenant(make_settings):
    """GET /jobs?url= lists a tenant's jobs of the URL's key, however the URL is written;
    never another tenant's (nor does a unique submit match one); the admin key sees every
    tenant's, or one's. A URL a submit refuses is 422."""
    keys = {KEY_A: "tenant-a", KEY_B: "tenant-b", ADMIN: "*"}
    async with running_app(make_settings(worker_enabled=False, api_keys=keys)) as (_, client):
        a = (await client.post("/jobs", json={"url": URL}, headers=auth(KEY_A))).json()
        b = await client.post("/jobs", json={"url": SAME, "unique": True}, headers=auth(KEY_B))
        await client.post("/jobs", json={"url": URL + "&x=1"}, headers=auth(KEY_A))

        async def listed(key: str, **params: str) -> list[str]:
            page = await client.get("/jobs", params={"url": SAME} | params, headers=auth(key))
            assert 200 == page.status_code, page.text
            return [job["id"] for job in page.json()["items"]]

        assert 201 == b.status_code
        assert [a["id"]] == await listed(KEY_A)
        assert [b.json()["id"]] == await listed(KEY_B, tenant="tenant-a")
        assert {a["id"], b.json()["id"]} == set(await listed(ADMIN))
        assert [a["id"]] == await listed(ADMIN, tenant="tenant-a")
        assert [] == await listed(KEY_A, status="dead")
        bad = await client.get("/jobs", params={"url": "ftp://x/"}, headers=auth(KEY_A))
        assert 422 == bad.status_code
        assert "scheme" in bad.text


async def test_a_job_brought_back_beside_the_holder_of_its_key_holds_none(stores):
    """A retry or refresh (an operator's, one or in bulk, or a schedule's) may bring a job
    back to pending while another holds its URL key: no unique index refuses it, no chore
    fails; it comes back holding nothing, the holder keeps the key and answers."""
    jobs, queue = stores
    [a] = await jobs.submit_each([new("/p", unique=True, refresh_every=60)])
    (lease,) = await queue.claim("w", 1, NOW, 60)
    assert await record(queue, succeeded(lease, RESULT), NOW)
    [b] = await jobs.submit_each([new("/p", unique=True)])
    assert b.created and b.job.unique_key is not None

    await change(jobs, a.job.id, refresh_at=NOW)
    staged = await MaintenanceStore(jobs.db).stage_refreshes(NOW + timedelta(minutes=2))
    back = await jobs.get(a.job.id)
    assert (1, JobStatus.PENDING, None) == (staged, back.status, back.unique_key)
    await jobs.cancel(a.job.id)
    assert JobStatus.PENDING == (await jobs.retry(a.job.id)).status
    await jobs.cancel(a.job.id)
    assert 1 == (await jobs.retry_all([JobStatus.CANCELLED])).requeued

    [c] = await jobs.submit_each([new("/q", unique=True)])
    (lease,) = [ls for ls in await queue.claim("w", 10, NOW, 60) if ls.id == c.job.id]
    assert await record(queue, succeeded(lease, RESULT), NOW)
    [d] = await jobs.submit_each([new("/q", unique=True)])
    assert JobStatus.PENDING == (await jobs.refresh(c.job.id)).status
    assert d.created
    [answer] = await jobs.submit_each([new("/q", unique=True)])
    assert (d.job.id, False) == (answer.job.id, answer.created)
    assert (await jobs.get(b.job.id)).unique_key is not None


async def test_two_keys_of_one_digest_each_get_a_job(database_url, monkeypatch):
    """Should two keys share a 64-bit digest, the second URL's unique submit still makes its
    job (holding nothing) rather than failing, and is not answered by the first's."""
    for module in ("app.store.jobs.submits", "app.store.jobs.rows", "app.store.jobs.queries"):
        monkeypatch.setattr(f"{module}.url_hash", lambda key: 42)
    async with open_stores(database_url) as (jobs, _):
        [one] = await jobs.submit_each([new("/one", unique=True)])
        [two] = await jobs.submit_each([new("/two", unique=True)])
        [again] = await jobs.submit_each([new("/two", unique=True)])
    assert one.created and two.created and one.job.id != two.job.id
    assert (42, None) == (one.job.unique_key, two.job.unique_key)
    assert (two.job.id, False) == (again.job.id, again.created)


async def test_keys_are_made_by_the_store_when_the_caller_has_none(stores):
    """A job submitted without its key (the CLI, a benchmark) gets one all the same."""
    jobs, _ = stores
    [job] = await jobs.submit([new("/A?utm_medium=x#f")])
    page = await jobs.list(url_key=url_key("http://A.test/A"), tenant="t")
    assert "http://a.test/A" == job.url_key == (await jobs.get(job.id)).url_key
    assert [job.id] == [found.id for found in page.items]


def test_the_cli_submits_unique_jobs(database_url, monkeypatch, tmp_path):
    """`ingest submit --unique`: a URL of a job pending prints that job's id; `--max-age`
    implies it; without either, a new job."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INGEST_DATABASE_URL", database_url)
    first = ingest("submit", URL, "http://example.test/b")
    again = ingest("submit", SAME, "http://example.test/c", "--unique")
    aged = ingest("submit", URL, "--max-age", "60", "--json")
    plain = ingest("submit", URL)
    assert [0] * 4 == [r.exit_code for r in (first, again, aged, plain)], again.output
    ids = first.stdout.split()
    assert ids[0] == again.stdout.split()[0] == json_lines(aged.stdout)[0]["id"]
    assert len({*ids, *again.stdout.split(), plain.stdout.strip()}) == 4
    assert 2 == ingest("submit", URL, "--max-age", "-1").exit_code
