"""End to end against hostile servers on 127.0.0.1, with the SSRF guard on, on both backends.

The guard is on in these tests (conftest turns it off elsewhere). The resolver is a test
double: `public.test` is the one name allowed (INGEST_ALLOWED_HOSTS) and resolves to the
hostile server on 127.0.0.1; `sneaky.test` resolves to 127.0.0.1 too but is not allowed, as
a name planted in DNS to reach the inside would not be.
"""

import asyncio
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from ipaddress import ip_address
from pathlib import Path

import httpx
import pytest

from app.api.app import create_app
from app.fetch import guard
from app.fetch.fetcher import Fetcher
from app.model import Failure
from app.part_settings import PartSettings, destinations_of
from app.settings import Settings
from tests.conftest import running_app, wait_for_status
from tests.support.hostile import PAGE, HostileServer

DNS = {
    "public.test": ["127.0.0.1"],
    "sneaky.test": ["127.0.0.1"],
    "mixed.test": ["93.184.216.34", "127.0.0.1"],
}
MiB = 1024 * 1024


async def resolver(host: str) -> list:
    return [ip_address(address) for address in DNS[host]]


@asynccontextmanager
async def guarded_app(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The app, its worker resolving names with the test double, and a client for it."""
    app = create_app(settings, resolver=resolver)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ingest") as client:
            yield client


def guarded(make_settings: Callable[..., Settings], **overrides: object) -> Settings:
    values: dict[str, object] = {
        "allow_private_networks": False,
        "allowed_hosts": "public.test",
        "max_body_bytes": MiB,
        "max_attempts": 1,
        "max_redirects": 3,
        "connect_timeout_seconds": 1.0,
        "fetch_timeout_seconds": 1.0,
        "worker_concurrency": 16,
    }
    return make_settings(**(values | overrides))


async def submit(client: httpx.AsyncClient, url: str) -> str:
    response = await client.post("/jobs", json={"url": url})
    assert 201 == response.status_code, response.text
    return response.json()["id"]


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class PeakRSS:
    """Samples this process's RSS every 10 ms in a thread; `growth` is peak minus start."""

    def __init__(self) -> None:
        self.start = self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, rss_bytes())

    def __enter__(self) -> "PeakRSS":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def growth(self) -> int:
        return self.peak - self.start


async def test_each_hostile_server_ends_in_its_own_failure(make_settings):
    """Endless, dripping, bomb, loop, huge-header, bad-JSON and binary answers each kill their
    job with the right error; the good page succeeds; the service still answers, memory held."""
    expected = {
        "/page": ("succeeded", None, None),
        "/endless": ("dead", "fatal", "BodyTooLarge"),
        "/drip": ("dead", "retries_exhausted", "FetchTimeout"),
        "/bomb": ("dead", "fatal", "BodyTooLarge"),
        "/loop": ("dead", "fatal", "TooManyRedirects"),
        "/huge-headers": ("dead", "fatal", "HeadersTooLarge"),
        "/bad-json": ("dead", "fatal", "UnparseableContent"),
        "/binary": ("dead", "fatal", "UnsupportedContentType"),
    }
    with HostileServer() as server, PeakRSS() as rss:
        async with guarded_app(guarded(make_settings)) as client:
            ids = {path: await submit(client, server.url(path, "public.test")) for path in expected}
            actual = {}
            for path, job_id in ids.items():
                job = await wait_for_status(client, job_id, "succeeded", "dead", timeout=15)
                error = job["last_error"] and job["last_error"]["type"]
                actual[path] = (job["status"], job["dead_reason"], error)
            health = await client.get("/healthz")
    assert expected == actual
    assert (200, 4) == (health.status_code, server.hits["/loop"])  # max_redirects + 1 requests
    assert rss.growth < 100 * MiB, f"RSS grew {rss.growth / MiB:.0f} MiB"


async def test_private_targets_are_never_reached(make_settings):
    """Redirects to a private name or address, a name resolving to loopback, and a name with
    one private address among public ones all die BlockedDestination; the target sees nothing."""
    with HostileServer() as public, HostileServer() as target:
        secret = target.url("/page", "sneaky.test")
        urls = [
            public.url(f"/redirect?to={secret}", "public.test"),
            public.url(f"/redirect?to={target.url('/page')}", "public.test"),
            secret,
            target.url("/page", "mixed.test"),
        ]
        async with guarded_app(guarded(make_settings)) as client:
            ids = [await submit(client, url) for url in urls]
            jobs = [await wait_for_status(client, job_id, "dead") for job_id in ids]
    assert [("fatal", "BlockedDestination")] * 4 == [
        (job["dead_reason"], job["last_error"]["type"]) for job in jobs
    ]
    assert (
        f"sneaky.test resolves to 127.0.0.1, which is not a public address {guard.PRIVATE_HINT}"
        == (jobs[0]["last_error"]["message"])
    )
    assert (2, 0) == (public.hits["/redirect"], sum(target.hits.values()))


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:8080/", f"127.0.0.1 is not a public address {guard.PRIVATE_HINT}"),
        (
            "http://169.254.169.254/latest/meta-data/",
            f"169.254.169.254 is not a public address {guard.PRIVATE_HINT}",
        ),
        ("http://[::ffff:10.0.0.1]/", f"10.0.0.1 is not a public address {guard.PRIVATE_HINT}"),
        ("http://2130706433/", f"127.0.0.1 is not a public address {guard.PRIVATE_HINT}"),
        ("http://example.com:22/", "port 22 is not allowed (INGEST_ALLOWED_PORTS)"),
        ("http://user:pw@example.com/", "URL must not contain a user name or password"),
    ],
)
async def test_blocked_url_is_422_at_submit(make_settings, url: str, message: str):
    """A URL the guard refuses on sight is a 422, with FastAPI's validation shape."""
    settings = guarded(make_settings, worker_enabled=False)
    async with guarded_app(settings) as client:
        response = await client.post("/jobs", json={"url": url})
    assert 422 == response.status_code
    assert [{"type": "value_error", "loc": ["body", "url"], "input": url, "msg": message}] == (
        response.json()["detail"]
    )


async def test_blocked_hosts_are_parsed_once_not_per_submit(make_settings, monkeypatch):
    """INGEST_BLOCKED_HOSTS is read when the service starts: a list of 1,000 names took
    7 ms to parse, which every POST /jobs paid. The names still refuse a submit."""
    blocked = ",".join(f"h{i}.example.org" for i in range(1000))
    settings = guarded(make_settings, worker_enabled=False, blocked_hosts=blocked)
    async with guarded_app(settings) as client:
        parses = []
        parse = guard._Hosts.parse

        def counted(text):
            parses.append(text)
            return parse(text)

        monkeypatch.setattr(guard._Hosts, "parse", counted)
        refused = await client.post("/jobs", json={"url": "https://h999.example.org/"})
        batch = {"jobs": [{"url": "https://example.com/"}, {"url": "https://h1.example.org/"}]}
        refused_in_batch = await client.post("/jobs/batch", json=batch)
        taken = await client.post("/jobs", json={"url": "https://example.com/"})
    assert (422, 422, 201) == (
        refused.status_code,
        refused_in_batch.status_code,
        taken.status_code,
    )
    assert (
        "host h999.example.org is blocked (INGEST_BLOCKED_HOSTS)"
        == (refused.json()["detail"][0]["msg"])
    )
    assert [] == parses


async def test_batch_names_the_blocked_item(make_settings):
    """In a batch, the 422 points at the refused item; nothing is stored."""
    settings = guarded(make_settings, worker_enabled=False)
    async with guarded_app(settings) as client:
        body = {"jobs": [{"url": "https://example.com/"}, {"url": "http://10.0.0.1/"}]}
        response = await client.post("/jobs/batch", json=body)
        stats = (await client.get("/stats")).json()
    assert (422, ["body", "jobs", 1, "url"]) == (
        response.status_code,
        response.json()["detail"][0]["loc"],
    )
    assert 0 == sum(stats["counts"].values())


@pytest.mark.parametrize("path", ["/jobs", "/jobs/batch"])
async def test_blocked_callback_url_is_422_at_submit(make_settings, path: str):
    """A callback_url the guard refuses on sight is a 422 like the job's URL; nothing stored."""
    settings = guarded(make_settings, worker_enabled=False)
    job = {"url": "https://example.com/", "callback_url": "http://169.254.169.254/hook"}
    async with guarded_app(settings) as client:
        response = await client.post(path, json={"jobs": [job]} if path.endswith("batch") else job)
        stats = (await client.get("/stats")).json()
    loc = ["body", "jobs", 0] if path.endswith("batch") else ["body"]
    assert 422 == response.status_code
    assert [
        {
            "type": "value_error",
            "loc": [*loc, "callback_url"],
            "input": "http://169.254.169.254/hook",
            "msg": f"169.254.169.254 is not a public address {guard.PRIVATE_HINT}",
        }
    ] == response.json()["detail"]
    assert 0 == sum(stats["counts"].values())


async def test_private_literal_is_accepted_when_private_networks_are_allowed(make_settings):
    """INGEST_ALLOW_PRIVATE_NETWORKS=true accepts a loopback URL at submit."""
    settings = guarded(make_settings, worker_enabled=False, allow_private_networks=True)
    async with guarded_app(settings) as client:
        response = await client.post("/jobs", json={"url": "http://127.0.0.1:8080/"})
    assert 201 == response.status_code


NAMES_THE_SETTINGS = (
    "is not a public address (list it in INGEST_ALLOWED_HOSTS, or set "
    "INGEST_ALLOW_PRIVATE_NETWORKS=true to allow every private address, e.g. for testing)"
)


async def test_refused_private_address_names_the_settings_that_allow_it(make_settings):
    """Someone trying the service on their own machine is told how to let the URL through."""
    settings = guarded(make_settings, worker_enabled=False)
    async with guarded_app(settings) as client:
        response = await client.post("/jobs", json={"url": "http://127.0.0.1:8080/"})
    assert (422, f"127.0.0.1 {NAMES_THE_SETTINGS}") == (
        response.status_code,
        response.json()["detail"][0]["msg"],
    )


async def test_job_on_localhost_dies_naming_the_settings_that_allow_it(make_settings):
    """A name is resolved when fetched, not at submit: a `localhost` URL is taken, and its
    job dies saying which settings would have let it through. The system's resolver answers."""
    settings = make_settings(allow_private_networks=False, max_attempts=1)
    with HostileServer() as target:
        async with running_app(settings) as (_, client):
            job_id = await submit(client, target.url("/page", "localhost"))
            job = await wait_for_status(client, job_id, "dead")
    assert ("fatal", "BlockedDestination") == (job["dead_reason"], job["last_error"]["type"])
    assert re.fullmatch(
        rf"localhost resolves to (127\.0\.0\.1|::1), which {re.escape(NAMES_THE_SETTINGS)}",
        job["last_error"]["message"],
    ), job["last_error"]["message"]
    assert 0 == sum(target.hits.values())


async def test_content_and_text_of_a_succeeded_job(make_settings):
    """The exact bytes with their Content-Type, and the main text, once the job succeeded."""
    with HostileServer() as server:
        async with guarded_app(guarded(make_settings)) as client:
            job_id = await submit(client, server.url("/page", "public.test"))
            job = await wait_for_status(client, job_id, "succeeded")
            content = await client.get(f"/jobs/{job_id}/content")
            text = await client.get(f"/jobs/{job_id}/text")
    assert (200, PAGE, "text/html; charset=utf-8") == (
        content.status_code,
        content.content,
        content.headers["content-type"],
    )
    assert "sandbox" in content.headers.get_list("content-security-policy")
    assert (200, "A fine page.", "text/plain; charset=utf-8") == (
        text.status_code,
        text.text,
        text.headers["content-type"],
    )
    assert ("Fine", len("A fine page.")) == (job["result"]["title"], job["result"]["text_length"])


async def test_no_content_until_success(make_settings):
    """A pending job, a dead job and an unknown id answer 404 problems on both endpoints."""
    with HostileServer() as server:
        async with guarded_app(guarded(make_settings)) as client:
            dead = await submit(client, server.url("/binary", "public.test"))
            await wait_for_status(client, dead, "dead")
            pending = (
                await client.post(
                    "/jobs",
                    json={"url": "https://example.com/", "not_before": "2999-01-01T00:00:00Z"},
                )
            ).json()["id"]
            answers = {
                (name, which): await client.get(f"/jobs/{job_id}/{which}")
                for name, job_id in {"dead": dead, "pending": pending, "unknown": "nope"}.items()
                for which in ("content", "text")
            }
    assert {key: 404 for key in answers} == {key: r.status_code for key, r in answers.items()}
    assert {"application/problem+json"} == {r.headers["content-type"] for r in answers.values()}
    assert (
        f"job {pending} is pending; content exists once it succeeded"
        == (answers["pending", "text"].json()["detail"])
    )


async def test_32_concurrent_oversize_fetches_keep_memory_bounded():
    """32 endless bodies at once, with the default 10 MiB cap, grow RSS by well under 100 MiB."""
    settings = Settings(_env_file=None, allowed_hosts="127.0.0.1", worker_concurrency=32)
    fetcher = Fetcher(PartSettings.of(settings).fetch, destinations=destinations_of(settings))
    try:
        with HostileServer() as server, PeakRSS() as rss:
            started = time.monotonic()
            results = await asyncio.gather(
                *(fetcher.fetch(server.url("/endless")) for _ in range(32))
            )
            elapsed = time.monotonic() - started
    finally:
        await fetcher.aclose()
    assert ["BodyTooLarge"] * 32 == [r.type for r in results if isinstance(r, Failure)]
    print(f"32 x 10 MiB oversize: RSS +{rss.growth / MiB:.1f} MiB in {elapsed:.1f}s")
    assert rss.growth < 100 * MiB, f"RSS grew {rss.growth / MiB:.0f} MiB"
