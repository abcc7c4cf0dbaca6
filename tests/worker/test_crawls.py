"""Crawls end to end: the app's worker and crawl loop against a site served on 127.0.0.1 by
a real HTTP server that counts every request, on both backends."""

import json
from collections.abc import Callable
from typing import Any

import httpx

from app.settings import Settings
from tests.conftest import eventually, running_app, wait_for_status
from tests.support.webserver import Reply, ScriptedServer

TEXT = "text/plain"
XML = "application/xml"


def page(title: str, *hrefs: str, head: str = "") -> Reply:
    links = "".join(f'<li><a href="{href}">link to {href}</a></li>' for href in hrefs)
    body = (
        f"<html><head><title>{title}</title>{head}</head><body><main><h1>{title}</h1>"
        f"<p>{title} has words enough to be a page of its own.</p><ul>{links}</ul></main>"
        "</body></html>"
    )
    return Reply(200, body.encode())


def sitemap(web: ScriptedServer, *paths: str, lastmod: str = "2026-11-30") -> Reply:
    urls = "".join(
        f"<url><loc>{web.url(path)}</loc><lastmod>{lastmod}</lastmod></url>" for path in paths
    )
    xml = f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
    return Reply(200, xml.encode(), XML)


async def start(client: httpx.AsyncClient, url: str, **fields: Any) -> dict[str, Any]:
    response = await client.post("/crawls", json={"url": url, **fields})
    assert response.status_code == 201, response.text
    return response.json()


async def ended(client: httpx.AsyncClient, crawl_id: str, timeout: float = 30.0) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        crawl = (await client.get(f"/crawls/{crawl_id}")).json()
        return crawl if crawl["status"] != "running" else None

    crawl: dict[str, Any] = await eventually(check, timeout=timeout)
    return crawl


async def pages(client: httpx.AsyncClient, crawl_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/crawls/{crawl_id}/pages", params={"limit": 500})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def site(web: ScriptedServer) -> None:
    """A small site: a home page linking to two sections, one of them twice (once with a
    tracking parameter), an external site and a page robots.txt disallows; a sitemap that
    names a page no link reaches."""
    web.script("/robots.txt", Reply(200, b"User-agent: *\nDisallow: /private\n", TEXT))
    web.script(
        "/",
        page("Home", "/a", "/b", "/b?utm_source=news", "http://example.invalid/", "/private"),
    )
    web.script("/a", page("A", "/", "/c"))
    web.script("/b", page("B", "/a"))
    web.script("/c", page("C"))
    web.script("/sitemap.xml", sitemap(web, "/", "/only-in-sitemap"))
    web.script("/only-in-sitemap", page("Only in the sitemap"))
    web.script("/llms.txt", Reply(404, b"none", TEXT))


async def test_a_crawl_fetches_every_page_of_the_site_once(
    make_settings: Callable[..., Settings], web: ScriptedServer
):
    """A crawl of the site follows its links and its sitemap: every page in scope is fetched
    exactly once (the duplicate with a tracking parameter too), each an ordinary succeeded
    job that says its crawl, depth and where it was found; the page robots.txt disallows
    is never requested (left out, or dead with reason robots had its job been made before
    robots.txt was read), the external site never; the crawl completes with counts that say
    so."""
    site(web)
    async with running_app(make_settings()) as (_, client):
        crawl = await start(client, web.url("/"))
        done = await ended(client, crawl["id"])
        jobs = await pages(client, crawl["id"])
    by_path = {job["url"].removeprefix(web.base_url): job for job in jobs}
    assert "completed" == done["status"]
    # /private is disallowed: left out once the home page's fetch read robots.txt.
    assert ["succeeded"] * 5 == [
        by_path[path]["status"] for path in ("/", "/a", "/b", "/c", "/only-in-sitemap")
    ]
    assert set(by_path) <= {"/", "/a", "/b", "/c", "/only-in-sitemap", "/private"}
    for path in ("/", "/a", "/b", "/c", "/only-in-sitemap"):
        assert 1 == web.count(path), path
    assert 0 == web.count("/private")
    assert {"id": crawl["id"], "depth": 2, "found_on": web.url("/a")} == by_path["/c"]["crawl"]
    assert 0 == by_path["/only-in-sitemap"]["crawl"]["depth"]
    counts = done["counts"]
    assert (6, 5, 1, 0) == (
        counts["found"],
        counts["succeeded"],
        counts["robots"],
        counts["waiting"],
    )
    assert counts["left_out"]["off_site"] >= 1


async def test_a_page_links_are_listed_internal_and_external(
    make_settings: Callable[..., Settings], web: ScriptedServer
):
    """GET /jobs/{id}/links: the page's links, absolute and normalized (the tracking
    parameter dropped, so /b once), with their anchor text, split by host."""
    site(web)
    async with running_app(make_settings()) as (_, client):
        job = (await client.post("/jobs", json={"url": web.url("/")})).json()

        async def links() -> dict[str, Any] | None:
            response = await client.get(f"/jobs/{job['id']}/links")
            return response.json() if response.status_code == 200 else None

        found = await eventually(links)
    assert [web.url("/a"), web.url("/b"), web.url("/private")] == [
        link["url"] for link in found["internal"]
    ]
    assert [{"url": "http://example.invalid/", "text": "link to http://example.invalid/"}] == (
        found["external"]
    )


async def test_a_map_lists_what_the_listings_name_and_fetches_no_page(
    make_settings: Callable[..., Settings], web: ScriptedServer
):
    """mode map: robots.txt's sitemap (an index of two sitemaps) and llms.txt are read, and
    their URLs listed with their lastmod and where each was found; no page is fetched."""
    index = (
        '<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<sitemap><loc>{web.url('/one.xml')}</loc></sitemap>"
        f"<sitemap><loc>{web.url('/two.xml')}</loc></sitemap></sitemapindex>"
    )
    web.script("/robots.txt", Reply(200, f"Sitemap: {web.url('/index.xml')}\n".encode(), TEXT))
    web.script("/index.xml", Reply(200, index.encode(), XML))
    web.script("/one.xml", sitemap(web, "/p1", "/p2"))
    web.script("/two.xml", sitemap(web, "/p3", lastmod="2026-12-01"))
    web.script("/sitemap.xml", Reply(404, b"none", TEXT))
    web.script("/llms.txt", Reply(200, b"# Site\n\n- [Guide](/guide): the guide\n", TEXT))
    async with running_app(make_settings()) as (_, client):
        crawl = await start(client, web.url("/"), mode="map")
        done = await ended(client, crawl["id"])
        found = (await client.get(f"/crawls/{crawl['id']}/urls")).json()["items"]
        jobs = await pages(client, crawl["id"])
    assert "completed" == done["status"]
    listed = {item["url"].removeprefix(web.base_url): item for item in found}
    assert {"/", "/p1", "/p2", "/p3", "/guide"} == set(listed)
    assert ("2026-12-01", "sitemap", web.url("/two.xml")) == (
        listed["/p3"]["lastmod"],
        listed["/p3"]["source"],
        listed["/p3"]["found_on"],
    )
    assert "llms" == listed["/guide"]["source"]
    assert [] == jobs
    assert 0 == sum(web.count(path) for path in ("/", "/p1", "/p2", "/p3", "/guide"))
    assert 1 == done["counts"]["listings_failed"]  # /sitemap.xml: 404


async def test_limit_and_max_depth_bound_a_calendar_trap(
    make_settings: Callable[..., Settings], web: ScriptedServer
):
    """An endless calendar (each day links to the next, and to ten query-string variants):
    with max_depth 3 no page past depth 3 is fetched; with limit 4, four pages are made
    jobs of and the rest found are cut when the crawl completes."""
    for day in range(200):
        variants = [f"/cal/{day}?view={v}" for v in range(10)]
        web.script(f"/cal/{day}", page(f"Day {day}", f"/cal/{day + 1}", *variants))
    web.script("/robots.txt", Reply(404, b"", TEXT))
    web.script("/sitemap.xml", Reply(404, b"", TEXT))
    web.script("/llms.txt", Reply(404, b"", TEXT))
    async with running_app(make_settings()) as (_, client):
        deep = await start(
            client, web.url("/cal/0"), max_depth=3, sitemap="skip", exclude=["**?view=*"]
        )
        deep_done = await ended(client, deep["id"])
        capped = await start(client, web.url("/cal/100"), limit=4, sitemap="skip")
        capped_done = await ended(client, capped["id"])
    assert 4 == deep_done["counts"]["succeeded"]  # depths 0 to 3
    assert 0 == web.count("/cal/4")
    assert deep_done["counts"]["left_out"]["excluded"] >= 30
    assert deep_done["counts"]["left_out"]["too_deep"] >= 1
    counts = capped_done["counts"]
    assert (4, 4) == (counts["queued"], counts["succeeded"])
    assert counts["cut"] >= 1
    assert 0 == counts["waiting"]


async def test_a_cancelled_crawl_cancels_its_pending_pages(
    make_settings: Callable[..., Settings], web: ScriptedServer
):
    """A crawl cancelled while its pages wait (the site's domain allows one fetch at a time,
    and the first page is held): pending pages are cancelled, nothing more is fetched after
    the running one finishes, and a second cancel answers 409."""
    import threading

    hold = threading.Event()
    web.script("/", page("Home", *[f"/p{i}" for i in range(20)]))
    for i in range(20):
        web.script(f"/p{i}", Reply(200, b"<html><body><p>held page</p></body></html>", hold=hold))
    for path in ("/robots.txt", "/sitemap.xml", "/llms.txt"):
        web.script(path, Reply(404, b"", TEXT))
    async with running_app(make_settings(domain_max_in_flight=1)) as (_, client):
        crawl = await start(client, web.url("/"))

        async def waiting() -> bool:
            counts = (await client.get(f"/crawls/{crawl['id']}")).json()["counts"]
            return counts["running"] == 1 and counts["pending"] >= 5

        await eventually(waiting)
        cancelled = await client.post(f"/crawls/{crawl['id']}/cancel")
        hold.set()
        again = await client.post(f"/crawls/{crawl['id']}/cancel")

        async def settled() -> dict[str, Any] | None:
            got = (await client.get(f"/crawls/{crawl['id']}")).json()
            return got if got["counts"]["running"] == 0 else None

        final = await eventually(settled)
    assert (200, "cancelled") == (cancelled.status_code, cancelled.json()["status"])
    assert 409 == again.status_code
    assert final["counts"]["cancelled"] >= 5
    assert 0 == final["counts"]["pending"]
    fetched = sum(web.count(f"/p{i}") for i in range(20))
    assert fetched <= 2  # the held one, and at most one started before the cancel


async def test_a_crawl_request_is_checked(
    make_settings: Callable[..., Settings], web: ScriptedServer
):
    """Bad crawl requests are 422s that name the field: no start URL, both `url` and
    `urls`, a pattern with too many wildcards, a limit past INGEST_CRAWL_MAX_PAGES, robots.txt
    ignored where not allowed; an unknown crawl is 404."""
    async with running_app(make_settings(worker_enabled=False, crawl_max_pages=50)) as (_, client):
        home = web.url("/")
        bad = [
            {},
            {"url": home, "urls": [home]},
            {"url": home, "include": ["/*a*a*a*a*a*a*a*a*a"]},
            {"url": home, "limit": 51},
            {"url": home, "robots_txt": False},
            {"url": "ftp://127.0.0.1/"},
        ]
        answers = [await client.post("/crawls", json=body) for body in bad]
        missing = await client.get("/crawls/0191a2b3-0000-7000-8000-000000000000")
    assert [422] * len(bad) == [answer.status_code for answer in answers]
    assert ["body", "limit"] == answers[3].json()["detail"][0]["loc"]
    assert 404 == missing.status_code


def section(web: ScriptedServer, prefix: str, count: int) -> None:
    """`prefix`/ links to `prefix`/0 .. `prefix`/count-1, which link to nothing more."""
    web.script(f"{prefix}/", page(prefix, *[f"{prefix}/{i}" for i in range(count)]))
    for i in range(count):
        web.script(f"{prefix}/{i}", page(f"{prefix} {i}"))


async def test_two_crawls_of_one_tenant_move_side_by_side(
    make_settings: Callable[..., Settings], web: ScriptedServer
):
    """Two crawls of one tenant, each of 60 pages, with a window of 10 pending pages each:
    by the time the first has fetched half its pages the second has fetched some of its
    own (neither waits for the other to end), and both complete."""
    for path in ("/robots.txt", "/sitemap.xml", "/llms.txt"):
        web.script(path, Reply(404, b"", TEXT))
    section(web, "/one", 60)
    section(web, "/two", 60)
    settings = make_settings(crawl_window=10, worker_concurrency=2, domain_max_in_flight=2)
    async with running_app(settings) as (_, client):
        one = await start(client, web.url("/one/"), include=["/one/**"], sitemap="skip")
        two = await start(client, web.url("/two/"), include=["/two/**"], sitemap="skip")

        async def half_of_one() -> dict[str, Any] | None:
            counts = (await client.get(f"/crawls/{one['id']}")).json()["counts"]
            if counts["succeeded"] < 30:
                return None
            return (await client.get(f"/crawls/{two['id']}")).json()["counts"]

        two_meanwhile = await eventually(half_of_one, timeout=60)
        done = [await ended(client, crawl["id"], timeout=60) for crawl in (one, two)]
    assert two_meanwhile["succeeded"] >= 10
    assert [61, 61] == [crawl["counts"]["succeeded"] for crawl in done]


async def test_a_crawl_resumes_after_a_restart_with_nothing_lost(
    make_settings: Callable[..., Settings], web: ScriptedServer
):
    """The service stops mid-crawl (its pages' links written, some pages pending, one held
    running); started again on the same database, the crawl completes: every page fetched,
    none fetched twice but the one interrupted."""
    import threading

    hold = threading.Event()
    for path in ("/robots.txt", "/sitemap.xml", "/llms.txt"):
        web.script(path, Reply(404, b"", TEXT))
    section(web, "/s", 30)
    web.script("/s/0", Reply(200, b"<html><body><p>held</p></body></html>", hold=hold))
    settings = make_settings(worker_concurrency=2, domain_max_in_flight=2, crawl_window=5)
    async with running_app(settings) as (_, client):
        crawl = await start(client, web.url("/s/"), sitemap="skip")

        async def midway() -> bool:
            counts = (await client.get(f"/crawls/{crawl['id']}")).json()["counts"]
            return counts["succeeded"] >= 5 and counts["waiting"] > 0

        await eventually(midway, timeout=30)
    hold.set()
    async with running_app(settings) as (_, client):
        done = await ended(client, crawl["id"], timeout=60)
    assert ("completed", 31) == (done["status"], done["counts"]["succeeded"])
    assert [1] * 29 == [web.count(f"/s/{i}") for i in range(1, 30)]
    assert 1 <= web.count("/s/0") <= 2


async def test_a_re_crawl_reports_new_changed_and_removed_pages(
    make_settings: Callable[..., Settings], web: ScriptedServer
):
    """A crawl with refresh_every: its first round finds /, /a, /b and /d; the site then
    changes (/a's text, /c linked and new, /b gone with 410, /d no longer linked) and the
    next round, begun by POST /crawls/{id}/refresh, reports /c new, / and /a changed, /b
    and /d removed; the removed pages keep their content. Cancelled between rounds, no
    round begins again."""
    for path in ("/robots.txt", "/sitemap.xml", "/llms.txt"):
        web.script(path, Reply(404, b"", TEXT))
    web.script("/", page("Home", "/a", "/b", "/d"))
    web.script("/a", page("A first"))
    web.script("/b", page("B"))
    web.script("/d", page("D"))
    async with running_app(make_settings(refresh_min_seconds=1)) as (_, client):
        # A round a day, begun again by hand: the site changes between rounds, never during.
        crawl = await start(client, web.url("/"), refresh_every=86400, sitemap="skip")

        async def report(number: int) -> dict[str, Any] | None:
            answer = await client.get(f"/crawls/{crawl['id']}/rounds/{number}")
            return answer.json() if answer.status_code == 200 else None

        first = await eventually(lambda: report(1), timeout=30)
        web.script("/", page("Home", "/a", "/b", "/c"))
        web.script("/a", page("A second"))
        web.script("/b", Reply(410, b"gone", TEXT))
        web.script("/c", page("C"))
        again = await client.post(f"/crawls/{crawl['id']}/refresh")
        second = await eventually(lambda: report(2), timeout=30)
        between = (await client.get(f"/crawls/{crawl['id']}")).json()
        cancelled = await client.post(f"/crawls/{crawl['id']}/cancel")
        jobs = {job["url"]: job for job in await pages(client, crawl["id"])}
        kept = await client.get(f"/jobs/{jobs[web.url('/d')]['id']}/text")
    urls = {
        key: sorted(path.removeprefix(web.base_url) for path in paths)
        for key, paths in second["pages"].items()
    }
    assert {"new": 4, "changed": 0, "removed": 0} == first["counts"]
    assert {"new": ["/c"], "changed": ["/", "/a"], "removed": ["/b", "/d"]} == urls
    assert 200 == again.status_code
    assert (2, "completed") == (between["round"], between["status"])
    assert between["next_round_at"] is not None
    assert (200, "cancelled", None) == (
        cancelled.status_code,
        cancelled.json()["status"],
        cancelled.json()["next_round_at"],
    )
    assert ("dead", "gone") == (jobs[web.url("/b")]["status"], jobs[web.url("/b")]["dead_reason"])
    assert "D has words enough" in kept.text


async def test_a_re_crawl_begins_its_rounds_on_schedule(
    make_settings: Callable[..., Settings], web: ScriptedServer
):
    """refresh_every 1: rounds follow each other without a hand; a site that did not change
    reports nothing new, changed or removed, and each page is fetched once a round."""
    for path in ("/robots.txt", "/sitemap.xml", "/llms.txt"):
        web.script(path, Reply(404, b"", TEXT))
    web.script("/", page("Home", "/a"))
    web.script("/a", page("A"))
    async with running_app(make_settings(refresh_min_seconds=1)) as (_, client):
        crawl = await start(client, web.url("/"), refresh_every=1, sitemap="skip")

        async def second() -> dict[str, Any] | None:
            answer = await client.get(f"/crawls/{crawl['id']}/rounds/2")
            return answer.json() if answer.status_code == 200 else None

        report = await eventually(second, timeout=30)
        await client.post(f"/crawls/{crawl['id']}/cancel")
    assert {"new": 0, "changed": 0, "removed": 0} == report["counts"]
    assert web.count("/a") >= 2


async def test_the_dashboard_shows_crawls_and_cancels_one(
    make_settings: Callable[..., Settings], web: ScriptedServer
):
    """/dashboard/crawls lists a crawl; its page shows its counts, its last round and its
    pages, and a job's page names its crawl; the Cancel button cancels a crawl between
    rounds, and the page then offers no button."""
    site(web)
    async with running_app(make_settings(refresh_min_seconds=1)) as (_, client):
        crawl = await start(client, web.url("/"), refresh_every=86400)
        await ended(client, crawl["id"])
        listed = await client.get("/dashboard/crawls")
        shown = await client.get(f"/dashboard/crawls/{crawl['id']}")
        job = next(job for job in await pages(client, crawl["id"]) if job["url"] == web.url("/a"))
        job_page = await client.get(f"/dashboard/jobs/{job['id']}")
        cancelled = await client.post(f"/dashboard/crawls/{crawl['id']}/cancel")
        after = await client.get(f"/dashboard/crawls/{crawl['id']}")
        missing = await client.get("/dashboard/crawls/nope")
    assert 200 == listed.status_code and f'data-crawl-id="{crawl["id"]}"' in listed.text
    assert "5 succeeded" in shown.text
    assert "Round 1" in shown.text and "5 new, 0 changed, 0 removed" in shown.text
    assert f'href="/dashboard/crawls/{crawl["id"]}"' in job_page.text
    assert 303 == cancelled.status_code
    assert "s-cancelled" in after.text and "/cancel" not in after.text
    assert 404 == missing.status_code


async def test_a_crawl_calls_back_as_each_round_ends(
    make_settings: Callable[..., Settings], web: ScriptedServer
):
    """A crawl's callback_url is told `crawl.completed` as its first round ends (with the
    round's report), and `crawl.changed` when a later round found a page changed; its
    pages' jobs call nothing (no `callback_pages`)."""
    for path in ("/robots.txt", "/sitemap.xml", "/llms.txt"):
        web.script(path, Reply(404, b"", TEXT))
    web.script("/", page("Home", "/a"))
    web.script("/a", page("A first"))
    hook = web.url("/hook")
    async with running_app(make_settings(refresh_min_seconds=1)) as (_, client):
        crawl = await start(client, web.url("/"), callback_url=hook, refresh_every=86400)

        async def posted(count: int) -> bool:
            return len(web.posts["/hook"]) >= count

        await eventually(lambda: posted(1), timeout=30)
        web.script("/a", page("A second"))
        await client.post(f"/crawls/{crawl['id']}/refresh")
        await eventually(lambda: posted(2), timeout=30)
        await client.post(f"/crawls/{crawl['id']}/cancel")
    first, second = (json.loads(body) for _, body in web.posts["/hook"][:2])
    assert ("crawl.completed", crawl["id"], 1, {"new": 2, "changed": 0, "removed": 0}) == (
        first["event"],
        first["crawl"]["id"],
        first["round"]["round"],
        first["round"]["counts"],
    )
    assert ("crawl.changed", 2, [web.url("/a")]) == (
        second["event"],
        second["round"]["round"],
        second["round"]["pages"]["changed"],
    )
    assert 2 == len(web.posts["/hook"])


async def test_a_tenants_crawl_does_not_hold_back_another_tenants_job(
    make_settings: Callable[..., Settings], web: ScriptedServer
):
    """Tenant a crawls 120 slow pages (a window of 30 pending); tenant b's single job,
    submitted while a's pages wait, is fetched while a's crawl still runs: the tenants'
    fair share serves b's turn before a's waiting pages."""
    for path in ("/robots.txt", "/sitemap.xml", "/llms.txt"):
        web.script(path, Reply(404, b"", TEXT))
    section(web, "/big", 120)
    for i in range(120):
        web.script(f"/big/{i}", Reply(200, page(f"big {i}").body, delay=0.05))
    settings = make_settings(crawl_window=30, worker_concurrency=2, domain_max_in_flight=2)
    async with running_app(settings) as (_, client):
        crawl = await start(client, web.url("/big/"), tenant="a", sitemap="skip")

        async def waiting() -> bool:
            counts = (await client.get(f"/crawls/{crawl['id']}")).json()["counts"]
            return counts["pending"] >= 20

        await eventually(waiting, timeout=30)
        other = web.url("/other").replace("127.0.0.1", "localhost")
        job = (await client.post("/jobs", json={"url": other, "tenant": "b"})).json()
        done = await wait_for_status(client, job["id"], "succeeded", timeout=30)
        meanwhile = (await client.get(f"/crawls/{crawl['id']}")).json()
        await client.post(f"/crawls/{crawl['id']}/cancel")
    assert "succeeded" == done["status"]
    assert "running" == meanwhile["status"]
    assert meanwhile["counts"]["pending"] > 0
