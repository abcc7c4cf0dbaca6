"""Refreshes end to end, on both backends, against a local server that answers 200, 304,
404/410, 503 and changing bodies: conditional GETs, versions, `job.changed` and `job.gone`,
schedules, and content kept whatever a refresh ends in."""

import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytest

from app.fetch.pool import ExtractionPool
from app.store.maintenance import MaintenanceStore
from tests.conftest import eventually, running_app, submit, wait_for_status
from tests.support.stores import queue_on
from tests.support.webserver import Reply

ETAG = '"v1"'
LAST_MODIFIED = "Tue, 01 Dec 2026 08:00:00 GMT"


def page(text: str, aside: str = "") -> bytes:
    """A page whose main text is `text`; `aside` is a comment (no text of the page)."""
    return (
        f"<html><head><title>T</title></head><body><!-- {aside} -->"
        f"<article><p>{text}</p></article></body></html>"
    ).encode()


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def refreshed(client, job_id: str, *statuses: str) -> dict:
    """POST /jobs/{id}/refresh, then the job once it reached one of `statuses`. (The
    answer may say pending, running or already done: the worker runs in this process.)"""
    response = await client.post(f"/jobs/{job_id}/refresh")
    assert 200 == response.status_code, response.text
    return await wait_for_status(client, job_id, *statuses)


@pytest.fixture
def extractions(monkeypatch) -> list[str]:
    """The URL of every body extracted, in order."""
    seen: list[str] = []
    extract = ExtractionPool.extract

    async def counted(self, body, content_type, url, tenant):
        seen.append(url)
        return await extract(self, body, content_type, url, tenant)

    monkeypatch.setattr(ExtractionPool, "extract", counted)
    return seen


async def test_a_refresh_is_a_conditional_get_and_a_304_keeps_the_content(
    make_settings, web, extractions
):
    """The refresh sends the ETag and Last-Modified its success stored; the 304 ends an
    attempt `not_modified` with no body read and nothing extracted, and the job succeeded
    again with version 1, its text and `changed_at` as they were."""
    validators = {"ETag": ETAG, "Last-Modified": LAST_MODIFIED}
    url = web.script(
        "/p", Reply(200, page("first text"), headers=validators), Reply(304, b"", headers={})
    )
    async with running_app(make_settings()) as (_, client):
        first = await wait_for_status(client, (await submit(client, url))["id"], "succeeded")
        again = await refreshed(client, first["id"], "succeeded")
        attempts = (await client.get(f"/jobs/{first['id']}/attempts")).json()["items"]
        text = (await client.get(f"/jobs/{first['id']}/text")).text
    sent = web.headers["/p"][1]
    assert (ETAG, LAST_MODIFIED) == (sent.get("If-None-Match"), sent.get("If-Modified-Since"))
    assert "If-None-Match" not in web.headers["/p"][0]
    assert ["succeeded", "not_modified"] == [a["outcome"] for a in attempts]
    assert [200, 304] == [a["http_status"] for a in attempts]
    assert (1, 1, first["changed_at"]) == (first["version"], again["version"], again["changed_at"])
    assert (ETAG, LAST_MODIFIED) == (again["result"]["etag"], again["result"]["last_modified"])
    assert "first text" == text
    assert [url] == extractions


async def test_a_hundred_unchanged_refreshes_transfer_no_body_and_extract_nothing(
    make_settings, web, extractions
):
    """A page with an ETag refreshed 100 times unchanged: one body served, one extraction."""
    body = page("the same text")
    url = web.script("/p", Reply(200, body, headers={"ETag": ETAG}), Reply(304, b""))
    async with running_app(make_settings()) as (_, client):
        job = await wait_for_status(client, (await submit(client, url))["id"], "succeeded")
        for _ in range(100):
            done = await refreshed(client, job["id"], "succeeded")
        versions = (await client.get(f"/jobs/{job['id']}/versions")).json()["items"]
    assert (101, len(body), 1) == (web.count("/p"), web.body_bytes["/p"], len(extractions))
    assert (1, ETAG) == (done["version"], done["result"]["etag"])
    assert [1] == [v["version"] for v in versions]


async def test_a_changed_text_stores_a_new_version_and_calls_back_job_changed(make_settings, web):
    """A 200 whose text changed: version 2 with its own text, Markdown and hash, version 1
    still readable, a diff from 1 to 2, `changed_at` moved, and a `job.changed` callback
    naming both hashes (after the first success's `job.succeeded`)."""
    url = web.script("/p", Reply(200, page("old words")), Reply(200, page("new words")))
    hook = web.url("/hook")
    async with running_app(make_settings()) as (_, client):
        job = await submit(client, url, callback_url=hook)
        first = await wait_for_status(client, job["id"], "succeeded")
        await eventually(lambda: _posted(web, 1))  # so the two callbacks come in order
        second = await refreshed(client, job["id"], "succeeded")
        versions = (await client.get(f"/jobs/{job['id']}/versions")).json()["items"]
        old = await client.get(f"/jobs/{job['id']}/versions/1/text")
        new_markdown = await client.get(f"/jobs/{job['id']}/versions/2/markdown")
        latest = (await client.get(f"/jobs/{job['id']}/text")).text
        diff = await client.get(f"/jobs/{job['id']}/versions/2/text?diff=1")
        attempts = (await client.get(f"/jobs/{job['id']}/attempts")).json()["items"]

        await eventually(lambda: _posted(web, 2))
    assert (1, 2) == (first["version"], second["version"])
    assert second["changed_at"] > first["changed_at"]
    assert sha("new words") == second["result"]["text_sha256"]
    assert [(2, sha("new words")), (1, sha("old words"))] == [
        (v["version"], v["text_sha256"]) for v in versions
    ]
    assert ("old words", "new words") == (old.text, latest)
    assert "new words" in new_markdown.text
    assert new_markdown.headers["content-type"].startswith("text/markdown")
    assert diff.headers["content-type"].startswith("text/x-diff")
    assert "-old words" in diff.text and "+new words" in diff.text
    assert ["succeeded", "succeeded"] == [a["outcome"] for a in attempts]
    events = [json.loads(body) for _, body in web.posts["/hook"]]
    assert ["job.succeeded", "job.changed"] == [e["event"] for e in events]
    assert {
        "from": {"version": 1, "text_sha256": sha("old words")},
        "to": {"version": 2, "text_sha256": sha("new words")},
    } == events[1]["change"]


async def test_a_page_whose_text_did_not_change_is_unchanged(make_settings, web, extractions):
    """A 200 with another body but the same main text (a comment moved) is `unchanged`: no
    new version, no callback; the same body again is not even extracted. The history numbers
    the attempts of the two refreshes on from the first: 1, 2, 3."""
    first_body = page("steady text", aside="12:00")
    url = web.script(
        "/p",
        Reply(200, first_body),
        Reply(200, page("steady text", aside="12:05")),
        Reply(200, page("steady text", aside="12:05")),
    )
    hook = web.url("/hook")
    async with running_app(make_settings()) as (_, client):
        job = await submit(client, url, callback_url=hook)
        await wait_for_status(client, job["id"], "succeeded")
        await refreshed(client, job["id"], "succeeded")
        done = await refreshed(client, job["id"], "succeeded")
        attempts = (await client.get(f"/jobs/{job['id']}/attempts")).json()["items"]
        content = (await client.get(f"/jobs/{job['id']}/content")).content
        owed = (await client.get(f"/jobs/{job['id']}/deliveries")).json()["items"]
    assert ["job.succeeded"] == [delivery["event"] for delivery in owed]
    assert ["succeeded", "unchanged", "unchanged"] == [a["outcome"] for a in attempts]
    assert [1, 2, 3] == [a["number"] for a in attempts]
    assert 1 == done["version"]
    assert first_body == content  # the version kept is the first body
    assert 2 == len(extractions)  # the third body was the second's: not extracted
    second_body = page("steady text", aside="12:05")
    assert hashlib.sha256(second_body).hexdigest() == done["result"]["sha256"]


@pytest.mark.parametrize("status", [404, 410])
async def test_a_refresh_that_finds_the_page_gone_keeps_its_content(make_settings, web, status):
    """A refresh answered 404 or 410: dead `gone` at once (no retry), its last content still
    served, and a `job.gone` callback."""
    url = web.script("/p", Reply(200, page("was here")), Reply(status))
    hook = web.url("/hook")
    async with running_app(make_settings()) as (_, client):
        job = await submit(client, url, callback_url=hook)
        await wait_for_status(client, job["id"], "succeeded")
        await eventually(lambda: _posted(web, 1))
        dead = await refreshed(client, job["id"], "dead")
        text = await client.get(f"/jobs/{job['id']}/text")
        await eventually(lambda: _posted(web, 2))
    assert ("gone", 1, 1) == (dead["dead_reason"], dead["attempts"], dead["version"])
    assert (200, "was here") == (text.status_code, text.text)
    events = [json.loads(body)["event"] for _, body in web.posts["/hook"]]
    assert ["job.succeeded", "job.gone"] == events


async def _posted(web, count: int) -> bool:
    return len(web.posts["/hook"]) >= count


async def test_a_first_fetch_answered_404_is_fatal_not_gone(make_settings, web):
    """Only a page fetched before can go: a first 404 is an ordinary fatal death."""
    url = web.script("/p", Reply(404))
    async with running_app(make_settings()) as (_, client):
        dead = await wait_for_status(client, (await submit(client, url))["id"], "dead")
    assert ("fatal", None) == (dead["dead_reason"], dead["version"])


async def test_a_refresh_failing_transiently_loses_no_content(make_settings, web):
    """A refresh answered 503 is retried like any fetch; while it waits and once its budget
    is spent, the last good text is served and the version stays."""
    url = web.script("/p", Reply(200, page("good text")), Reply(503))
    async with running_app(make_settings(backoff_base_seconds=0.05)) as (_, client):
        job = await submit(client, url, max_attempts=2)
        await wait_for_status(client, job["id"], "succeeded")
        dead = await refreshed(client, job["id"], "dead")
        text = (await client.get(f"/jobs/{job['id']}/text")).text
    assert ("retries_exhausted", 2, 1) == (dead["dead_reason"], dead["attempts"], dead["version"])
    assert "good text" == text
    assert 3 == web.count("/p")


async def test_a_job_refreshes_itself_on_its_schedule(make_settings, web):
    """With `refresh_every`, each success sets `next_refresh_at`; once it passes, a worker
    puts the job back to pending and fetches it again, conditionally."""
    url = web.script("/p", Reply(200, page("scheduled"), headers={"ETag": ETAG}), Reply(304, b""))
    settings = make_settings(refresh_min_seconds=1)
    async with running_app(settings) as (_, client):
        job = await submit(client, url, refresh_every=1)
        first = await wait_for_status(client, job["id"], "succeeded")

        async def refetched_twice() -> bool:
            return web.count("/p") >= 3

        await eventually(refetched_twice, timeout=20)
        later = await wait_for_status(client, job["id"], "succeeded")
    # A second after the success was settled, which its record follows closely.
    after = datetime.fromisoformat(first["next_refresh_at"]) - datetime.fromisoformat(
        first["finished_at"]
    )
    assert 1 == first["refresh_every"]
    assert timedelta(seconds=0.5) < after <= timedelta(seconds=1)
    assert later["next_refresh_at"] > first["next_refresh_at"]
    assert ETAG == web.headers["/p"][2].get("If-None-Match")
    assert 1 == later["version"]


async def test_refresh_every_below_the_minimum_is_refused(client, web):
    """422 naming the setting; nothing stored."""
    response = await client.post("/jobs", json={"url": web.url("/p"), "refresh_every": 59})
    assert 422 == response.status_code
    assert "INGEST_REFRESH_MIN_SECONDS" in response.text
    assert [] == (await client.get("/jobs")).json()["items"]


async def test_only_a_finished_job_can_be_refreshed(client, web):
    """A pending job answers 409 (it will fetch anyway); no job, 404."""
    job = await submit(client, web.url("/p"))
    pending = await client.post(f"/jobs/{job['id']}/refresh")
    missing = await client.post("/jobs/00000000-0000-0000-0000-000000000000/refresh")
    assert (409, 404) == (pending.status_code, missing.status_code)


async def test_refresh_in_bulk_by_domain_and_age(make_settings, web):
    """POST /jobs/refresh moves the succeeded jobs of the filter back to pending: by domain,
    and by when their last fetch ended."""
    async with running_app(make_settings()) as (_, client):
        ids = [(await submit(client, web.url(f"/p{i}")))["id"] for i in range(3)]
        for job_id in ids:
            await wait_for_status(client, job_id, "succeeded")
        other = await client.post("/jobs/refresh?domain=example.org")
        before = datetime(2000, 1, 1, tzinfo=UTC).isoformat()
        old = await client.post("/jobs/refresh", params={"finished_before": before})
        domain = (await client.get(f"/jobs/{ids[0]}")).json()["domain"]
        every = await client.post("/jobs/refresh", params={"domain": domain})
        for job_id in ids:
            await wait_for_status(client, job_id, "succeeded")
    assert (0, 0, 3) == tuple(r.json()["refreshed"] for r in (other, old, every))
    assert [2, 2, 2] == [web.count(f"/p{i}") for i in range(3)]


async def test_changed_since_lists_the_jobs_whose_content_changed(make_settings, web):
    """`GET /jobs?changed_since=T`: jobs that stored a version at or after T."""
    changing = web.script("/a", Reply(200, page("one")), Reply(200, page("two")))
    steady = web.script("/b", Reply(200, page("same")))
    async with running_app(make_settings()) as (_, client):
        a, b = (await submit(client, changing))["id"], (await submit(client, steady))["id"]
        for job_id in (a, b):
            await wait_for_status(client, job_id, "succeeded")
        since = datetime.now(UTC).isoformat()
        for job_id in (a, b):
            await refreshed(client, job_id, "succeeded")
        listed = (await client.get("/jobs", params={"changed_since": since})).json()["items"]
        everything = await client.get("/jobs", params={"changed_since": "2000-01-01T00:00:00Z"})
    assert [a] == [job["id"] for job in listed]
    assert {a, b} == {job["id"] for job in everything.json()["items"]}


async def test_only_the_last_versions_are_kept(make_settings, web):
    """With INGEST_CONTENT_VERSIONS=2, three changes keep versions 3 and 2; version 1 is
    404 with a reason."""
    url = web.script(
        "/p", Reply(200, page("v one")), Reply(200, page("v two")), Reply(200, page("v three"))
    )
    async with running_app(make_settings(content_versions=2)) as (_, client):
        job = await submit(client, url)
        await wait_for_status(client, job["id"], "succeeded")
        for _ in range(2):
            await refreshed(client, job["id"], "succeeded")
        versions = (await client.get(f"/jobs/{job['id']}/versions")).json()["items"]
        gone = await client.get(f"/jobs/{job['id']}/versions/1/text")
        diff = await client.get(f"/jobs/{job['id']}/versions/3/text?diff=1")
    assert [3, 2] == [v["version"] for v in versions]
    assert (404, 404) == (gone.status_code, diff.status_code)
    assert "keeps no content version 1" in gone.json()["detail"]


async def test_retention_keeps_jobs_that_refresh_on_a_schedule(make_settings, web):
    """Retention deletes an old succeeded job, not one with `refresh_every`."""
    settings = make_settings(refresh_min_seconds=1)
    async with running_app(settings) as (app, client):
        once = await submit(client, web.url("/once"))
        kept = await submit(client, web.url("/kept"), refresh_every=3600)
        for job in (once, kept):
            await wait_for_status(client, job["id"], "succeeded")
        queue = queue_on(app.state.runtime.database, app.state.runtime.settings)
        deleted = await MaintenanceStore(queue.db).prune(datetime.now(UTC) + timedelta(days=1))
        answers = [(await client.get(f"/jobs/{j['id']}")).status_code for j in (once, kept)]
    assert (1, [404, 200]) == (deleted, answers)
