"""Tenants' quotas: a submit that would pass INGEST_TENANT_MAX_PENDING answers 429 with
Retry-After and stores nothing, on both backends; other tenants are not held back."""

from tests.conftest import running_app, submit, wait_for_status

TENANT_KEYS = {"a" * 16: "shop", "b" * 16: "news"}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_a_tenant_at_its_pending_quota_is_refused(make_settings, web):
    settings = make_settings(worker_enabled=False, tenant_max_pending=3, api_keys=TENANT_KEYS)
    shop, news = bearer("a" * 16), bearer("b" * 16)
    async with running_app(settings) as (_, client):
        accepted = [
            (await client.post("/jobs", json={"url": web.url(f"/{i}")}, headers=shop)).status_code
            for i in range(3)
        ]
        refused = await client.post("/jobs", json={"url": web.url("/4")}, headers=shop)
        batch = await client.post(
            "/jobs/batch", json={"jobs": [{"url": web.url("/5")}]}, headers=shop
        )
        other = await client.post(
            "/jobs/batch",
            json={"jobs": [{"url": web.url(f"/n{i}")} for i in range(3)]},
            headers=news,
        )
        too_many = await client.post(
            "/jobs/batch",
            json={"jobs": [{"url": web.url(f"/m{i}")} for i in range(4)]},
            headers=news,
        )
        shops = (await client.get("/jobs", headers=shop)).json()["items"]
        newss = (await client.get("/jobs", headers=news)).json()["items"]
    assert [201, 201, 201] == accepted
    assert (429, 429, 201, 429) == tuple(r.status_code for r in (refused, batch, other, too_many))
    assert "30" == refused.headers["retry-after"]
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert (
        "tenant 'shop' has 3 pending jobs; 1 more would pass its limit of 3 "
        "(INGEST_TENANT_MAX_PENDING)"
    ) == refused.json()["detail"]
    assert (3, 3) == (len(shops), len(newss))


async def test_jobs_that_left_pending_free_the_quota(make_settings, web):
    """The quota counts pending jobs only: once the worker fetched them, the tenant submits
    again."""
    async with running_app(make_settings(tenant_max_pending=2)) as (_, client):
        for i in range(2):
            await wait_for_status(
                client, (await submit(client, web.url(f"/{i}")))["id"], "succeeded"
            )
        again = await client.post("/jobs", json={"url": web.url("/again")})
    assert 201 == again.status_code


async def test_a_key_over_its_rate_of_submits_is_refused(make_settings, web):
    """INGEST_KEY_SUBMITS_PER_SECOND: a key's bucket of 3 lets a single submit and a batch of
    5 through (the batch on the bucket's last tokens, into debt), then refuses its submits
    with 429 and a Retry-After of the debt's time, storing nothing; another key of the same
    tenant submits on."""
    keys = {"a" * 16: "shop", "c" * 16: "shop"}
    settings = make_settings(
        worker_enabled=False, key_submits_per_second=0.01, key_submit_burst=3, api_keys=keys
    )
    first, second = bearer("a" * 16), bearer("c" * 16)
    async with running_app(settings) as (_, client):
        single = await client.post("/jobs", json={"url": web.url("/1")}, headers=first)
        batch = await client.post(
            "/jobs/batch",
            json={"jobs": [{"url": web.url(f"/b{i}")} for i in range(5)]},
            headers=first,
        )
        refused = await client.post("/jobs", json={"url": web.url("/2")}, headers=first)
        other_key = await client.post("/jobs", json={"url": web.url("/3")}, headers=second)
        stored = (await client.get("/jobs", headers=first)).json()["items"]
    assert (201, 201, 429, 201) == tuple(r.status_code for r in (single, batch, refused, other_key))
    assert refused.headers["content-type"].startswith("application/problem+json")
    # 3 tokens - 1 - 5 = -3: 4 tokens to a whole one again, at 0.01 a second.
    assert 399 <= int(refused.headers["retry-after"]) <= 400
    assert "INGEST_KEY_SUBMITS_PER_SECOND" in refused.json()["detail"]
    assert 7 == len(stored)


async def test_stats_show_each_tenants_load_weight_and_the_quotas(make_settings, web):
    """GET /stats lists each tenant with jobs pending or running (the most pending first), its
    weight and the quotas; a tenant's key sees its own tenant only; the dashboard shows the
    same table, against the limits."""
    keys = {"a" * 16: "shop", "b" * 16: "news", "c" * 16: "*"}
    settings = make_settings(
        worker_enabled=False,
        api_keys=keys,
        tenant_weights="shop:3",
        tenant_max_pending=10,
        tenant_max_in_flight=4,
        key_submits_per_second=50,
    )
    shop, news, admin = bearer("a" * 16), bearer("b" * 16), bearer("c" * 16)
    async with running_app(settings) as (_, client):
        for i in range(3):
            await client.post("/jobs", json={"url": web.url(f"/s{i}")}, headers=shop)
        await client.post("/jobs", json={"url": web.url("/n")}, headers=news)
        everyone = (await client.get("/stats", headers=admin)).json()
        own = (await client.get("/stats", headers=news)).json()
        page = (await client.get("/dashboard", headers=admin)).text
    assert [
        {"tenant": "shop", "weight": 3, "pending": 3, "running": 0},
        {"tenant": "news", "weight": 1, "pending": 1, "running": 0},
    ] == everyone["tenants"]
    assert {
        "tenant_max_pending": 10,
        "tenant_max_in_flight": 4,
        "key_submits_per_second": 50.0,
        "key_submit_burst": 0,
    } == everyone["quotas"]
    assert [{"tenant": "news", "weight": 1, "pending": 1, "running": 0}] == own["tenants"]
    assert 'data-tenant="shop"' in page
    assert '<td class="num">3/10</td>' in page
    assert '<td class="num">0/4</td>' in page


async def test_a_tenant_filter_no_row_can_hold_shows_no_tenants(make_settings):
    """A NUL in the dashboard's tenant filter matches no tenant: the Tenants table is empty,
    not a server error (PostgreSQL refuses such a string rather than match nothing)."""
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        page = await client.get("/dashboard", params={"tenant": "a\x00b"})
    assert 200 == page.status_code
    assert 'id="tenants"' not in page.text
