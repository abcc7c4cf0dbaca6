"""The dashboard's HTML pages and buttons over HTTP, on both backends; its helpers, pure.

The jobs it shows are made by the real worker against a local server (a 404 kills one, a 500
sends one into backoff); the paused domain is written by hand, as no store method pauses one.
"""

import base64
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import sqlalchemy as sa

from app.api.dashboard import presented_key
from app.api.pages import duration, relative
from app.clock import utc_now
from app.settings import Settings
from app.store.tables import Domain
from tests.conftest import eventually, running_app, wait_for_status
from tests.webserver import Reply, ScriptedServer

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
        domains = Domain.__table__
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


def notice_of(location: str) -> str:
    return parse_qs(urlsplit(location).query)["notice"][0]


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
    assert 303 == response.status_code
    location = response.headers["location"]
    assert location.startswith(f"/dashboard?{urlencode({'domain': seeded.local_domain})}&notice=")
    assert f"Job {seeded.dead} is pending again." == notice_of(location)
    assert ("pending", 0, None) == (job["status"], job["attempts"], job["retry_after"])


async def test_retry_of_an_unknown_job_says_so(make_settings):
    """An unknown id comes back as a notice on the page it came from, not an error."""
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        response = await client.post("/dashboard/jobs/nope/retry", params={"back": "job"})
    assert 303 == response.status_code
    assert response.headers["location"].startswith("/dashboard/jobs/nope?notice=")
    assert "No job nope." == notice_of(response.headers["location"])


async def test_retry_all_requeues_the_dead_of_the_filter_only(make_settings, web):
    """POST /dashboard/retry?domain=: only that domain's dead jobs are requeued."""
    seeded = await seed(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        other = await client.post("/dashboard/retry", params={"domain": PAUSED_DOMAIN})
        still = (await client.get(f"/jobs/{seeded.dead}")).json()["status"]
        mine = await client.post("/dashboard/retry", params={"domain": seeded.local_domain})
        now = (await client.get(f"/jobs/{seeded.dead}")).json()["status"]
    assert f"Requeued 0 dead job(s) of {PAUSED_DOMAIN}." == notice_of(other.headers["location"])
    assert f"Requeued 1 dead job(s) of {seeded.local_domain}." == notice_of(
        mine.headers["location"]
    )
    assert ("dead", "pending") == (still, now)


async def test_resume_button_clears_the_pause(make_settings, web):
    """POST /dashboard/domains/{domain}/resume: the domain is no longer listed as paused."""
    await seed(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (app, client):
        response = await client.post(f"/dashboard/domains/{PAUSED_DOMAIN}/resume")
        page = (await client.get(response.headers["location"])).text
        missing = await client.post("/dashboard/domains/nowhere.example/resume")
        async with app.state.runtime.database.read() as conn:
            row = (
                await conn.execute(
                    sa.select(Domain.__table__).where(Domain.__table__.c.domain == PAUSED_DOMAIN)
                )
            ).one()
    assert f"Domain {PAUSED_DOMAIN} resumed." == notice_of(response.headers["location"])
    assert f'action="/dashboard/domains/{PAUSED_DOMAIN}/resume"' not in page
    assert (None, None) == (row.paused_until, row.pause_reason)
    assert "No domain nowhere.example." == notice_of(missing.headers["location"])


async def test_job_page_shows_the_attempt_history(make_settings, web):
    """/dashboard/jobs/{id} shows the job, its Retry button and one row per attempt."""
    seeded = await seed(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        page = (await client.get(f"/dashboard/jobs/{seeded.dead}")).text
        missing = await client.get("/dashboard/jobs/nope")
    assert f'action="/dashboard/jobs/{seeded.dead}/retry?back=job"' in page
    assert '<dd data-field="status">dead (fatal)</dd>' in page
    assert 1 == page.count('<td class="num">1</td>')
    assert "HTTPStatus: HTTP 404" in page
    assert (404, True) == (missing.status_code, "No job nope" in missing.text)


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
    """A notice or filter in the URL is shown as text, never as markup."""
    page = (await client.get("/dashboard", params={"notice": "<b>x</b>", "domain": '"><i>'})).text
    assert "&lt;b&gt;x&lt;/b&gt;" in page
    assert "<b>x</b>" not in page
    assert '"><i>' not in page
