"""bench.site: the synthetic site a crawl benchmark crawls answers as its docstring says, as
ingest's own readers read it; bench.crawl: what its checks count as a crawl's problem."""

import re
from collections.abc import Iterator

import httpx
import lxml.html
import pytest

from app.content.links import page_links
from app.content.sitemaps import KindHint, SiteListing, read_listing, robots_sitemaps
from bench.crawl import crawl_problems
from bench.site import RunningSite, Site, start_site

PAGES = 50


@pytest.fixture(scope="module")
def site() -> Iterator[RunningSite]:
    running = start_site(PAGES)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def client(site: RunningSite) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=site.base_url, trust_env=False, timeout=10) as client:
        yield client


def listing(client: httpx.Client, path: str, hint: KindHint = "sitemap") -> SiteListing:
    response = client.get(path)
    assert 200 == response.status_code
    return read_listing(response.content, str(response.url), 50_000, 10**7, hint)


def links_of(client: httpx.Client, path: str) -> tuple[set[str], tuple[str, ...]]:
    """The links and feeds of a page, as a crawl reads them, paths only."""
    response = client.get(path)
    tree = lxml.html.fromstring(response.content)
    found = page_links(tree, str(response.url), 1000)
    base = str(client.base_url).rstrip("/")
    return {link.url.removeprefix(base) for link in found.links}, found.feeds


def test_robots_txt_disallows_private_and_names_the_sitemap_index(
    site: RunningSite, client: httpx.Client
) -> None:
    """robots.txt is text/plain, disallows /private/ and names the index by its port."""
    response = client.get("/robots.txt")
    assert "text/plain; charset=utf-8" == response.headers["content-type"]
    assert "User-agent: *\nDisallow: /private/\n" in response.text
    assert (f"{site.base_url}/sitemap-index.xml",) == robots_sitemaps(response.text)


def test_the_sitemaps_list_every_page_once_with_its_lastmod(
    site: RunningSite, client: httpx.Client
) -> None:
    """The index names 3 sitemaps, which list every /page/i between them, a third each."""
    index = listing(client, "/sitemap-index.xml")
    sitemaps = [found.url for found in index.sitemaps]
    assert "sitemapindex" == index.kind
    assert [f"{site.base_url}/sitemap-{k}.xml" for k in range(3)] == sitemaps
    listed = [listing(client, url.removeprefix(site.base_url)).urls for url in sitemaps]
    urls = [found.url for urls in listed for found in urls]
    assert [16, 17, 17] == [len(urls) for urls in listed]
    assert [f"{site.base_url}/page/{i}" for i in range(PAGES)] == urls
    assert "2026-01-01" == listed[2][-1].lastmod
    assert "2025-12-28" == listed[0][0].lastmod


@pytest.mark.parametrize("path", ["/sitemap.xml", "/llms.txt", "/nothing", "/page/50", "/page/07"])
def test_what_the_site_does_not_have_is_404(client: httpx.Client, path: str) -> None:
    """No /sitemap.xml, no /llms.txt, no page past the last or written with a leading 0."""
    assert 404 == client.get(path).status_code


def test_the_feed_lists_the_20_newest_pages(site: RunningSite, client: httpx.Client) -> None:
    """RSS, newest first, each item with its date."""
    feed = listing(client, "/feed.xml", "feed")
    assert "feed" == feed.kind
    assert [f"{site.base_url}/page/{i}" for i in range(49, 29, -1)] == [f.url for f in feed.urls]
    assert all(found.lastmod for found in feed.urls)


def test_a_page_links_as_a_real_site_does(site: RunningSite, client: httpx.Client) -> None:
    """Nav, neighbours, 5 related (the tracking duplicate is one of them), private,
    calendar, the feed; 2-4 KB of HTML whose length the head gives."""
    response = client.get("/page/7")
    assert "text/html; charset=utf-8" == response.headers["content-type"]
    assert len(response.content) == int(response.headers["content-length"])
    assert 2048 <= len(response.content) <= 4096
    assert '<link rel="canonical" href="/page/7">' in response.text
    tracked = re.findall(r'href="(/page/\d+)\?utm_source=x&amp;utm_medium=y"', response.text)
    links, feeds = links_of(client, "/page/7")
    nav = {"/", *(f"/section/{k}" for k in range(10))}
    fixed = {"/page/6", "/page/8", "/private/7", "/calendar/2026-01-01"}
    related = links - nav - fixed
    assert nav | fixed <= links
    assert 5 == len(related)
    assert all(link.startswith("/page/") for link in related)
    assert 1 == len(tracked) and tracked[0] in related
    assert (f"{site.base_url}/feed.xml",) == feeds


def test_the_first_and_last_pages_link_one_neighbour() -> None:
    """/page/0 has no previous page, the last page no next one."""
    site = Site(PAGES, "http://127.0.0.1:1")
    assert b'rel="prev"' not in site.page(0)
    assert b'rel="next"' not in site.page(PAGES - 1)


def test_the_texts_of_two_pages_differ() -> None:
    """Extraction has work: each page's text is its own."""
    site = Site(PAGES, "http://127.0.0.1:1")
    assert site.page(1).split(b"<main>")[1] != site.page(2).split(b"<main>")[1]


def test_the_calendar_links_to_the_day_before_and_after_forever(client: httpx.Client) -> None:
    """Each day is a page whose links lead on; a day that is no date is 404."""
    links, _ = links_of(client, "/calendar/2026-03-01")
    assert {"/calendar/2026-02-28", "/calendar/2026-03-02"} <= links
    assert 200 == client.get("/calendar/9000-12-31").status_code
    assert 404 == client.get("/calendar/2026-02-30").status_code


def test_a_section_lists_its_pages_20_at_a_time() -> None:
    """Section 3 of 1,000 pages: pages 3, 13, ...; page 2 goes on from the 21st, and links
    back to the section and on to page 3; past its last page, 404."""
    site = Site(1000, "http://127.0.0.1:1")
    first = site.answer("/section/3").body.decode()
    second = site.answer("/section/3?page=2").body.decode()
    assert '"/page/3"' in first and '"/page/193"' in first and '"/page/203"' not in first
    assert '"/page/203"' in second and '"/section/3"' in second and "?page=3" in second
    assert 404 == site.answer("/section/3?page=6").status
    assert 404 == site.answer("/section/3?page=x").status


def test_counts_tell_pages_fetched_twice_and_each_class() -> None:
    """/__counts: requests by class, pages fetched and fetched again, the calendar's days;
    itself uncounted."""
    running = start_site(PAGES)
    try:
        with httpx.Client(base_url=running.base_url, trust_env=False) as client:
            paths = ["/", "/page/1", "/page/1?utm_source=x", "/page/2", "/private/1"]
            paths += ["/section/0", "/calendar/2026-01-01", "/robots.txt", "/llms.txt", "/x"]
            for path in paths:
                client.get(path)
            client.head("/page/3")
            counts = client.get("/__counts").json()
    finally:
        running.stop()
    expected = {"home": 1, "page": 4, "private": 1, "section": 1, "calendar": 1}
    assert expected | {"listing": 2, "other": 1} == counts["requests"]
    assert (3, 1, {"1": 2}) == (
        counts["pages_fetched"],
        counts["pages_repeated"],
        counts["repeats"],
    )
    assert ({"/robots.txt": 1, "/llms.txt": 1}, 1) == (counts["listings"], counts["calendar_days"])


COUNTS = {
    "requests": {"home": 1, "page": 50, "calendar": 5},
    "pages_fetched": 50,
    "pages_repeated": 0,
}


@pytest.mark.parametrize(
    ("changed", "problems"),
    [
        ({}, []),
        ({"pages_fetched": 49}, ["49 of 50 pages fetched"]),
        ({"pages_repeated": 2}, ["2 pages fetched more than once"]),
        (
            {"requests": {"home": 2, "private": 3, "calendar": 6}},
            [
                "3 /private/ pages fetched (robots.txt)",
                "the home page fetched 2 times",
                "6 calendar requests, more than 5",
            ],
        ),
    ],
)
def test_crawl_problems(changed: dict, problems: list[str]) -> None:
    """A crawl to depth 3 fetches every page and the home page once, no private page, and
    at most 5 calendar days (/calendar/2026-01-01 at depth 1, 2 days either way)."""
    assert problems == crawl_problems(COUNTS | changed, 50, 3)
