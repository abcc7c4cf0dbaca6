"""Bytes kept per tenant and its quota (INGEST_TENANT_MAX_STORAGE_BYTES), on both backends:
the count follows every version stored and deleted (a record, the oldest version's delete,
a job's delete, retention); a version past the quota is not kept, with the reason said;
GET /stats and the dashboard show it; Markdown that is the text is stored once."""

import hashlib
import json
from dataclasses import replace
from datetime import timedelta

import sqlalchemy as sa

from app.model import (
    AttemptOutcome,
    DeadReason,
    Died,
    Fetched,
    Lease,
    NotKept,
    Previous,
    Succeeded,
)
from app.observability import events as observability
from app.rules import policy
from app.store import counts
from app.store.maintenance import MaintenanceStore
from app.store.reads import ContentStore
from app.store.tables import bytes_kept, contents
from tests.conftest import eventually, running_app, submit, wait_for_status
from tests.support.outcomes import record, succeeded
from tests.support.stores import NOW, RESULT, new, open_stores
from tests.support.webserver import Reply


def fetched(text: str, markdown: str | None, body: bytes) -> Fetched:
    sha = hashlib.sha256(text.encode()).hexdigest()
    return replace(RESULT, body=body, text=text, markdown=markdown, text_sha256=sha)


def size(result: Fetched) -> int:
    """A version's bytes as the docs define them, counted here apart from the code."""
    markdown = result.markdown or ""
    same = markdown == result.text
    return len(result.body) + len(result.text.encode()) + (0 if same else len(markdown.encode()))


# Not ASCII: a text's bytes are not its characters.
V1 = fetched("Grüße, Welt", "# Grüße, Welt", b"<p>Gr\xc3\xbc\xc3\x9fe, Welt</p>")
V2 = fetched("Grüße, neue Welt", "# Grüße, neue Welt", b"<p>v2</p>" * 10)
V3 = fetched("世界 drei", "世界 drei", b"plain text body")
OTHER = fetched("andere", None, b"\x00\x01\x02")


async def test_bytes_kept_follow_every_version_stored_and_deleted(database_url):
    """With two versions kept: each version stored adds its bytes to its tenant's count (the
    same as `policy.version_bytes` says), the oldest version's delete takes its bytes off,
    and so do a job's delete and retention; a fold keeps every count as it was, one row
    per tenant."""
    async with open_stores(database_url, content_versions=2) as (jobs, queue):
        job, other = await jobs.submit([new("/a"), new("/b", tenant="u")])
        seen = []

        async def kept() -> dict[str, int]:
            return await queue.bytes_kept(["t", "u"])

        now = NOW + timedelta(seconds=1)
        leases = {lease.id: lease for lease in await queue.claim("w", 2, now, 60)}
        await record(queue, succeeded(leases[job.id], V1), now)
        await record(queue, succeeded(leases[other.id], OTHER), now)
        seen.append(await kept())
        for version in (V2, V3):
            await jobs.refresh(job.id)
            now += timedelta(seconds=1)
            (lease,) = await queue.claim("w", 1, now, 60)
            assert lease.previous is not None
            await record(queue, succeeded(lease, version), now)
            seen.append(await kept())
        folded = await counts.fold(jobs.db, at=0)
        seen.append(await kept())
        own = await jobs.bytes_kept("u")  # what a tenant's key reads in GET /stats
        async with jobs.db.read() as conn:
            rows = (await conn.execute(sa.select(bytes_kept.c.tenant))).scalars().all()
        await jobs.delete(job.id)
        seen.append(await kept())
        assert 1 == await MaintenanceStore(queue.db).prune(now + timedelta(days=1))
        seen.append(await kept())

    v1, v2, v3, other_bytes = size(V1), size(V2), size(V3), size(OTHER)
    assert [v1, v2, v3, other_bytes] == [policy.version_bytes(v) for v in (V1, V2, V3, OTHER)]
    assert [
        {"t": v1, "u": other_bytes},
        {"t": v1 + v2, "u": other_bytes},
        {"t": v2 + v3, "u": other_bytes},  # version 1 deleted: two kept
        {"t": v2 + v3, "u": other_bytes},  # folded
        {"u": other_bytes},
        {},
    ] == seen
    assert folded > 2
    assert {"u": other_bytes} == own
    assert ["t", "u"] == sorted(rows)


async def test_markdown_that_is_the_text_is_stored_once_and_read_back_the_same(database_url):
    """A version whose Markdown is its text keeps the text once (the row's Markdown null,
    marked as the text), and reads back its Markdown as before; Markdown of its own, and
    none (a type with no text), are stored as they are."""
    async with open_stores(database_url) as (jobs, queue):
        same, own, none = await jobs.submit([new("/same"), new("/own"), new("/none")])
        now = NOW + timedelta(seconds=1)
        leases = {lease.id: lease for lease in await queue.claim("w", 3, now, 60)}
        for job, result in ((same, V3), (own, V1), (none, OTHER)):
            await record(queue, succeeded(leases[job.id], result), now)
        columns = (contents.c.job_id, contents.c.markdown, contents.c.markdown_as_text)
        async with jobs.db.read() as conn:
            rows = (await conn.execute(sa.select(*columns))).all()
        stored = {job_id: (markdown, as_text) for job_id, markdown, as_text in rows}
        read = ContentStore(jobs.db)
        markdowns = [(await read.get(j.id, part="markdown")).data for j in (same, own, none)]
        texts = [(await read.get(j.id, part="text")).data for j in (same, own, none)]
    assert (None, True) == stored[same.id]
    assert (V1.markdown, False) == stored[own.id]
    assert (None, False) == stored[none.id]
    assert [V3.text, V1.markdown, None] == markdowns
    assert [V3.text, V1.text, OTHER.text] == texts


def _lease(tenant: str, previous: Previous | None = None) -> Lease:
    return Lease(
        f"job-{tenant}-{previous is not None}",
        "http://a.test/",
        "a.test",
        tenant,
        1,
        3,
        0,
        "w",
        "lease",
        NOW,
        previous=previous,
    )


def test_a_version_past_its_tenants_quota_is_not_kept():
    """Against a quota of 100 with 80 kept: a first fetch of 15 bytes is kept (95 now); a
    refresh's change of 10 more is `not_kept`, succeeded with the last version's validators;
    a first fetch past it is dead (`storage_quota`); another tenant's versions are held to
    its own count. Each says why."""
    previous = Previous(1, '"e1"', "Mon, 01 Dec 2026 08:00:00 GMT", "b" * 64, "c" * 64)
    fits = fetched("a" * 5, None, b"b" * 10)
    change = fetched("c" * 5, None, b"d" * 5)
    other = fetched("e" * 50, None, b"")
    outcomes = [
        succeeded(_lease("t"), fits),
        succeeded(_lease("t", previous), change),
        succeeded(_lease("t2"), change),
        succeeded(_lease("u"), other),
    ]
    outcomes[1] = Succeeded(_lease("t", previous), 1, change, NOW, changed=True)
    settled = policy.within_storage_quota(outcomes, {"t": 80, "t2": 95}, 100)

    assert outcomes[0] == settled[0]
    assert outcomes[3] == settled[3]
    refused = settled[1]
    assert isinstance(refused, NotKept)
    assert AttemptOutcome.NOT_KEPT == refused.ended
    assert (200, '"e1"', previous.last_modified, NOW) == (
        refused.http_status,
        refused.etag,
        refused.last_modified,
        refused.refresh_at,
    )
    assert (
        "changed, not kept: tenant 't' keeps 95 bytes; this version's 10 more would pass its "
        "quota of 100 (INGEST_TENANT_MAX_STORAGE_BYTES)"
    ) == refused.message
    dead = settled[2]
    assert isinstance(dead, Died)
    assert (DeadReason.STORAGE_QUOTA, "StorageQuota") == (dead.reason, dead.failure.type)
    assert "tenant 't2' keeps 95 bytes" in dead.failure.message


def test_a_change_not_kept_says_so_in_its_log_line(caplog):
    """The log line of a refresh whose change was not kept: succeeded, why, and the version
    kept (event `job.not_kept`)."""
    previous = Previous(2, None, None, None, None)
    outcome = succeeded(_lease("t", previous), fetched("x", None, b"y"))
    (refused,) = policy.within_storage_quota([outcome], {"t": 7}, 8)
    with caplog.at_level("INFO", logger="ingest.worker"):
        observability.recorded(refused)
    (line,) = caplog.records
    assert (
        "job job-t-True attempt 1/3 succeeded: HTTP 200, changed, not kept: tenant 't' keeps "
        "7 bytes; this version's 2 more would pass its quota of 8 "
        "(INGEST_TENANT_MAX_STORAGE_BYTES), version 2 kept"
    ) == line.getMessage()
    assert ("job.not_kept", "not_kept") == (
        line.ingest_event["event"],
        line.ingest_event["outcome"],
    )


def _posted(web, path: str) -> list[dict]:
    return [json.loads(body) for _, body in web.posts[path]]


async def test_a_tenant_at_its_storage_quota_keeps_no_new_version(make_settings, web):
    """INGEST_TENANT_MAX_STORAGE_BYTES=500: a plain-text page of 100 bytes keeps 200 (its
    text once, as its Markdown too); its refresh that finds 300 bytes ends `not_kept`, the
    job succeeded with version 1 and its text as they were; a new job's first fetch of
    400 bytes is dead (`storage_quota`). GET /stats and the dashboard show the 200 bytes
    kept against the quota; the Markdown (API and callback) is the text."""
    first, changed, big = b"a" * 100, b"b" * 300, b"c" * 400
    plain = "text/plain; charset=utf-8"
    url = web.script("/p", Reply(200, first, plain), Reply(200, changed, plain))
    hook = web.url("/hook")
    settings = make_settings(tenant_max_storage_bytes=500)
    async with running_app(settings) as (_, client):
        job = await submit(client, url, callback_url=hook, callback_content="markdown")
        await wait_for_status(client, job["id"], "succeeded")
        await eventually(lambda: _has(web, "/hook", 1))
        await client.post(f"/jobs/{job['id']}/refresh")

        async def refreshed() -> bool:
            attempts = (await client.get(f"/jobs/{job['id']}/attempts")).json()["items"]
            return len(attempts) == 2 and attempts[-1]["outcome"] is not None

        await eventually(refreshed)
        again = await wait_for_status(client, job["id"], "succeeded")
        attempts = (await client.get(f"/jobs/{job['id']}/attempts")).json()["items"]
        versions = (await client.get(f"/jobs/{job['id']}/versions")).json()["items"]
        text = (await client.get(f"/jobs/{job['id']}/text")).text
        markdown = (await client.get(f"/jobs/{job['id']}/versions/1/markdown")).text
        too_big = await submit(client, web.script("/big", Reply(200, big, plain)))
        dead = await wait_for_status(client, too_big["id"], "dead")
        stats = (await client.get("/stats")).json()
        page = (await client.get("/dashboard")).text
    assert ["succeeded", "not_kept"] == [a["outcome"] for a in attempts]
    assert attempts[1]["message"] == (
        "changed, not kept: tenant 'default' keeps 200 bytes; this version's 600 more would "
        "pass its quota of 500 (INGEST_TENANT_MAX_STORAGE_BYTES)"
    )
    assert (1, [1]) == (again["version"], [v["version"] for v in versions])
    assert ("a" * 100, "a" * 100) == (text, markdown)
    assert "a" * 100 == _posted(web, "/hook")[0]["content"]["text"]
    assert ("storage_quota", "StorageQuota") == (dead["dead_reason"], dead["last_error"]["type"])
    assert "keeps 200 bytes; this version's 800 more" in dead["last_error"]["message"]
    assert [{"tenant": "default", "bytes_kept": 200}] == stats["storage"]
    assert 500 == stats["quotas"]["tenant_max_storage_bytes"]
    assert '<td class="num" data-bytes="200">200 B/500 B</td>' in page


async def _has(web, path: str, count: int) -> bool:
    return len(web.posts[path]) >= count
