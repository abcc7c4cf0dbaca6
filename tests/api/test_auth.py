"""API keys: every job endpoint needs one, and a tenant sees only its own jobs, and of
them nothing of other tenants' activity."""

from datetime import UTC, datetime, timedelta

import pytest

from app.model import DomainPause
from app.rules import policy
from tests.conftest import running_app
from tests.support.stores import queue_on

KEY_A = "a" * 20
KEY_B = "b" * 20
ADMIN = "c" * 20
URL = "http://example.test/"


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def client(make_settings):
    keys = {KEY_A: "tenant-a", KEY_B: "tenant-b", ADMIN: "*"}
    async with running_app(make_settings(worker_enabled=False, api_keys=keys)) as (_, client):
        yield client


async def test_no_or_wrong_key_is_401_problem(client):
    """Without a valid key the API answers 401 problem+json with a Bearer challenge."""
    for headers in ({}, auth("nope" * 5), {"Authorization": "Basic eDp5"}):
        response = await client.get("/jobs", headers=headers)
        assert 401 == response.status_code
        assert "application/problem+json" == response.headers["content-type"]
        assert "Bearer" == response.headers["www-authenticate"]


async def test_health_and_docs_need_no_key(client):
    """Probes and documentation stay open."""
    for path in ("/healthz", "/readyz", "/docs", "/redoc", "/openapi.json"):
        assert 200 == (await client.get(path)).status_code, path


async def test_a_tenant_cannot_see_or_touch_another_tenants_jobs(client):
    """Tenant B gets 404 for tenant A's job everywhere; lists and stats are per tenant."""
    created = await client.post("/jobs", json={"url": URL}, headers=auth(KEY_A))
    job = created.json()
    assert "tenant-a" == job["tenant"]
    for method, path in [
        ("GET", f"/jobs/{job['id']}"),
        ("GET", f"/jobs/{job['id']}/attempts"),
        ("POST", f"/jobs/{job['id']}/retry"),
        ("POST", f"/jobs/{job['id']}/cancel"),
    ]:
        response = await client.request(method, path, headers=auth(KEY_B))
        assert 404 == response.status_code, path
    b_list = (await client.get("/jobs", headers=auth(KEY_B))).json()["items"]
    b_list_forced = (
        await client.get("/jobs", params={"tenant": "tenant-a"}, headers=auth(KEY_B))
    ).json()["items"]
    b_stats = (await client.get("/stats", headers=auth(KEY_B))).json()["counts"]
    a_job = await client.get(f"/jobs/{job['id']}", headers=auth(KEY_A))
    admin_list = (await client.get("/jobs", headers=auth(ADMIN))).json()["items"]
    assert ([], []) == (b_list, b_list_forced)
    assert 0 == b_stats["pending"]
    assert 200 == a_job.status_code
    assert [job["id"]] == [j["id"] for j in admin_list]


async def test_a_tenant_key_submits_only_for_its_tenant(client):
    """A tenant key cannot submit into another tenant; the admin key may."""
    other = await client.post("/jobs", json={"url": URL, "tenant": "tenant-b"}, headers=auth(KEY_A))
    admin = await client.post("/jobs", json={"url": URL, "tenant": "tenant-b"}, headers=auth(ADMIN))
    assert 403 == other.status_code
    assert ("tenant-b", 201) == (admin.json()["tenant"], admin.status_code)


async def test_domains_are_admin_only(client):
    """Domain state and resume need the admin key."""
    assert 403 == (await client.get("/domains", headers=auth(KEY_A))).status_code
    assert 200 == (await client.get("/domains", headers=auth(ADMIN))).status_code


async def test_bulk_retry_stays_in_the_tenant(client):
    """A tenant's bulk retry requeues nothing of another tenant's."""
    response = await client.post("/jobs/retry", params={"status": "dead"}, headers=auth(KEY_B))
    assert {"requeued": 0, "left_over_quota": 0} == response.json()


async def test_a_tenant_is_told_nothing_of_other_tenants_activity(make_settings):
    """On a domain shared with other tenants and paused by their failures, a tenant's key
    reads what holds its job back and until when, but not why the domain is paused, and
    its attempts without the worker that ran them; the admin key reads both."""
    keys = {KEY_A: "tenant-a", KEY_B: "tenant-b", ADMIN: "*"}
    settings = make_settings(worker_enabled=False, api_keys=keys)
    async with running_app(settings) as (app, client):
        job = (await client.post("/jobs", json={"url": URL}, headers=auth(KEY_A))).json()
        await client.post("/jobs", json={"url": URL}, headers=auth(KEY_B))
        queue = queue_on(app.state.runtime.database, app.state.runtime.settings)
        now = datetime.now(UTC)
        (lease,) = await queue.claim("host:4242:a1b2", 1, now, 60)
        await queue.record([policy.handed_back(lease, now)], now)
        until = (now + timedelta(hours=1)).replace(microsecond=0)
        await queue.pause_domain("example.test", DomainPause(until, "HTTP 503, backoff 3600s"))

        seen = {}
        for name, key in [("tenant", KEY_A), ("admin", ADMIN)]:
            one = (await client.get(f"/jobs/{job['id']}", headers=auth(key))).json()
            listed = (await client.get("/jobs", headers=auth(key))).json()["items"]
            history = await client.get(f"/jobs/{job['id']}/attempts", headers=auth(key))
            mine = [item for item in listed if item["id"] == job["id"]]
            seen[name] = (
                one["blocked_by"],
                [item["blocked_by"] for item in mine],
                [attempt["worker_id"] for attempt in history.json()["items"]],
            )

    assert job["id"] == lease.id
    blocked = {"reason": "domain_paused", "until": until.isoformat().replace("+00:00", "Z")}
    assert {
        "tenant": (blocked | {"detail": None}, [blocked | {"detail": None}], [None]),
        "admin": (
            blocked | {"detail": "HTTP 503, backoff 3600s"},
            [blocked | {"detail": "HTTP 503, backoff 3600s"}],
            ["host:4242:a1b2"],
        ),
    } == seen


FOREIGN = [
    {"Origin": "https://evil.example"},
    {"Origin": "null"},
    {"Origin": "http://ingest.evil.example"},
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "cross-site", "Origin": "http://ingest"},
]


async def test_open_api_refuses_state_changes_from_another_site(make_settings):
    """No keys set: a POST or DELETE from another site's page (Origin or Sec-Fetch-Site) is a
    403 problem and changes nothing; the same origin, and reads, pass."""
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        job = (await client.post("/jobs", json={"url": URL})).json()
        refused = []
        for headers in FOREIGN:
            form = {"content-type": "application/x-www-form-urlencoded", **headers}
            for method, path in [
                ("POST", "/jobs"),
                ("POST", "/jobs/batch"),
                ("POST", f"/jobs/{job['id']}/cancel"),
                ("POST", f"/jobs/{job['id']}/retry"),
                ("POST", "/jobs/retry"),
                ("DELETE", f"/jobs/{job['id']}"),
                ("POST", "/domains/example.test/resume"),
                ("POST", "/dashboard/retry"),
            ]:
                response = await client.request(method, path, headers=form, content=b"a=1")
                refused.append(
                    (response.status_code, response.headers["content-type"])
                    != (403, "application/problem+json")
                )
        still = (await client.get(f"/jobs/{job['id']}", headers=FOREIGN[0])).json()
        same_site = {"Origin": "http://ingest", "Sec-Fetch-Site": "same-origin"}
        cancelled = await client.post(f"/jobs/{job['id']}/cancel", headers=same_site)
    assert [] == [i for i, passed in enumerate(refused) if passed]
    assert "pending" == still["status"]
    assert (200, "cancelled") == (cancelled.status_code, cancelled.json()["status"])


async def test_a_bearer_key_may_come_from_anywhere(client):
    """With keys set, a request that carries one as Bearer is a program's, not a browser's:
    another Origin does not matter. Without one it is 403 before the key would be asked."""
    foreign = {"Origin": "https://elsewhere.example", "Sec-Fetch-Site": "cross-site"}
    keyed = await client.post("/jobs", json={"url": URL}, headers=foreign | auth(KEY_A))
    keyless = await client.post("/jobs", json={"url": URL}, headers=foreign)
    assert (201, 403) == (keyed.status_code, keyless.status_code)
