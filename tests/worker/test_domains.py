"""Domain- and tenant-aware scheduling end to end, against real local servers."""

import logging
from datetime import timedelta

import pytest

from app.clock import utc_now
from app.fetch.urls import job_domain
from app.model import DomainPause
from tests.conftest import eventually, running_app, submit, wait_for_status
from tests.support.processes import READY, worker_process
from tests.support.stores import queue_on
from tests.support.webserver import Reply, ScriptedServer


@pytest.fixture
def other_web():
    """A second server: another port is another domain."""
    with ScriptedServer() as server:
        yield server


async def test_rate_limit_pauses_the_domain_and_nothing_else(make_settings, web, other_web, caplog):
    """A 429 with Retry-After pauses its domain: its other jobs wait without spending
    attempts, other domains flow, and the paused jobs run after the pause."""
    caplog.set_level(logging.WARNING, logger="ingest.worker")
    first = web.script("/first", Reply(429, headers={"Retry-After": "3"}), Reply(200))
    async with running_app(make_settings()) as (_, client):
        job = await submit(client, first)

        async def deferred() -> bool:
            return (await client.get(f"/jobs/{job['id']}")).json()["deferrals"] == 1

        await eventually(deferred)
        same = [await submit(client, web.url(f"/same/{i}")) for i in range(3)]
        # Read while the pause surely holds: a busy machine may take a while over the rest.
        domains = {d["domain"]: d for d in (await client.get("/domains")).json()["items"]}
        others = [await submit(client, other_web.url(f"/other/{i}")) for i in range(3)]
        for other in others:
            await wait_for_status(client, other["id"], "succeeded", timeout=1.5)
        waiting = [(await client.get(f"/jobs/{j['id']}")).json() for j in same]
        for j in same:
            await wait_for_status(client, j["id"], "succeeded", timeout=10)
    domain = job["domain"]
    assert [("pending", 0)] * 3 == [(j["status"], j["attempts"]) for j in waiting]
    assert domains[domain]["paused_until"] is not None
    assert domains[domain]["pending"] >= 3
    limited_at = web.hits["/first"][0]
    assert all(web.hits[f"/same/{i}"][0] - limited_at >= 2.9 for i in range(3))
    assert any(
        f"domain {domain} paused until" in r.getMessage()
        and r.getMessage().endswith("(HTTP 429, Retry-After 3s), after 1 consecutive failure")
        for r in caplog.records
    )


async def test_resume_clears_a_pause(make_settings, web):
    """POST /domains/{domain}/resume lets a paused domain's jobs run at once, and ends its
    failure streak: the next failure counts as the first."""
    url = web.script("/long", Reply(429, headers={"Retry-After": "3600"}), Reply(200))
    async with running_app(make_settings()) as (_, client):
        job = await submit(client, url)

        async def paused() -> bool:
            items = (await client.get("/domains")).json()["items"]
            return any(d["paused_until"] for d in items)

        await eventually(paused)
        await submit(client, web.url("/after"))
        resumed = await client.post(f"/domains/{job['domain']}/resume")
        await eventually(lambda: _hit(web, "/after"), timeout=3)
        unknown = await client.post("/domains/nowhere.test/resume")
    assert 200 == resumed.status_code
    assert (None, None, 0) == tuple(
        resumed.json()[k] for k in ("paused_until", "pause_reason", "consecutive_failures")
    )
    assert 404 == unknown.status_code


async def _hit(web, path: str) -> bool:
    return web.count(path) > 0


async def test_in_flight_limit_holds_across_two_worker_processes(
    database_url, make_settings, web, tmp_path
):
    """Two worker processes never run more than INGEST_DOMAIN_MAX_IN_FLIGHT fetches on one
    domain at once (the server counts concurrent requests)."""
    for i in range(24):
        web.script(f"/slow/{i}", Reply(delay=0.3))
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        body = {"jobs": [{"url": web.url(f"/slow/{i}")} for i in range(24)]}
        assert 201 == (await client.post("/jobs/batch", json=body)).status_code
        limits = {"domain_max_in_flight": 3, "worker_concurrency": 8, "poll_interval_seconds": 0.1}
        with (
            worker_process(tmp_path / "a.log", database_url, **limits) as a,
            worker_process(tmp_path / "b.log", database_url, **limits) as b,
        ):
            await a.wait_for_line(READY)
            await b.wait_for_line(READY)

            async def drained() -> bool:
                return (await client.get("/stats")).json()["counts"]["succeeded"] == 24

            await eventually(drained, timeout=60, interval=0.2)
        domains = (await client.get("/domains")).json()["items"]
    assert 3 == web.max_in_flight
    assert [] == domains, "every fetch slot was given back (in_flight 0, nothing to show)"


async def test_a_small_tenant_is_not_starved(make_settings, web):
    """With one slot, tenant B's 5 jobs submitted after tenant A's 100 finish before A's
    10th. Their domain is paused while both submit, so the claims find both backlogs: the
    worker runs beside the API, and would otherwise start A's first jobs between the two
    submits (as it should)."""
    settings = make_settings(worker_concurrency=1, domain_max_in_flight=100)
    async with running_app(settings) as (app, client):
        domain = job_domain(web.url("/"))
        hold = DomainPause(utc_now() + timedelta(hours=1), "held while both tenants submit")
        await queue_on(app.state.runtime.database, settings).pause_domain(domain, hold)
        big = {"jobs": [{"url": web.url(f"/a/{i}"), "tenant": "a"} for i in range(100)]}
        small = {"jobs": [{"url": web.url(f"/b/{i}"), "tenant": "b"} for i in range(5)]}
        assert 201 == (await client.post("/jobs/batch", json=big)).status_code
        assert 201 == (await client.post("/jobs/batch", json=small)).status_code
        assert 200 == (await client.post(f"/domains/{domain}/resume")).status_code
        await eventually(lambda: _all_done(web, "/b/", 5), timeout=10)
    order = sorted(
        (times[0], path) for path, times in web.hits.items() if path.startswith(("/a/", "/b/"))
    )
    paths = [path for _, path in order]
    last_b = max(paths.index(f"/b/{i}") for i in range(5))
    a_before = [p for p in paths[:last_b] if p.startswith("/a/")]
    assert len(a_before) < 10, paths[: last_b + 1]


async def _all_done(web, prefix: str, n: int) -> bool:
    return all(web.count(f"{prefix}{i}") for i in range(n))


# Tenants a00..a39 sort before "z" and have never been served: a claim that looked only at
# the least recently served tenants with pending work would look at them alone.
BLOCKED_TENANTS = [f"a{i:02}" for i in range(40)]


async def _blocked_then_due(client, server: ScriptedServer, web: ScriptedServer, **fields) -> dict:
    """40 tenants with one job each on `server` (with `fields`), then tenant z's job on `web`;
    z's job must succeed soon, and none of the others may have been fetched."""
    blocked = [
        {"url": server.url(f"/blocked/{i}"), "tenant": tenant, **fields}
        for i, tenant in enumerate(BLOCKED_TENANTS)
    ]
    assert 201 == (await client.post("/jobs/batch", json={"jobs": blocked})).status_code
    due = await submit(client, web.url("/due"), tenant="z")
    return await wait_for_status(client, due["id"], "succeeded", timeout=20)


def _small_worker(make_settings, **overrides):
    return make_settings(worker_concurrency=2, domain_max_in_flight=1, **overrides)


async def test_tenants_with_jobs_not_yet_due_do_not_hold_up_a_due_job(make_settings, web):
    """More tenants than slots whose only jobs are due next century do not keep a later
    tenant's due job from running."""
    async with running_app(_small_worker(make_settings)) as (_, client):
        await _blocked_then_due(client, web, web, not_before="2100-01-01T00:00:00Z")
    assert 0 == sum(web.count(f"/blocked/{i}") for i in range(40))


async def test_tenants_on_a_paused_domain_do_not_hold_up_a_due_job(make_settings, web, other_web):
    """More tenants than slots whose only jobs are on a domain paused for an hour (a 429
    with Retry-After) do not keep a later tenant's job on another domain from running."""
    limited = other_web.script("/limited", Reply(429, headers={"Retry-After": "3600"}))
    async with running_app(_small_worker(make_settings)) as (_, client):
        await submit(client, limited, tenant="pauser")

        async def paused() -> bool:
            items = (await client.get("/domains")).json()["items"]
            return any(d["paused_until"] for d in items)

        await eventually(paused)
        await _blocked_then_due(client, other_web, web)
    assert 0 == sum(other_web.count(f"/blocked/{i}") for i in range(40))


async def test_tenants_on_a_busy_domain_do_not_hold_up_a_due_job(make_settings, web, other_web):
    """More tenants than slots whose only jobs are on a domain at its in-flight limit (a
    slow fetch holds its one slot) do not keep a later tenant's job on another domain from
    running in the worker's other slot."""
    slow = other_web.script("/slow", Reply(delay=30))
    patient = {"read_timeout_seconds": 60, "fetch_timeout_seconds": 60}  # outlast the test
    async with running_app(_small_worker(make_settings, **patient)) as (_, client):
        await submit(client, slow, tenant="holder")
        await eventually(lambda: _hit(other_web, "/slow"))
        await _blocked_then_due(client, other_web, web)
    assert 0 == sum(other_web.count(f"/blocked/{i}") for i in range(40))


BAD_LOCATIONS = (
    "http://[::1",
    "http://0177.0.0.2:99999999/",  # octal IPv4 (httpx refuses it) and a port past 65535
    "http://0x7f.1:99999999/",  # hex IPv4, which parses, and a port past 65535
    "http://2130706433:0/",
    "ftp://127.0.0.1/",
    "http://a..b/",
    "http://1.2.3.4.5/",
    "http://user:pass@127.0.0.1/",
)


async def test_a_redirect_to_no_url_is_fatal_and_not_the_domains_fault(make_settings, web):
    """A 302 whose Location is no URL to fetch (it does not parse; a port past 65535, in
    any IPv4 form; another scheme; a host that is no name or address; userinfo) kills its
    job at once, fatal InvalidRedirect, after one request. It is the page's fault, not its
    domain's: after a 500 had started the domain's failure streak, the streak stays at 1
    and the domain is not paused (at a threshold of 2 failures)."""
    down = web.script("/down", Reply(500))
    bad = [
        web.script(f"/bad/{i}", Reply(302, headers={"Location": location}))
        for i, location in enumerate(BAD_LOCATIONS)
    ]
    async with running_app(make_settings(domain_failure_threshold=2)) as (_, client):
        first = await submit(client, down, max_attempts=1)
        await wait_for_status(client, first["id"], "dead")
        jobs = [await submit(client, url) for url in bad]
        dead = [await wait_for_status(client, job["id"], "dead") for job in jobs]
        domains = {d["domain"]: d for d in (await client.get("/domains")).json()["items"]}
    domain = domains[jobs[0]["domain"]]
    assert [("fatal", 1, 1, "fatal", "InvalidRedirect")] * len(bad) == [
        (
            job["dead_reason"],
            job["attempts"],
            web.count(f"/bad/{i}"),
            job["last_error"]["kind"],
            job["last_error"]["type"],
        )
        for i, job in enumerate(dead)
    ]
    starts = [f"HTTP 302 to Location {location!r}, which is no URL" for location in BAD_LOCATIONS]
    assert starts == [
        job["last_error"]["message"][: len(start)] for start, job in zip(starts, dead, strict=True)
    ]
    assert (1, None) == (domain["consecutive_failures"], domain["paused_until"])


async def test_a_redirect_to_a_legacy_ipv4_form_reaches_the_address_it_names(make_settings, web):
    """A Location whose host is 127.0.0.1 as one decimal number, or in hex, is read as the
    guard reads a submitted one: the address, checked and connected to as such."""
    port = web.base_url.rsplit(":", 1)[1]
    web.script("/ok", Reply(200))
    decimal = web.script(
        "/decimal", Reply(302, headers={"Location": f"http://2130706433:{port}/ok"})
    )
    hexed = web.script("/hex", Reply(302, headers={"Location": f"http://0x7f.1:{port}/ok"}))
    async with running_app(make_settings()) as (_, client):
        jobs = [await submit(client, url) for url in (decimal, hexed)]
        done = [await wait_for_status(client, job["id"], "succeeded") for job in jobs]
    assert [f"http://2130706433:{port}/ok", f"http://0x7f.1:{port}/ok"] == [
        job["result"]["final_url"] for job in done
    ]
    assert 2 == web.count("/ok")
