"""robots.txt end to end: the app's worker against a real HTTP server on 127.0.0.1 that
records every request, on both backends."""

from collections.abc import Callable

import pytest

from app.clock import utc_now
from app.fetch.fetcher import Fetcher
from app.fetch.robots_reader import RobotsTxt
from app.part_settings import PartSettings, destinations_of
from app.rules.robots import MAX_WILDCARD_RULES
from app.settings import Settings
from tests.conftest import running_app, submit, wait_for_status
from tests.support.hostile import wildcard_robots_txt
from tests.support.webserver import Reply, ScriptedServer

TEXT = "text/plain"


def robots(web: ScriptedServer, *replies: Reply) -> None:
    web.script("/robots.txt", *replies)


def rules(text: str) -> Reply:
    return Reply(200, text.encode(), TEXT)


async def test_a_disallowed_url_dies_robots_and_an_allowed_one_succeeds(
    make_settings: Callable[..., Settings], web: ScriptedServer
):
    """With robots.txt obeyed, a path it disallows for our token is dead (robots) after one
    attempt and never requested, while another path of the same host succeeds; robots.txt
    is read once for both."""
    robots(web, rules("User-agent: ingest\nDisallow: /private\n\nUser-agent: *\nAllow: /\n"))
    async with running_app(make_settings(robots_txt="obey")) as (_, client):
        refused = await submit(client, web.url("/private/page"))
        allowed = await submit(client, web.url("/public"))
        dead = await wait_for_status(client, refused["id"], "dead")
        done = await wait_for_status(client, allowed["id"], "succeeded")
    assert ("robots", 1, "fatal", "RobotsDisallowed") == (
        dead["dead_reason"],
        dead["attempts"],
        dead["last_error"]["kind"],
        dead["last_error"]["type"],
    )
    assert "succeeded" == done["status"]
    assert (0, 1, 1) == (web.count("/private/page"), web.count("/public"), web.count("/robots.txt"))
    assert web.headers["/robots.txt"][0]["User-Agent"] == "ingest/0.1"


@pytest.mark.parametrize(
    "rules_of",
    [
        pytest.param({"robots_txt": "ignore", "tenant_robots_txt": "acme:obey"}, id="acme-obeys"),
        pytest.param(
            {"robots_txt": "obey", "tenant_robots_txt": "globex:ignore"}, id="globex-ignores"
        ),
    ],
)
async def test_each_tenant_obeys_or_ignores_robots_txt_as_its_rule_says(
    make_settings: Callable[..., Settings], web: ScriptedServer, rules_of: dict[str, str]
):
    """With acme obeying robots.txt and globex ignoring it (by the default or by its own
    rule), the same disallowed URL is dead (robots) for acme, never requested for it, and
    fetched for globex; robots.txt is read for acme's job only."""
    robots(web, rules("User-agent: *\nDisallow: /private\n"))
    async with running_app(make_settings(**rules_of)) as (_, client):
        obeying = await submit(client, web.url("/private/a"), tenant="acme")
        ignoring = await submit(client, web.url("/private/g"), tenant="globex")
        dead = await wait_for_status(client, obeying["id"], "dead")
        done = await wait_for_status(client, ignoring["id"], "succeeded")
    assert ("robots", "succeeded") == (dead["dead_reason"], done["status"])
    assert (0, 1, 1) == (
        web.count("/private/a"),
        web.count("/private/g"),
        web.count("/robots.txt"),
    )


async def test_a_missing_robots_txt_allows_everything(make_settings, web):
    """robots.txt answered 404 ("unavailable"): every path may be fetched."""
    robots(web, Reply(404, b"not found", TEXT))
    async with running_app(make_settings(robots_txt="obey")) as (_, client):
        job = await submit(client, web.url("/anything"))
        done = await wait_for_status(client, job["id"], "succeeded")
    assert (1, 1) == (done["attempts"], web.count("/anything"))


async def test_an_unreachable_robots_txt_retries_the_job_until_it_answers(make_settings, web):
    """robots.txt answered 503 twice: the job fails transient twice (its error says
    robots.txt was unreachable, the page is not asked), then succeeds once robots.txt
    answers."""
    robots(web, Reply(503, b"busy", TEXT), Reply(503, b"busy", TEXT), rules("User-agent: *\n"))
    async with running_app(make_settings(robots_txt="obey")) as (_, client):
        job = await submit(client, web.url("/page"))
        done = await wait_for_status(client, job["id"], "succeeded")
        attempts = (await client.get(f"/jobs/{job['id']}/attempts")).json()["items"]
    assert ["transient", "transient", "succeeded"] == [a["outcome"] for a in attempts]
    assert ("RobotsUnreachable", "robots.txt answered HTTP 503: unreachable") == (
        attempts[0]["error_type"],
        attempts[0]["message"],
    )
    assert (3, 3, 1) == (done["attempts"], web.count("/robots.txt"), web.count("/page"))


async def test_crawl_delay_spaces_the_fetches_of_a_domain(make_settings, web):
    """robots.txt asks Crawl-delay: 2. Once a first job has read it, two jobs submitted at
    once start their fetches seconds apart (without it: at once), both after the first's."""
    robots(web, rules("User-agent: *\nCrawl-delay: 2\n"))
    async with running_app(make_settings(robots_txt="obey")) as (_, client):
        first = await submit(client, web.url("/first"))
        await wait_for_status(client, first["id"], "succeeded")
        jobs = [await submit(client, web.url(f"/next/{i}")) for i in range(2)]
        for job in jobs:
            await wait_for_status(client, job["id"], "succeeded")
    [read_at], [first_at] = web.hits["/robots.txt"], web.hits["/first"]
    later = sorted(web.hits["/next/0"] + web.hits["/next/1"])
    assert read_at < first_at < later[0]
    # Loose: the claims space their own times, which a busy box may read late (a claim's
    # time is its pass's start) or follow late with the GET.
    assert later[1] - later[0] >= 1.0, later


async def test_a_hostile_robots_txt_is_obeyed_up_to_its_caps(make_settings, web):
    """A robots.txt of 17,000 rules of seven `*` for our crawler, parsed in an extraction
    process: a URL its first rule disallows is dead (robots), one only a rule past
    MAX_WILDCARD_RULES disallows is fetched, as is one no rule names; robots.txt read once."""
    robots(web, rules(wildcard_robots_txt("ingest")))
    past_the_cap = f"/aaaaaaa{MAX_WILDCARD_RULES:04x}"
    settings = make_settings(robots_txt="obey", extract_processes=1)
    async with running_app(settings) as (_, client):
        refused = await submit(client, web.url("/aaaaaaa0000"))
        fetched = [await submit(client, web.url(path)) for path in (past_the_cap, "/public")]
        dead = await wait_for_status(client, refused["id"], "dead")
        for job in fetched:
            await wait_for_status(client, job["id"], "succeeded")
    assert ("robots", 0, 1, 1, 1) == (
        dead["dead_reason"],
        web.count("/aaaaaaa0000"),
        web.count(past_the_cap),
        web.count("/public"),
        web.count("/robots.txt"),
    )


async def test_ignore_never_asks_for_robots_txt(make_settings, web):
    """By default (ignore) robots.txt is never requested, even one that disallows all."""
    robots(web, rules("User-agent: *\nDisallow: /\n"))
    async with running_app(make_settings()) as (_, client):
        jobs = [await submit(client, web.url(f"/page/{i}")) for i in range(3)]
        for job in jobs:
            await wait_for_status(client, job["id"], "succeeded")
    assert (0, 3) == (web.count("/robots.txt"), sum(web.count(f"/page/{i}") for i in range(3)))


async def test_robots_txt_is_read_through_the_ssrf_guard(web: ScriptedServer):
    """With private networks not allowed, a robots.txt on 127.0.0.1 is never requested: it
    goes through the fetcher's guard (which refuses the page's own fetch too)."""
    settings = Settings(_env_file=None, robots_txt="obey", extract_processes=0)
    views = PartSettings.of(settings)
    assert views.robots is not None
    fetcher = Fetcher(views.fetch, destinations=destinations_of(settings))
    try:
        check = await RobotsTxt(fetcher, views.robots, utc_now).check(web.url("/page"))
    finally:
        await fetcher.aclose()
    assert (None, 0) == (check.refusal, web.count("/robots.txt"))
