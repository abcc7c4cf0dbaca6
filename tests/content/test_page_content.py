"""What a user gets for realistic pages, end to end on both backends: pages served by a local
server, fetched by the worker, extracted in the extraction processes, read through the API."""

from pathlib import Path
from typing import Any

from tests.conftest import running_app, wait_for_status
from tests.support import pdfs
from tests.support.webserver import Reply

DATA = Path(__file__).resolve().parents[1] / "data"


async def fetched(make_settings, web, *replies: tuple[str, Reply]) -> list[dict[str, Any]]:
    """Each reply's job as the API shows it once finished, with its /text and /markdown."""
    settings = make_settings(extract_processes=1, extract_timeout_seconds=30)
    async with running_app(settings) as (_, client):
        ids = []
        for path, reply in replies:
            url = web.script(path, reply)
            ids.append((await client.post("/jobs", json={"url": url})).json()["id"])
        results = []
        for job_id in ids:
            job = await wait_for_status(client, job_id, "succeeded", "dead", timeout=60)
            text = await client.get(f"/jobs/{job_id}/text")
            markdown = await client.get(f"/jobs/{job_id}/markdown")
            results.append(job | {"text": text, "markdown": markdown})
        return results


def page(name: str) -> Reply:
    return Reply(200, (DATA / name).read_bytes(), "text/html")


async def test_an_article_is_its_story_and_its_metadata(make_settings, web):
    """A news article with comments, share links, an advert, tags and a sidebar: the text is
    the story alone, the Markdown has its headings and list, and the metadata is the page's."""
    [job] = await fetched(make_settings, web, ("/news/tidal-mill", page("article.html")))
    text = job["text"].text
    assert (200, "text/plain; charset=utf-8") == (
        job["text"].status_code,
        job["text"].headers["content-type"],
    )
    assert [] == [
        left
        for left in ("seagull_watcher", "Share on Facebook", "Advertisement", "Most read", "Tags:")
        if left in text
    ]
    assert text.startswith("Harbour town votes to keep its tidal mill\nResidents of Brackwater")
    markdown = job["markdown"].text
    assert (200, "text/markdown; charset=utf-8") == (
        job["markdown"].status_code,
        job["markdown"].headers["content-type"],
    )
    assert "## What happens next" in markdown
    assert "- 2027: repairs to the sluice gates and the mill pond" in markdown
    metadata = job["result"]["metadata"]
    assert {
        "title": "Harbour town votes to keep its tidal mill",
        "description": "After a two-year campaign, residents chose to restore the "
        "18th-century mill rather than sell the site.",
        "authors": ["Mara Lindqvist", "Tom Okafor"],
        "published": "2026-03-14T09:30:00+00:00",
        "modified": "2026-03-15T16:05:00+00:00",
        "language": "en-GB",
        "canonical_url": "https://courier.example/news/2026/03/tidal-mill",
        "site_name": "The Coastal Courier",
        "image": web.url("/images/mill.jpg"),
        "keywords": ["heritage", "mills", "local politics"],
        "page_count": None,
        "charset": "utf-8",
        "charset_source": "meta",
    } == metadata


async def test_a_docs_page_keeps_its_code_and_its_table(make_settings, web):
    """A documentation page: the code block keeps its lines and indentation in a fence with
    its language, the table is a GFM table, the sidebar is gone."""
    [job] = await fetched(make_settings, web, ("/docs/config.html", page("docs.html")))
    markdown = job["markdown"].text
    code = (
        "```python\n"
        "from tidelog.config import load_config\n\n"
        "def effective_settings(paths):\n"
        "    merged = {}\n"
        "    for path in paths:\n"
        "        if path.exists():\n"
        "            merged.update(load_config(path))\n"
        "    return merged\n"
        "```"
    )
    table = (
        "| Name | Type | Default | Meaning |\n"
        "| --- | --- | --- | --- |\n"
        "| level | string | info | The lowest level written to the log |"
    )
    assert (True, True, False) == (
        code in markdown,
        table in markdown,
        "Table of contents" in markdown,
    )
    assert "        if path.exists():\n" in job["text"].text


async def test_an_undeclared_windows_1252_page_reads_as_a_browser_reads_it(make_settings, web):
    """A French page in windows-1252 with no charset anywhere decodes as windows-1252."""
    [job] = await fetched(make_settings, web, ("/recette", page("french-cp1252.html")))
    text = job["text"].text
    assert (True, True, True) == ("crème" in text, "à la" in text, "œuvre" in text)
    metadata = job["result"]["metadata"]
    assert ("cp1252", "detected") == (metadata["charset"], metadata["charset_source"])


async def test_a_pdf_is_read_page_by_page(make_settings, web):
    """A three-page PDF: its pages' text split by form feeds, page markers in the Markdown,
    its title, author and page count in the metadata."""
    body = pdfs.text_pdf(
        ["The first page.", "The second page.", "The third page."],
        title="Annual report",
        author="Brackwater Council",
    )
    [job] = await fetched(make_settings, web, ("/report.pdf", Reply(200, body, "application/pdf")))
    metadata = job["result"]["metadata"]
    assert (
        "succeeded",
        "The first page.\fThe second page.\fThe third page.",
        ("Annual report", ["Brackwater Council"], 3),
    ) == (
        job["status"],
        job["text"].text,
        (metadata["title"], metadata["authors"], metadata["page_count"]),
    )
    assert "<!-- page 2 -->\n\nThe second page." in job["markdown"].text


async def test_a_hostile_pdf_ends_dead_and_the_next_page_is_read(make_settings, web):
    """A PDF that inflates to 1 GiB ends dead (ExtractionTimeout or ExtractionFailed) within
    its deadline, and a page fetched after it is extracted as usual."""
    settings = make_settings(extract_processes=1, extract_timeout_seconds=2, extract_memory_mb=512)
    bomb = web.script("/bomb.pdf", Reply(200, pdfs.compression_bomb_pdf(), "application/pdf"))
    after = web.script("/after", page("article.html"))
    async with running_app(settings) as (_, client):
        dead = await wait_for_status(
            client,
            (await client.post("/jobs", json={"url": bomb})).json()["id"],
            "dead",
            timeout=60,
        )
        good = await wait_for_status(
            client,
            (await client.post("/jobs", json={"url": after})).json()["id"],
            "succeeded",
            timeout=60,
        )
    assert (True, "fatal") == (
        dead["last_error"]["type"] in ("ExtractionTimeout", "ExtractionFailed"),
        dead["last_error"]["kind"],
    )
    assert "Harbour town votes to keep its tidal mill" == good["result"]["metadata"]["title"]


async def test_hostile_pages_end_dead_saying_why_and_the_next_page_is_read(make_settings, web):
    """The issue's pages (one element of 100,000 attributes; 200,000 paragraphs), each of
    which would hold a process past its deadline, end dead before it, fatal UnparseableContent
    naming the cap and its setting (one set lower here); a page fetched after them is
    extracted as usual."""
    settings = make_settings(
        extract_processes=1, extract_timeout_seconds=60, extract_max_elements=20_000
    )
    attributes = b" ".join(b"a%d=x" % n for n in range(100_000))
    hostile = [
        b"<html><body><p " + attributes + b">text</p></body></html>",
        b"<html><body>" + b"<p>x</p>" * 200_000 + b"</body></html>",
    ]
    urls = [
        web.script(f"/hostile/{n}", Reply(200, body, "text/html")) for n, body in enumerate(hostile)
    ]
    after = web.script("/after", page("article.html"))
    async with running_app(settings) as (_, client):
        dead = []
        for url in urls:
            job_id = (await client.post("/jobs", json={"url": url})).json()["id"]
            dead.append(await wait_for_status(client, job_id, "dead", "succeeded", timeout=60))
        good = await wait_for_status(
            client,
            (await client.post("/jobs", json={"url": after})).json()["id"],
            "succeeded",
            timeout=60,
        )
    assert [
        (
            "dead",
            "fatal",
            "UnparseableContent",
            "hostile page: 100,000 attributes on one element"
            " (limit 1,000, INGEST_EXTRACT_MAX_ATTRIBUTES_PER_ELEMENT)",
        ),
        (
            "dead",
            "fatal",
            "UnparseableContent",
            "hostile page: 200,002 elements (limit 20,000, INGEST_EXTRACT_MAX_ELEMENTS)",
        ),
    ] == [
        (
            job["status"],
            job["last_error"]["kind"],
            job["last_error"]["type"],
            job["last_error"]["message"],
        )
        for job in dead
    ]
    assert "Harbour town votes to keep its tidal mill" == good["result"]["metadata"]["title"]


async def test_an_image_has_no_text(make_settings, web):
    """An image (allowed by the operator) succeeds with its bytes kept, and /text and
    /markdown answer a problem that says why, never the raw bytes."""
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    settings = make_settings(allowed_content_types=("text/html", "image/png"))
    async with running_app(settings) as (_, client):
        url = web.script("/logo.png", Reply(200, png, "image/png"))
        job = await wait_for_status(
            client, (await client.post("/jobs", json={"url": url})).json()["id"], "succeeded"
        )
        content = await client.get(f"/jobs/{job['id']}/content")
        text = await client.get(f"/jobs/{job['id']}/text")
        markdown = await client.get(f"/jobs/{job['id']}/markdown")
    assert (png, 404, 404) == (content.content, text.status_code, markdown.status_code)
    assert "has no text" in text.json()["detail"]
