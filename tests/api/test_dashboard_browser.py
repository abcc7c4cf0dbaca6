"""In a real browser: Debian's headless Chromium, driven by Playwright, against the app served
by uvicorn on 127.0.0.1 (a real server, in a thread, on a free port).

SQLite only, to keep the suite fast. Without /usr/bin/chromium these tests skip, and fail
instead when INGEST_TEST_REQUIRE_BROWSER is set (CI). Screenshots go to the test's tmp_path,
and the dashboard's also to the folder INGEST_TEST_SCREENSHOTS names, if set
(`INGEST_TEST_SCREENSHOTS=docs` refreshes the one README shows).
"""

import asyncio
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from playwright.sync_api import Browser, Page, expect, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from app.api.app import create_app
from app.clock import utc_now
from app.settings import Settings
from app.store.database import Database
from tests.api.test_dashboard import PAUSED_DOMAIN, Seeded, seed
from tests.support.activity import LIVE, Activity, seed_activity
from tests.support.webserver import Reply, ScriptedServer

T = TypeVar("T")

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium dials Google's hosts at every start.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def database_url(tmp_path: Path, sqlite_template: Path) -> str:
    """SQLite only: replaces conftest's fixture that runs every test on both backends."""
    path = tmp_path / "ingest.db"
    shutil.copy(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).is_file():
        message = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("INGEST_TEST_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """Run the app under uvicorn on 127.0.0.1 in a thread; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def only_the_service(page: Page, base_url: str) -> list[str]:
    """Abort every request that is not to the service; returns the list of those attempted."""
    attempted: list[str] = []
    service = urlsplit(base_url).netloc

    def route(route_) -> None:
        url = route_.request.url
        if urlsplit(url).netloc == service:
            route_.continue_()
        else:
            attempted.append(url)
            route_.abort()

    page.route("**/*", route)
    return attempted


def run_apart(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on a thread of its own: Playwright's sync API holds this thread's loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def screenshot(page: Page, directory: Path, name: str, publish: bool = False) -> None:
    page.screenshot(path=directory / name, full_page=True)
    published = os.environ.get("INGEST_TEST_SCREENSHOTS")
    if publish and published:
        page.screenshot(path=Path(published) / name, full_page=True)


def test_dashboard_retry_resume_and_history(
    browser: Browser,
    make_settings: Callable[..., Settings],
    web: ScriptedServer,
    tmp_path: Path,
):
    """Click Retry on the dead job: it is pending. Click Resume: the pause is gone."""
    seeded = run_apart(seed(make_settings, web))
    with serving(create_app(make_settings(worker_enabled=False))) as base:
        page = browser.new_page(viewport={"width": 1360, "height": 720})
        outside = only_the_service(page, base)
        page.goto(f"{base}/dashboard")
        dead_row = page.locator(f'#dead tr[data-job-id="{seeded.dead}"]')
        expect(dead_row).to_contain_text("HTTPStatus: HTTP 404")
        expect(page.locator(f'#waiting tr[data-job-id="{seeded.waiting}"]')).to_be_visible()
        paused_row = page.locator(f'#domains tr[data-domain="{PAUSED_DOMAIN}"]')
        expect(paused_row).to_contain_text("HTTP 429, Retry-After 600s")

        dead_row.get_by_role("button", name="Retry").click()
        expect(page.get_by_role("status")).to_have_text(f"Job {seeded.dead} is pending again.")
        expect(dead_row).to_have_count(0)
        expect(page.locator('[data-status="dead"] .n')).to_have_text("0")
        assert "pending" == httpx.get(f"{base}/jobs/{seeded.dead}").json()["status"]

        paused_row.get_by_role("button", name="Resume").click()
        expect(page.get_by_role("status")).to_have_text(f"Domain {PAUSED_DOMAIN} resumed.")
        expect(paused_row.get_by_role("button", name="Resume")).to_have_count(0)

        page.goto(f"{base}/dashboard/jobs/{seeded.dead}")
        expect(page.locator('[data-field="status"]')).to_have_text("pending")
        expect(page.locator("#attempts tbody tr")).to_have_count(1)
        expect(page.locator("#attempts tbody tr")).to_contain_text("HTTP 404")
        screenshot(page, tmp_path, "job.png")
    assert [] == outside


def seed_all(
    make_settings: Callable[..., Settings], web: ScriptedServer
) -> tuple[Seeded, Activity]:
    """The dead, waiting and paused jobs of `seed`, and a busy last hour with workers."""
    seeded = run_apart(seed(make_settings, web))

    async def busy_hour() -> Activity:
        database = Database(make_settings().database_url)
        try:
            return await seed_activity(database, utc_now())
        finally:
            await database.dispose()

    return seeded, run_apart(busy_hour())


def test_overview_at_1280_and_800_pixels(
    browser: Browser,
    make_settings: Callable[..., Settings],
    web: ScriptedServer,
    tmp_path: Path,
):
    """Workers, running jobs, domains and the chart with the hour's totals are shown; at
    800 px wide nothing scrolls sideways and every button is on screen."""
    seeded, activity = seed_all(make_settings, web)
    # A minute's lease: the seeded workers' heartbeats are seconds old, so they are live.
    with serving(create_app(make_settings(worker_enabled=False, lease_seconds=60))) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        outside = only_the_service(page, base)
        page.goto(f"{base}/dashboard")
        expect(page.locator("#workers tr.live")).to_have_count(len(LIVE))
        expect(page.locator("#running tbody tr")).to_have_count(len(activity.running))
        expect(page.locator(f'#domains tr[data-domain="{PAUSED_DOMAIN}"]')).to_be_visible()
        # The seed's worker made one attempt dead (404) and one retried (500).
        totals = activity.totals | {
            "retried": activity.totals["retried"] + 1,
            "dead": activity.totals["dead"] + 1,
        }
        for name, total in totals.items():
            expect(page.locator(f'[data-total="{name}"] strong')).to_have_text(str(total))
        expect(page.locator("#chart svg rect.b-succeeded").first).to_be_visible()
        assert 0 == page.locator('meta[http-equiv="refresh"]').count()
        screenshot(page, tmp_path, "dashboard.png", publish=True)

        page.set_viewport_size({"width": 800, "height": 900})
        page.goto(f"{base}/dashboard")
        assert 800 >= page.evaluate("document.documentElement.scrollWidth")
        offscreen = page.evaluate(
            """() => [...document.querySelectorAll('button, a.button')]
                .map(b => b.getBoundingClientRect())
                .filter(r => r.left < 0 || r.right > window.innerWidth).length"""
        )
        assert 0 == offscreen
        expect(
            page.locator(f'#dead tr[data-job-id="{seeded.dead}"] button', has_text="Retry")
        ).to_be_visible()
        screenshot(page, tmp_path, "dashboard-800.png")
    assert [] == outside


def test_delete_all_dead_goes_through_a_confirmation(
    browser: Browser, make_settings: Callable[..., Settings], web: ScriptedServer
):
    """The "Delete all dead" link opens a page that says how many; its button deletes them."""
    seeded = run_apart(seed(make_settings, web))
    with serving(create_app(make_settings(worker_enabled=False))) as base:
        page = browser.new_page()
        page.goto(f"{base}/dashboard")
        page.get_by_role("link", name="Delete all dead…").click()
        expect(page.locator("main")).to_contain_text("1 dead job will be deleted")
        page.get_by_role("button", name="Delete 1 dead job").click()
        expect(page.get_by_role("status")).to_have_text("Deleted 1 dead job(s).")
        expect(page.locator(f'#dead tr[data-job-id="{seeded.dead}"]')).to_have_count(0)
        assert 404 == httpx.get(f"{base}/jobs/{seeded.dead}").status_code


def test_swagger_ui_renders_with_no_network_beyond_the_service(
    browser: Browser, make_settings: Callable[..., Settings]
):
    """/docs lists every operation, and no request left 127.0.0.1."""
    app = create_app(make_settings(worker_enabled=False))
    operations = sum(len(path) for path in app.openapi()["paths"].values())
    with serving(app) as base:
        page = browser.new_page()
        outside = only_the_service(page, base)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{base}/docs")
        expect(page.locator(".opblock").first).to_be_visible()
        assert operations == page.locator(".opblock").count()
        assert ([], []) == (outside, errors)


def test_with_api_keys_a_browser_signs_in_with_an_admin_key(
    browser: Browser, make_settings: Callable[..., Settings], web: ScriptedServer
):
    """Keys set: no key or a tenant's key is refused; the admin key opens it and posts."""
    admin, shop = "admin-key-0123456789", "shop-key-0123456789"
    seeded = run_apart(seed(make_settings, web))
    settings = make_settings(worker_enabled=False, api_keys=f"{admin}:*,{shop}:shop")
    with serving(create_app(settings)) as base:
        # Without credentials, headless Chromium gives up on the Basic challenge.
        with pytest.raises(PlaywrightError, match="ERR_INVALID_AUTH_CREDENTIALS"):
            browser.new_context().new_page().goto(f"{base}/dashboard")
        challenge = httpx.get(f"{base}/dashboard")
        tenant = browser.new_context(http_credentials={"username": "ops", "password": shop})
        refused = tenant.new_page().goto(f"{base}/dashboard")
        operator = browser.new_context(http_credentials={"username": "ops", "password": admin})
        page = operator.new_page()
        signed_in = page.goto(f"{base}/dashboard")
        page.locator(f'tr[data-job-id="{seeded.dead}"]').get_by_role("button", name="Retry").click()
        expect(page.get_by_role("status")).to_have_text(f"Job {seeded.dead} is pending again.")
    assert 401 == challenge.status_code
    assert challenge.headers["www-authenticate"].startswith("Basic ")
    assert (401, 200) == (refused and refused.status, signed_in and signed_in.status)


def test_another_site_cannot_frame_the_dashboard(
    browser: Browser, make_settings: Callable[..., Settings], web: ScriptedServer
):
    """A page of another origin that frames the dashboard gets no dashboard in its frame:
    Chromium refuses to render it (frame-ancestors 'none')."""
    with serving(create_app(make_settings(worker_enabled=False))) as base:
        framing = (
            f'<html><body><iframe name="framed" src="{base}/dashboard"></iframe></body></html>'
        )
        attacker = web.script("/framing", Reply(body=framing.encode()))
        page = browser.new_page()
        console: list[str] = []
        page.on("console", lambda message: console.append(message.text))
        page.goto(attacker)  # returns once the page and its frame have loaded
        framed = page.frame(name="framed")
        assert framed is not None
        assert 0 == framed.locator("#dead").count()
        assert not framed.url.startswith(base)
        assert any("frame-ancestors 'none'" in line for line in console)
