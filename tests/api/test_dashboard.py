"""The dashboard's HTML pages and buttons over HTTP, on both backends; its helpers, pure.

The jobs it shows are made by the real worker against a local server (a 404 kills one, a 500
sends one into backoff); the paused domain is written by hand, as no store method pauses one.
"""

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html import unescape
from urllib.parse import urlencode, urlsplit

import httpx
import pytest
import sqlalchemy as sa

from app.api.dashboard.pages import duration, relative
from app.api.dashboard.routes import presented_key
from app.clock import utc_now
from app.settings import Settings
from app.store.tables import domains
from app.text.wording import SHORT_ID, distinct_prefix
from tests.conftest import eventually, running_app, wait_for_status
from tests.support.webserver import Reply, ScriptedServer

PAUSED_DOMAIN = "paused.example"


@dataclass(frozen=True)
class Seeded:
    local_domain: str
    """The local server's domain, `127.0.0.1:<port>`, where the dead and waiting jobs are."""
    dead: str
    """A job the worker killed: one attempt, HTTP 404."""
    waiting: str
    """A pending job waiting for its retry_after (ten minutes) after an HTTP 500."""
    paused_domain: str
    """A domain paused for ten minutes, with a job due in five: its pause holds the job back."""


async def seed(make_settings: Callable[..., Settings], web: ScriptedServer) -> Seeded:
    """Make the jobs the dashboard shows with the app's own worker, then stop it."""
    gone, busy = web.script("/gone", Reply(404)), web.script("/busy", Reply(500))
    later = (utc_now() + timedelta(minutes=5)).isoformat()
    settings = make_settings(backoff_base_seconds=600.0, backoff_max_seconds=600.0)
    async with running_app(settings) as (app, client):
        dead = (await client.post("/jobs", json={"url": gone})).json()["id"]
        waiting = (await client.post("/jobs", json={"url": busy})).json()["id"]
        parked = {"url": f"https://{PAUSED_DOMAIN}/feed", "not_before": later}
        assert 201 == (await client.post("/jobs", json=parked)).status_code
        await wait_for_status(client, dead, "dead")

        async def backing_off() -> bool:
            job = (await client.get(f"/jobs/{waiting}")).json()
            return job["attempts"] == 1 and job["retry_after"] is not None

        await eventually(backing_off)
        pause = (
            sa.update(domains)
            .where(domains.c.domain == PAUSED_DOMAIN)
            .values(
                paused_until=utc_now() + timedelta(minutes=10),
                pause_reason="HTTP 429, Retry-After 600s",
            )
        )
        await app.state.runtime.database.transact(lambda conn: conn.execute(pause))
    return Seeded(urlsplit(web.base_url).netloc, dead, waiting, PAUSED_DOMAIN)


async def banner(client: httpx.AsyncClient, response: httpx.Response) -> str | None:
    """The status banner of the page an action redirected to; None if it shows none."""
    assert 303 == response.status_code
    page = (await client.get(response.headers["location"])).text
    found = re.search(r'<p class="notice" role="status">(.*?)</p>', page)
    return None if found is None else unescape(found[1])


async def test_overview_shows_counts_dead_waiting_and_paused(make_settings, web):
    """/dashboard lists the dead job with its error, the waiting job, the paused domain."""
    seeded = await seed(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        response = await client.get("/dashboard")
    page = response.text
    assert (200, "text/html; charset=utf-8") == (
        response.status_code,
        response.headers["content-type"],
    )
    assert f'<tr data-job-id="{seeded.dead}">' in page
    assert "HTTPStatus: HTTP 404" in page
    assert f'<tr data-job-id="{seeded.waiting}">' in page
    assert "HTTPStatus: HTTP 500" in page
    assert f'<tr data-domain="{PAUSED_DOMAIN}">' in page
    assert "HTTP 429, Retry-After 600s" in page
    assert 'data-blocked="domain_paused"' in page
    assert '<li class="s-dead" data-status="dead"><span class="n">1</span>' in page


async def test_job_links_show_as_much_of_each_id_as_tells_them_apart(make_settings, web):
    """Ids made within a minute share their first 8 characters: each list links its jobs by
    the start that tells the page's jobs apart, the whole id in the link's title."""
    seeded = await seed(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        page = (await client.get("/dashboard")).text
    links = dict(re.findall(r'title="([0-9a-f-]{36})">([0-9a-f-]+)</a>', page))
    assert {seeded.dead, seeded.waiting} <= set(links)
    length = distinct_prefix(list(links))
    assert SHORT_ID < length < 36
    assert {job_id: job_id[:length] for job_id in links} == links


async def test_domain_filter_narrows_every_list(make_settings, web):
    """?domain= shows only that domain's dead and waiting jobs and its pause; its buttons
    come back to the filtered page."""
    seeded = await seed(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        page = (await client.get("/dashboard", params={"domain": "PAUSED.example"})).text
    assert seeded.dead not in page
    assert seeded.waiting not in page
    assert f'<tr data-domain="{PAUSED_DOMAIN}">' in page
    assert 'action="/dashboard/domains/paused.example/resume?domain=paused.example"' in page


async def test_retry_button_requeues_the_dead_job_and_redirects_back(make_settings, web):
    """POST /dashboard/jobs/{id}/retry: the job is pending with a fresh budget; 303 back."""
    seeded = await seed(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        response = await client.post(
            f"/dashboard/jobs/{seeded.dead}/retry", params={"domain": seeded.local_domain}
        )
        job = (await client.get(f"/jobs/{seeded.dead}")).json()
        shown = await banner(client, response)
    location = response.headers["location"]
    assert location.startswith(f"/dashboard?{urlencode({'domain': seeded.local_domain})}&notice=")
    assert f"Job {seeded.dead} is pending again." == shown
    assert ("pending", 0, None) == (job["status"], job["attempts"], job["retry_after"])


async def test_retry_of_an_unknown_job_says_so(make_settings):
    """An unknown id comes back as a notice on the page it came from, not an error; an id
    that is not a job id's shape is not repeated."""
    unknown = "0172ff91-2bc7-4277-8c54-cfd050bbf331"
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        response = await client.post(f"/dashboard/jobs/{unknown}/retry", params={"back": "job"})
        shown = await banner(client, response)
        odd = await client.post("/dashboard/jobs/nope/retry", params={"back": "job"})
        odd_shown = await banner(client, odd)
    assert response.headers["location"].startswith(f"/dashboard/jobs/{unknown}?notice=")
    assert (f"No job {unknown}.", "No such job.") == (shown, odd_shown)


async def test_retry_all_requeues_the_dead_of_the_filter_only(make_settings, web):
    """POST /dashboard/retry?domain=: only that domain's dead jobs are requeued."""
    seeded = await seed(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        other = await client.post("/dashboard/retry", params={"domain": PAUSED_DOMAIN})
        still = (await client.get(f"/jobs/{seeded.dead}")).json()["status"]
        mine = await client.post("/dashboard/retry", params={"domain": seeded.local_domain})
        now = (await client.get(f"/jobs/{seeded.dead}")).json()["status"]
        shown = [await banner(client, response) for response in (other, mine)]
    assert [
        f"Requeued 0 dead job(s) of {PAUSED_DOMAIN}.",
        f"Requeued 1 dead job(s) of {seeded.local_domain}.",
    ] == shown
    assert ("dead", "pending") == (still, now)


async def test_resume_button_clears_the_pause(make_settings, web):
    """POST /dashboard/domains/{domain}/resume: the domain is no longer listed as paused."""
    await seed(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (app, client):
        response = await client.post(f"/dashboard/domains/{PAUSED_DOMAIN}/resume")
        page = (await client.get(response.headers["location"])).text
        missing = await client.post("/dashboard/domains/nowhere.example/resume")
        shown = [await banner(client, answer) for answer in (response, missing)]
        async with app.state.runtime.database.read() as conn:
            row = (
                await conn.execute(sa.select(domains).where(domains.c.domain == PAUSED_DOMAIN))
            ).one()
    assert [f"Domain {PAUSED_DOMAIN} resumed.", "No domain nowhere.example."] == shown
    assert f'action="/dashboard/domains/{PAUSED_DOMAIN}/resume"' not in page
    assert (None, None) == (row.paused_until, row.pause_reason)


async def test_job_page_shows_the_attempt_history(make_settings, web):
    """/dashboard/jobs/{id} shows the job, its Retry button and one row per attempt."""
    seeded = await seed(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        page = (await client.get(f"/dashboard/jobs/{seeded.dead}")).text
        missing = await client.get("/dashboard/jobs/0172ff91-2bc7-4277-8c54-cfd050bbf331")
        odd = await client.get("/dashboard/jobs/Session expired, re-enter the key elsewhere")
    assert f'action="/dashboard/jobs/{seeded.dead}/retry?back=job"' in page
    assert '<dd data-field="status">dead (fatal)</dd>' in page
    assert 1 == page.count('<td class="num">1</td>')
    assert "HTTPStatus: HTTP 404" in page
    assert (404, True) == (
        missing.status_code,
        "No job 0172ff91-2bc7-4277-8c54-cfd050bbf331" in missing.text,
    )
    # A path that is not a job id is not repeated: a link cannot choose what the page says.
    assert (404, True, False) == (odd.status_code, "No such job" in odd.text, "expired" in odd.text)


async def test_dashboard_is_not_in_the_schema(client):
    """The HTML routes stay out of the OpenAPI schema."""
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert [] == [path for path in paths if path.startswith("/dashboard")]


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


async def test_with_api_keys_only_admin_keys_open_it(make_settings):
    """Keys set: 401 with a Basic challenge unless an admin key comes as Basic or Bearer."""
    admin, shop = "adm-1-0123456789abc", "shop-1-0123456789ab"
    settings = make_settings(worker_enabled=False, api_keys={admin: "*", shop: "shop"})
    async with running_app(settings) as (_, client):
        statuses = {
            name: (await client.get("/dashboard", headers=headers)).status_code
            for name, headers in {
                "none": {},
                "bearer admin": {"Authorization": f"Bearer {admin}"},
                "basic admin": {"Authorization": _basic("ops", admin)},
                "bearer other": {"Authorization": f"Bearer {shop}"},
                "basic other": {"Authorization": _basic(admin, shop)},
                "garbage": {"Authorization": "Basic %%%"},
            }.items()
        }
        challenge = (await client.get("/dashboard")).headers["www-authenticate"]
        post = await client.post("/dashboard/retry")
    assert {
        "none": 401,
        "bearer admin": 200,
        "basic admin": 200,
        "bearer other": 401,
        "basic other": 401,
        "garbage": 401,
    } == statuses
    assert challenge.startswith('Basic realm="ingest dashboard"')
    assert 401 == post.status_code


async def test_keys_without_an_admin_keep_it_shut(make_settings):
    """Keys set but none of tenant `*`: nobody gets in."""
    shop = "shop-1-0123456789ab"
    settings = make_settings(worker_enabled=False, api_keys={shop: "shop"})
    async with running_app(settings) as (_, client):
        response = await client.get("/dashboard", headers={"Authorization": f"Bearer {shop}"})
    assert 401 == response.status_code


async def test_cross_site_form_posts_are_refused(client):
    """A POST whose Origin is another site is 403; the same origin passes."""
    foreign = await client.post("/dashboard/retry", headers={"Origin": "https://evil.example"})
    same = await client.post("/dashboard/retry", headers={"Origin": "http://ingest"})
    assert (403, 303) == (foreign.status_code, same.status_code)


async def test_basic_credentials_do_not_excuse_a_cross_site_post(make_settings):
    """The browser adds the admin's Basic credentials to another site's form post: still 403.
    A Bearer key, which no browser adds by itself, passes."""
    admin = "adm-1-0123456789abc"
    settings = make_settings(worker_enabled=False, api_keys={admin: "*"})
    foreign = {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
    async with running_app(settings) as (_, client):
        basic = await client.post(
            "/dashboard/retry", headers=foreign | {"Authorization": _basic("ops", admin)}
        )
        bearer = await client.post(
            "/dashboard/retry", headers=foreign | {"Authorization": f"Bearer {admin}"}
        )
    assert (403, 303) == (basic.status_code, bearer.status_code)


async def test_api_keys_in_settings_shut_it_to_all_but_admins(make_settings):
    """INGEST_API_KEYS set: the admin key opens it; a tenant's key or none is 401."""
    admin, shop = "admin-key-0123456789", "shop-key-0123456789"
    settings = make_settings(worker_enabled=False, api_keys=f"{admin}:*,{shop}:shop")
    async with running_app(settings) as (_, client):
        statuses = [
            (await client.get("/dashboard", headers=headers)).status_code
            for headers in [
                {},
                {"Authorization": f"Bearer {shop}"},
                {"Authorization": f"Bearer {admin}"},
            ]
        ]
    assert [401, 401, 200] == statuses


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("Bearer k1", "k1"),
        ("bearer  k1 ", "k1"),
        (_basic("", "k1"), "k1"),
        (_basic("user", "k:1"), "k:1"),
        (_basic("k1", ""), None),
        ("Basic !!", None),
        ("Token k1", None),
        ("", None),
    ],
)
def test_presented_key(header, expected):
    """The key comes from Bearer, or from Basic's password part."""
    assert expected == presented_key(header)


NOW = datetime(2026, 11, 30, 3, 12, 4, tzinfo=UTC)


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (None, ""),
        (NOW, "now"),
        (NOW + timedelta(seconds=42), "in 42s"),
        (NOW - timedelta(minutes=3, seconds=5), "3m 5s ago"),
        (NOW + timedelta(hours=1, seconds=5), "in 1h"),
        (NOW + timedelta(days=2, hours=4, minutes=9), "in 2d 4h"),
    ],
)
def test_relative(moment, expected):
    """Times read as a span from now, in the two largest units."""
    assert expected == relative(moment, NOW)


def test_duration_of_zero():
    """Under half a second is 0s."""
    assert "0s" == duration(0.4)


async def test_text_from_the_query_is_escaped(client):
    """A filter in the URL is shown as text, never as markup."""
    page = (await client.get("/dashboard", params={"domain": '"><i>'})).text
    assert "&#34;&gt;&lt;i&gt;" in page
    assert '"><i>' not in page


@pytest.mark.parametrize(
    "params",
    [
        {"notice": "Session expired, re-enter the key at https://evil.example/"},
        {"notice": "<b>x</b>"},
        {"notice": "no-job", "job": "Session expired, re-enter the key at https://evil.example/"},
        {"notice": "resumed", "name": "re-enter the key at https://evil.example/"},
        {"notice": "not-deleted", "job": "0172ff91-2bc7-4277-8c54-cfd050bbf331", "status": "x y"},
        {"notice": "requeued-dead", "count": "1", "domain": "re-enter the key at https://x/"},
        {"notice": "requeued-dead", "count": "\uff11"},  # a digit, but not an ASCII one
    ],
)
async def test_a_notice_the_service_did_not_write_shows_no_banner(client, params):
    """`?notice=` with any text, an unknown code, or a known one with a value of another
    shape than its sentence takes (a job id, a count, a domain, a state): no banner."""
    assert 'class="notice"' not in (await client.get("/dashboard", params=params)).text
