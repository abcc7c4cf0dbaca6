"""A succeeded job's Markdown and page metadata: recorded with the success, served by the
API (`result.metadata`, `/markdown`), on both backends."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from app.model import Fetched, NewJob, PageMetadata
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.tables import jobs
from tests.conftest import running_app
from tests.support.outcomes import succeeded
from tests.support.stores import queue_on

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
ODD = "x\ud800y\x00"
"""A lone surrogate and a NUL: what no text column of both databases holds."""
SHOWN = "x\ufffdy\ufffd"

PAGE = PageMetadata(
    title="Title",
    description=f"About {ODD}",
    authors=("Ann", ODD),
    published="2026-01-01",
    modified="2026-01-02T10:00:00+00:00",
    language="pt-BR",
    canonical_url="https://a.test/page",
    site_name="A",
    image="https://a.test/i.png",
    keywords=("k1", "k2"),
    charset="utf-8",
    charset_source="header",
)


def fetched(content_type: str, text: str = "", markdown: str | None = None, **page) -> Fetched:
    return Fetched(
        200,
        "http://a.test/",
        content_type,
        4,
        "0" * 64,
        page.get("title"),
        body=b"body",
        text=text,
        text_length=len(text),
        markdown=markdown,
        metadata=PageMetadata(**page),
    )


@pytest.fixture
async def recorded(make_settings):
    """Jobs recorded as succeeded with these fetches, by the store the worker uses; their ids."""
    settings = make_settings(worker_enabled=False)
    database = Database(settings.database_url)
    clock = iter(NOW + timedelta(milliseconds=i) for i in range(10**6))
    store, queue = JobStore(database, lambda: next(clock)), queue_on(database, settings)

    async def record(*results: Fetched) -> list[str]:
        new = [NewJob(f"http://a.test/{i}", "a.test", "default", 3) for i in range(len(results))]
        submitted = {job.url: job.id for job in await store.submit(new)}
        leases = await queue.claim("w", len(results), NOW + timedelta(seconds=1), 60)
        by_url = {lease.url: lease for lease in leases}
        outcomes = [
            succeeded(by_url[job.url], result) for job, result in zip(new, results, strict=True)
        ]
        await queue.record(outcomes, NOW + timedelta(seconds=2))
        return [submitted[job.url] for job in new]

    yield settings, record
    await database.dispose()


async def test_markdown_and_metadata_are_recorded_with_the_success(recorded):
    """A batch of two successes keeps each one's Markdown and metadata, every string of them
    storable (U+FFFD for a lone surrogate or a NUL): the job's `result.metadata` holds every
    field, `/markdown` serves the Markdown as text/markdown with /text's sandbox headers."""
    settings, record = recorded
    html = replace(fetched("text/html", "Text", f"# Title\n\n{ODD}"), metadata=PAGE)
    plain = fetched("text/plain", "plain", "plain", charset="utf-8", charset_source="bom")
    page_id, plain_id = await record(html, plain)
    async with running_app(settings) as (_, client):
        job = (await client.get(f"/jobs/{page_id}")).json()
        markdown = await client.get(f"/jobs/{page_id}/markdown")
        text = await client.get(f"/jobs/{page_id}/text")
        other = (await client.get(f"/jobs/{plain_id}")).json()
    assert {
        "title": "Title",
        "description": f"About {SHOWN}",
        "authors": ["Ann", SHOWN],
        "published": "2026-01-01",
        "modified": "2026-01-02T10:00:00+00:00",
        "language": "pt-BR",
        "canonical_url": "https://a.test/page",
        "site_name": "A",
        "image": "https://a.test/i.png",
        "keywords": ["k1", "k2"],
        "page_count": None,
        "charset": "utf-8",
        "charset_source": "header",
    } == job["result"]["metadata"]
    assert (200, "text/markdown; charset=utf-8", "nosniff") == (
        markdown.status_code,
        markdown.headers["content-type"],
        markdown.headers["x-content-type-options"],
    )
    csp = markdown.headers["content-security-policy"]
    assert (True, text.headers["content-security-policy"]) == (csp.startswith("sandbox"), csp)
    assert f"# Title\n\n{SHOWN}" == markdown.text
    assert ("utf-8", "bom", []) == (
        other["result"]["metadata"]["charset"],
        other["result"]["metadata"]["charset_source"],
        other["result"]["metadata"]["authors"],
    )


async def test_a_type_with_no_text_has_no_text_nor_markdown(recorded):
    """An image's job serves its bytes; its /text and /markdown answer 404 problems saying
    the type has no text, not the bytes."""
    settings, record = recorded
    (job_id,) = await record(fetched("image/png; x=1", page_count=None))
    async with running_app(settings) as (_, client):
        content = await client.get(f"/jobs/{job_id}/content")
        answers = [await client.get(f"/jobs/{job_id}/{part}") for part in ("text", "markdown")]
    assert (200, b"body") == (content.status_code, content.content)
    expected = f"job {job_id} fetched image/png, which has no text"
    assert [(404, "application/problem+json", expected)] * 2 == [
        (a.status_code, a.headers["content-type"], a.json()["detail"]) for a in answers
    ]


async def test_a_job_fetched_before_markdown_was_kept(recorded):
    """A job whose content row has no Markdown (as migration 0008 leaves older jobs) serves
    its text; /markdown answers a 404 saying why."""
    settings, record = recorded
    (job_id,) = await record(fetched("text/html", "Old text", None))
    async with running_app(settings) as (_, client):
        text = await client.get(f"/jobs/{job_id}/text")
        markdown = await client.get(f"/jobs/{job_id}/markdown")
    assert (200, "Old text") == (text.status_code, text.text)
    assert (
        404,
        f"no Markdown stored for job {job_id} (fetched before Markdown was kept)",
    ) == (markdown.status_code, markdown.json()["detail"])


async def test_a_pending_job_has_no_markdown_yet(client):
    """A pending job has no result; /markdown says it exists once the job succeeded, and
    an unknown job's /markdown is a 404 like /text's."""
    job = (await client.post("/jobs", json={"url": "http://a.test/"})).json()
    markdown = await client.get(f"/jobs/{job['id']}/markdown")
    unknown = await client.get("/jobs/00000000-0000-0000-0000-000000000000/markdown")
    assert (None, "none") == (job["result"], job["callback_content"])
    assert (404, f"job {job['id']} is pending; content exists once it succeeded") == (
        markdown.status_code,
        markdown.json()["detail"],
    )
    assert 404 == unknown.status_code


async def test_the_metadata_of_an_old_row_is_null(recorded):
    """A succeeded job whose row has no metadata (as before migration 0008) says null; its
    dashboard page says none was kept."""
    settings, record = recorded
    (job_id,) = await record(fetched("text/html", "t"))
    database = Database(settings.database_url)
    forget = jobs.update().where(jobs.c.id == job_id).values(result_metadata=None)
    await database.transact(lambda conn: conn.execute(forget))
    await database.dispose()
    async with running_app(settings) as (_, client):
        job = (await client.get(f"/jobs/{job_id}")).json()
        shown = (await client.get(f"/dashboard/jobs/{job_id}")).text
    assert (200, None) == (job["result"]["http_status"], job["result"]["metadata"])
    assert "No metadata kept" in shown


async def test_the_dashboard_shows_the_page_escaped(recorded):
    """The job page's Page section shows each field as text, escaped (a title with markup,
    the image as its URL, no <img>), and links to the text and Markdown views, which serve
    what the API does; an image's page links to neither."""
    settings, record = recorded
    page = replace(PAGE, title="<script>alert(1)</script>", image='https://a.test/i.png"><img')
    html = replace(fetched("text/html", "Text", "# Markdown"), metadata=page)
    html_id, image_id = await record(html, fetched("image/png"))
    async with running_app(settings) as (_, client):
        shown = (await client.get(f"/dashboard/jobs/{html_id}")).text
        markdown = await client.get(f"/dashboard/jobs/{html_id}/markdown")
        image = (await client.get(f"/dashboard/jobs/{image_id}")).text
    section = shown[shown.index("<h2>Page</h2>") : shown.index("<h2>Attempts")]
    assert '<dd data-field="title">&lt;script&gt;alert(1)&lt;/script&gt;</dd>' in section
    assert "https://a.test/i.png&#34;&gt;&lt;img" in section
    assert [] == [tag for tag in ("<img", "<script") if tag in section]
    assert '<dd data-field="charset">utf-8 <span class="muted">(header)</span></dd>' in section
    assert f'href="/dashboard/jobs/{html_id}/markdown"' in section
    assert (200, "# Markdown") == (markdown.status_code, markdown.text)
    assert f"/dashboard/jobs/{image_id}/text" not in image
    assert "image/png has no text" in image
