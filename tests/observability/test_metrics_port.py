"""A worker's metrics port (INGEST_METRICS_PORT) in a real `ingest worker`: where it listens,
who may scrape it, and what becomes of connections that say nothing."""

import asyncio
import shutil
from pathlib import Path

import httpx

from app.observability.metrics import MAX_CONNECTIONS
from tests.conftest import eventually
from tests.observability.test_metrics import free_port, worker_process

TENANT_KEY, ADMIN_KEY = "t" * 20, "a" * 20

STARTUP_SECONDS = 60.0
"""How long a worker may take to start on a loaded machine."""


def database(sqlite_template: Path, tmp_path: Path) -> str:
    """A migrated SQLite file of its own: the port's behaviour does not depend on the backend."""
    shutil.copy(sqlite_template, tmp_path / "ingest.db")
    return f"sqlite:///{tmp_path / 'ingest.db'}"


async def answer(url: str, key: str | None = None) -> httpx.Response | None:
    """`url`'s answer (with `key` as a Bearer token), or None while nothing listens there."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(trust_env=False) as client:
        try:
            return await client.get(url, headers=headers)
        except httpx.TransportError:
            return None


async def healthy(url: str) -> httpx.Response | None:
    """`url`'s answer once it is 200 (the worker runs), else None."""
    answered = await answer(url)
    return answered if answered is not None and answered.status_code == 200 else None


def listening(log: Path) -> bool:
    """The worker has said where its metrics port listens (it listens, then says so)."""
    return "worker metrics on http://" in log.read_text(errors="replace")


async def test_the_port_listens_on_the_metrics_host_not_the_apis(sqlite_template, tmp_path):
    """INGEST_METRICS_HOST is where the port listens, not INGEST_HOST (the API's), and the
    worker's log names it."""
    port = free_port()
    log = tmp_path / "stderr"
    with (
        log.open("wb") as stderr,
        worker_process(
            database(sqlite_template, tmp_path),
            port,
            stderr,
            level="INFO",
            host="127.0.0.2",
            metrics_host="127.0.0.3",
        ),
    ):
        await eventually(lambda: healthy(f"http://127.0.0.3:{port}/healthz"), STARTUP_SECONDS)
    assert f"worker metrics on http://127.0.0.3:{port}:" in log.read_text()


async def test_with_api_keys_the_port_wants_an_admin_key(sqlite_template, tmp_path):
    """With INGEST_API_KEYS set, /metrics answers 401 to no key, an unknown key or a
    tenant's, and the scrape to an admin key; /healthz, like serve's, needs none."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with worker_process(
        database(sqlite_template, tmp_path), port, api_keys=f"{TENANT_KEY}:shop,{ADMIN_KEY}:*"
    ):
        await eventually(lambda: healthy(f"{base}/healthz"), timeout=STARTUP_SECONDS)
        scrapes = [
            await answer(f"{base}/metrics", key) for key in (None, "u" * 20, TENANT_KEY, ADMIN_KEY)
        ]
    assert [401, 401, 401, 200] == [scrape.status_code for scrape in scrapes if scrape]
    assert scrapes[0] is not None and scrapes[-1] is not None
    assert "Bearer" == scrapes[0].headers["WWW-Authenticate"]
    assert "ingest_worker_up" in scrapes[-1].text


async def test_a_silent_connection_is_closed_after_the_timeout(sqlite_template, tmp_path):
    """A connection that sends nothing, and one that stops halfway through its request,
    are closed once INGEST_METRICS_TIMEOUT_SECONDS passes without a byte."""
    port = free_port()
    log = tmp_path / "stderr"
    with (
        log.open("wb") as stderr,
        worker_process(
            database(sqlite_template, tmp_path),
            port,
            stderr,
            level="INFO",
            metrics_timeout_seconds=0.5,
        ),
    ):
        await eventually(lambda: asyncio.to_thread(listening, log), timeout=STARTUP_SECONDS)
        silent = await asyncio.open_connection("127.0.0.1", port)
        halfway = await asyncio.open_connection("127.0.0.1", port)
        halfway[1].write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        try:
            async with asyncio.timeout(30):
                ends = await asyncio.gather(silent[0].read(), halfway[0].read())
        finally:
            silent[1].close()
            halfway[1].close()
    assert [b"", b""] == list(ends)


async def test_the_port_holds_a_bounded_number_of_connections(sqlite_template, tmp_path):
    """With MAX_CONNECTIONS connections open (a thread each), one more is closed unanswered
    at once, and each of those held is still answered."""
    port = free_port()
    log = tmp_path / "stderr"
    with (
        log.open("wb") as stderr,
        worker_process(
            database(sqlite_template, tmp_path),
            port,
            stderr,
            level="INFO",
            metrics_timeout_seconds=120,
        ),
    ):
        await eventually(lambda: asyncio.to_thread(listening, log), timeout=STARTUP_SECONDS)
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(MAX_CONNECTIONS)]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            async with asyncio.timeout(30):
                turned_away = await reader.read()
            for _, held_writer in held:
                held_writer.write(b"GET /healthz HTTP/1.0\r\n\r\n")
            async with asyncio.timeout(30):
                answers = [await held_reader.read() for held_reader, _ in held]
        finally:
            writer.close()
            for _, held_writer in held:
                held_writer.close()
    assert b"" == turned_away
    assert [True] * MAX_CONNECTIONS == [a.startswith(b"HTTP/1.0 ") for a in answers]
