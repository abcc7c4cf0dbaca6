"""The dashboard's views and buttons over HTTP, on both backends: workers, running jobs,
domains and the chart on the overview; cards and lists that follow the filter; search;
refresh only when asked; cancel, delete, the confirmed bulk actions, "Run now" on a job
whose domain is paused; a job's content versions and its Refresh button."""

import base64
import re
from datetime import UTC, datetime, timedelta
from html import unescape

from app.clock import utc_now
from app.model import DeadReason, DomainPause, ErrorKind, Failure, MarkDead, NewJob
from app.runtime import Runtime
from tests.api.test_dashboard import PAUSED_DOMAIN, banner, seed
from tests.conftest import eventually, running_app, wait_for_status
from tests.support.activity import DOMAINS, GONE, LIVE, STOPPED, seed_activity
from tests.support.outcomes import failed
from tests.support.stores import queue_on
from tests.support.webserver import Reply, ScriptedServer


async def dead_job(runtime: Runtime, domain: str) -> str:
    """A job of `domain` made dead through the store, as a worker would (fatal 404)."""
    (job,) = await runtime.jobs.submit([NewJob(f"https://{domain}/", domain, "default", 4)])
    queue = queue_on(runtime.database, runtime.settings)
    (lease,) = await queue.claim("w", 1, utc_now(), 60)
    fatal = Failure(ErrorKind.FATAL, "HTTPStatus", "HTTP 404", 404)
    await queue.record([failed(lease, MarkDead(DeadReason.FATAL, fatal))], utc_now())
    return job.id


def rows(page: str, section: str) -> list[str]:
    """The `data-job-id`, `data-worker` or `data-domain` of each row of a section."""
    part = page.split(f'<section id="{section}"', 1)[1].split("</section>", 1)[0]
    return re.findall(r'<tr data-(?:job-id|worker|domain)="([^"]+)"', part)


async def test_overview_shows_workers_running_jobs_domains_and_the_hour(make_settings):
    """Live, gone and stopped workers; the jobs running on them; the domains; the chart's
    totals as recorded."""
    async with running_app(make_settings(worker_enabled=False, lease_seconds=60)) as (app, client):
        activity = await seed_activity(app.state.runtime.database, utc_now())
        page = (await client.get("/dashboard")).text
    assert [*LIVE, STOPPED, GONE] == rows(page, "workers")
    assert re.search(rf'data-worker="{GONE}" class="gone">', page)
    assert {lease.id for lease in activity.running} == set(rows(page, "running"))
    assert set(DOMAINS) <= set(rows(page, "domains"))
    for name, total in activity.totals.items():
        assert f'data-total="{name}">{name} <strong>{total}</strong>' in page
    assert "<svg " in page and 'class="lag"' in page


async def test_refresh_only_when_asked(client):
    """No timed reload by default, which would wipe what an operator types; ?refresh=5
    reloads the same view every 5 s and the filter keeps it; under 2 s is refused."""
    plain = (await client.get("/dashboard", params={"domain": "a.test"})).text
    asked = (await client.get("/dashboard", params={"domain": "a.test", "refresh": 5})).text
    too_fast = await client.get("/dashboard", params={"refresh": 1})
    assert 'http-equiv="refresh"' not in plain
    assert (
        '<meta http-equiv="refresh" content="5; url=/dashboard?domain=a.test&amp;refresh=5">'
        in (asked)
    )
    assert '<input type="hidden" name="refresh" value="5">' in asked
    assert 422 == too_fast.status_code


async def test_cards_and_lists_follow_the_domain_and_tenant_filters(make_settings, web):
    """Filtered by domain, the dead card counts that domain's dead jobs (none of the paused
    domain); by tenant, only that tenant's jobs are listed."""
    seeded = await seed(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        everything = (await client.get("/dashboard")).text
        paused = (await client.get("/dashboard", params={"domain": PAUSED_DOMAIN})).text
        other = (await client.get("/dashboard", params={"tenant": "elsewhere"})).text
        mine = (await client.get("/dashboard", params={"tenant": "default"})).text
    dead_card = '<li class="s-dead" data-status="dead"><span class="n">{}</span>'
    assert dead_card.format(1) in everything
    assert dead_card.format(0) in paused
    assert f'aria-label="Jobs by status of {PAUSED_DOMAIN}"' in paused
    assert [seeded.dead] == rows(mine, "dead")
    assert [] == rows(other, "dead")


async def test_search_by_id_start_or_url_part(make_settings, web):
    """An id's first characters, or part of a URL in any case, find the job; LIKE's
    wildcards are taken as text."""
    seeded = await seed(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):

        async def found(text: str) -> list[str]:
            return rows((await client.get("/dashboard", params={"q": text})).text, "found")

        by_id = await found(seeded.dead[:-4].upper())
        by_url = await found("/GON")
        wildcard = await found("%")
    assert [seeded.dead] == by_id
    assert [seeded.dead] == by_url
    assert [] == wildcard


async def test_run_now_on_a_paused_domain_says_it_waits_and_keeps_it_listed(make_settings):
    """A job waiting for its retry_after on a domain paused longer: "Run now" clears the
    retry_after, says the job still waits for the pause, and the job stays in the list."""
    later = datetime.now(UTC) + timedelta(minutes=5)
    async with running_app(make_settings(worker_enabled=False)) as (app, client):
        body = {"url": "https://slow.example/a", "not_before": later.isoformat()}
        job = (await client.post("/jobs", json=body)).json()
        until = later + timedelta(minutes=5)
        runtime = app.state.runtime
        pause = DomainPause(until, "HTTP 429, Retry-After 600s")
        await queue_on(runtime.database, runtime.settings).pause_domain("slow.example", pause)
        response = await client.post(f"/dashboard/jobs/{job['id']}/retry")
        after = (await client.get(f"/jobs/{job['id']}")).json()
        page = (await client.get("/dashboard")).text
        shown = await banner(client, response)
    assert (
        f"Job {job['id']} still waits: its domain slow.example is paused until "
        f"{until:%Y-%m-%d %H:%M:%S} UTC (HTTP 429, Retry-After 600s)."
    ) == shown
    assert (None, "domain_paused") == (after["retry_after"], after["blocked_by"]["reason"])
    assert [job["id"]] == rows(page, "waiting")


async def test_run_now_on_a_job_nothing_else_holds_makes_it_due(make_settings):
    """A job waiting for its retry_after only: "Run now" says it is due now."""
    later = datetime.now(UTC) + timedelta(minutes=5)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        body = {"url": "https://a.example/", "not_before": later.isoformat()}
        job = (await client.post("/jobs", json=body)).json()
        response = await client.post(f"/dashboard/jobs/{job['id']}/retry")
        shown = await banner(client, response)
    assert f"Job {job['id']} is due now." == shown


async def test_cancel_and_delete_buttons(make_settings, web):
    """Cancel a waiting job; delete a dead one; deleting a pending job is refused, said."""
    seeded = await seed(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        cancelled = await client.post(f"/dashboard/jobs/{seeded.waiting}/cancel")
        deleted = await client.post(f"/dashboard/jobs/{seeded.dead}/delete")
        pending = (await client.get("/jobs", params={"status": "pending"})).json()["items"][0]
        refused = await client.post(f"/dashboard/jobs/{pending['id']}/delete")
        statuses = [
            (await client.get(f"/jobs/{job_id}")).status_code
            for job_id in (seeded.waiting, seeded.dead)
        ]
        waiting = (await client.get(f"/jobs/{seeded.waiting}")).json()["status"]
        shown = [await banner(client, answer) for answer in (cancelled, deleted, refused)]
    assert [
        f"Job {seeded.waiting} is cancelled.",
        f"Job {seeded.dead} is deleted.",
        f"Not deleted: job {pending['id']} is pending; cannot delete.",
    ] == shown
    assert ([200, 404], "cancelled") == (statuses, waiting)


async def test_delete_all_dead_asks_first_then_deletes_those_of_the_filter(make_settings, web):
    """The button opens a confirmation that counts the dead jobs of the filter; its button
    deletes them, and only them."""
    seeded = await seed(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (app, client):
        other_id = await dead_job(app.state.runtime, "other.example")
        overview = (await client.get("/dashboard", params={"domain": seeded.local_domain})).text
        link = re.search(r'href="(/dashboard/confirm/delete-dead[^"]*)"', overview)
        assert link is not None
        confirm = (await client.get(unescape(link[1]))).text
        form = re.search(r'action="(/dashboard/delete[^"]*)"', confirm)
        assert form is not None
        action = unescape(form[1])
        done = await client.post(action)
        shown = await banner(client, done)
        left = [
            (await client.get(f"/jobs/{job_id}")).status_code for job_id in (seeded.dead, other_id)
        ]
    assert f"Delete every dead job of {seeded.local_domain}?" in confirm
    assert f"1 dead job of {seeded.local_domain}" in confirm
    assert f"/dashboard/delete?domain={seeded.local_domain.replace(':', '%3A')}" == action
    assert f"Deleted 1 dead job(s) of {seeded.local_domain}." == shown
    assert [404, 200] == left


async def test_retry_all_dead_asks_first(make_settings, web):
    """The confirmation of "Retry all dead" says how many and posts to the bulk retry."""
    await seed(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        confirm = (await client.get("/dashboard/confirm/retry-dead")).text
        none = (await client.get("/dashboard/confirm/retry-dead", params={"tenant": "x"})).text
    assert 'action="/dashboard/retry"' in confirm
    assert "Retry 1 dead job</button>" in confirm
    assert "No dead job of tenant x: nothing to do." in none
    assert "/dashboard/retry" not in none


async def test_new_buttons_refuse_cross_site_posts(client):
    """Cancel, delete and delete-all from another site are 403, like every dashboard POST."""
    foreign = {"Origin": "https://evil.example"}
    job = "0172ff91-2bc7-4277-8c54-cfd050bbf331"
    statuses = [
        (await client.post(path, headers=foreign)).status_code
        for path in (
            f"/dashboard/jobs/{job}/cancel",
            f"/dashboard/jobs/{job}/delete",
            "/dashboard/delete",
        )
    ]
    assert [403, 403, 403] == statuses


async def test_recent_successes_link_their_content_served_sandboxed(make_settings, web):
    """A succeeded job is listed with links to its body and text, which the dashboard serves
    (under its own sign-in) with the API's sandboxing headers."""
    page_url = web.script("/ok", Reply(200, body=b"<title>T</title><main>Body text</main>"))
    admin = "admin-key-0123456789"
    settings = make_settings(api_keys=f"{admin}:*")
    headers = {"Authorization": f"Bearer {admin}"}
    async with running_app(settings) as (_, client):
        job = (await client.post("/jobs", json={"url": page_url}, headers=headers)).json()

        async def done() -> bool:
            answer = await client.get(f"/jobs/{job['id']}", headers=headers)
            return answer.json()["status"] == "succeeded"

        await eventually(done)
        page = (await client.get("/dashboard", headers=headers)).text
        basic = {"Authorization": "Basic " + base64.b64encode(f"ops:{admin}".encode()).decode()}
        body = await client.get(f"/dashboard/jobs/{job['id']}/content", headers=basic)
        text = await client.get(f"/dashboard/jobs/{job['id']}/text", headers=basic)
    assert [job["id"]] == rows(page, "succeeded")
    assert f'href="/dashboard/jobs/{job["id"]}/content"' in page
    # Two policies, both enforced: the content's sandbox, and no framing as on every answer.
    assert (b"<title>T</title><main>Body text</main>", ["sandbox", "frame-ancestors 'none'"]) == (
        body.content,
        body.headers.get_list("content-security-policy"),
    )
    assert "Body text" in text.text


def versioned_page(title: str, text: str) -> bytes:
    body = f"<html><head><title>{title}</title></head><body><article><p>{text}</p></article>"
    return (body + "</body></html>").encode()


async def versioned_job(make_settings, web: ScriptedServer) -> str:
    """A job refreshed hourly whose refresh found its text changed: version 2 ("Second",
    "new words") after version 1 ("First", "old words"); the worker stopped after."""
    url = web.script(
        "/p",
        Reply(200, versioned_page("First", "old words")),
        Reply(200, versioned_page("Second", "new words")),
    )
    async with running_app(make_settings()) as (_, client):
        job = (await client.post("/jobs", json={"url": url, "refresh_every": 3600})).json()
        await wait_for_status(client, job["id"], "succeeded")
        assert 200 == (await client.post(f"/jobs/{job['id']}/refresh")).status_code
        done = await wait_for_status(client, job["id"], "succeeded")
    assert 2 == done["version"]
    return job["id"]


async def test_job_page_lists_its_versions_with_text_and_diff_links(make_settings, web):
    """The job page says its version, when it changed and when it is next fetched; lists
    its versions newest first, each linking its text (served under the dashboard's sign-in)
    and, but the oldest, the diff from the one before; and has a Refresh button."""
    job_id = await versioned_job(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        page = (await client.get(f"/dashboard/jobs/{job_id}")).text
        old = await client.get(f"/dashboard/jobs/{job_id}/versions/1/text")
        diff = await client.get(f"/dashboard/jobs/{job_id}/versions/2/text", params={"diff": 1})
        unkept = await client.get(f"/dashboard/jobs/{job_id}/versions/3/text")
    table = page.split('<table id="versions">', 1)[1].split("</table>", 1)[0]
    versions = f"/dashboard/jobs/{job_id}/versions"
    assert ["2", "1"] == re.findall(r'<tr data-version="(\d+)">', table)
    assert [f"{versions}/2/text", f"{versions}/2/text?diff=1", f"{versions}/1/text"] == (
        re.findall(r'href="([^"]+)"', table)
    )
    assert table.index("Second") < table.index("First")
    moment = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
    assert re.search(rf'<dd data-field="version">2, changed {moment} <span', page)
    assert re.search(
        rf'<dd data-field="refreshes">every 3600 s, next at {moment} '
        r'<span class="muted">\(in (1h|59m \d+s)\)</span>',
        page,
    ), page
    assert f'action="/dashboard/jobs/{job_id}/refresh?back=job"' in page
    assert (200, "old words") == (old.status_code, old.text)
    assert diff.headers["content-type"].startswith("text/x-diff")
    assert "-old words" in diff.text and "+new words" in diff.text
    assert 404 == unkept.status_code


async def test_refresh_button_requeues_the_job_keeping_its_content(make_settings, web):
    """POST /dashboard/jobs/{id}/refresh: the succeeded job is pending with a fresh budget,
    its version and text kept; back on its page, which says so and has no Refresh button
    now. Pressed again, it is refused: the job is pending."""
    job_id = await versioned_job(make_settings, web)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        response = await client.post(f"/dashboard/jobs/{job_id}/refresh", params={"back": "job"})
        job = (await client.get(f"/jobs/{job_id}")).json()
        text = (await client.get(f"/jobs/{job_id}/text")).text
        page = (await client.get(response.headers["location"])).text
        shown = await banner(client, response)
        again = await banner(
            client,
            await client.post(f"/dashboard/jobs/{job_id}/refresh", params={"back": "job"}),
        )
    assert response.headers["location"].startswith(f"/dashboard/jobs/{job_id}?notice=refreshed")
    assert f"Job {job_id} is pending again to refresh its page; its content is kept." == shown
    assert ("pending", 0, 2) == (job["status"], job["attempts"], job["version"])
    assert "new words" == text
    assert f"/dashboard/jobs/{job_id}/refresh" not in page
    assert f"Not refreshed: job {job_id} is pending; cannot refresh." == again


async def test_refresh_a_dead_job_and_an_unknown_one(make_settings):
    """A dead job's page has a Refresh button and no versions; pressed from the overview,
    the job is pending and the overview says so. An unknown id is said, not an error."""
    unknown = "0172ff91-2bc7-4277-8c54-cfd050bbf331"
    async with running_app(make_settings(worker_enabled=False)) as (app, client):
        dead = await dead_job(app.state.runtime, "gone.example")
        page = (await client.get(f"/dashboard/jobs/{dead}")).text
        response = await client.post(f"/dashboard/jobs/{dead}/refresh")
        status = (await client.get(f"/jobs/{dead}")).json()["status"]
        shown = [
            await banner(client, answer)
            for answer in (response, await client.post(f"/dashboard/jobs/{unknown}/refresh"))
        ]
    assert f'action="/dashboard/jobs/{dead}/refresh?back=job"' in page
    assert 'id="versions"' not in page
    assert response.headers["location"].startswith("/dashboard?notice=refreshed")
    assert "pending" == status
    assert [
        f"Job {dead} is pending again to refresh its page; its content is kept.",
        f"No job {unknown}.",
    ] == shown


async def test_refresh_refuses_cross_site_posts(client):
    """The Refresh button from another site is 403, like every dashboard POST."""
    job = "0172ff91-2bc7-4277-8c54-cfd050bbf331"
    foreign = {"Origin": "https://evil.example"}
    response = await client.post(f"/dashboard/jobs/{job}/refresh", headers=foreign)
    assert 403 == response.status_code
