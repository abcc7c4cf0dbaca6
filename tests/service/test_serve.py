"""`ingest serve` as a process: it listens before its worker starts, and not beyond this
machine without API keys unless told to."""

import asyncio
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.cli.run import _listen
from tests.conftest import running_app
from tests.support.processes import service


def test_a_taken_port_stops_serve_before_its_worker_claims(
    database_url, make_settings, web, tmp_path: Path
):
    """The port is in use: `ingest serve` exits non-zero with one line, and the job
    submitted before is still pending, never attempted nor fetched."""
    url = web.url("/page")

    async def submit() -> str:
        async with running_app(make_settings(worker_enabled=False)) as (_, client):
            return (await client.post("/jobs", json={"url": url})).json()["id"]

    async def read(job_id: str) -> tuple[dict, list]:
        async with running_app(make_settings(worker_enabled=False)) as (_, client):
            job = (await client.get(f"/jobs/{job_id}")).json()
            return job, (await client.get(f"/jobs/{job_id}/attempts")).json()["items"]

    job_id = asyncio.run(submit())
    env = {
        **os.environ,
        "INGEST_DATABASE_URL": database_url,
        "INGEST_ALLOW_PRIVATE_NETWORKS": "true",  # the test server is on 127.0.0.1
        "INGEST_POLL_INTERVAL_SECONDS": "0.1",
    }
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=30,
        )
    job, attempts = asyncio.run(read(job_id))
    assert ("pending", 0, []) == (job["status"], job["attempts"], attempts)
    assert 0 == web.count("/page")
    assert 0 != done.returncode
    assert [
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use (choose another --port)"
    ] == done.stderr.splitlines()


async def test_connections_serve_accepts_send_without_delay():
    """The socket `ingest serve` listens on hands uvicorn connections with TCP_NODELAY: with
    Nagle's algorithm on, each response after the first on a keep-alive connection waited
    for the client's delayed ACK (about 40 ms a request)."""
    listener = _listen("127.0.0.1", 0)
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def on_connection(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = writer.get_extra_info("socket")
        accepted.set_result(connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(on_connection, sock=listener)
    try:
        _, writer = await asyncio.open_connection(*listener.getsockname())
        assert await asyncio.wait_for(accepted, 10) != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()


def test_serve_refuses_to_serve_open_beyond_loopback(database_url, tmp_path: Path):
    """`ingest serve --host 0.0.0.0` without API keys exits 2 with one line saying what to
    set, before it listens; the Docker image runs just that."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_")}
    done = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--host", "0.0.0.0", "--port", "0"],
        env=env | {"INGEST_DATABASE_URL": database_url},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (2, "") == (done.returncode, done.stdout)
    assert [
        "error: refusing to serve the API on 0.0.0.0 without API keys: anyone who can reach it "
        "could read, retry and delete every job. Set INGEST_API_KEYS (key:tenant,...; tenant * "
        "for an admin), or INGEST_ALLOW_OPEN_API=true to serve it open anyway"
    ] == done.stderr.splitlines()


@pytest.mark.parametrize(
    "settings",
    [{"allow_open_api": "true"}, {"api_keys": "admin-key-0123456789:*"}],
    ids=["allowed open", "keys"],
)
async def test_serve_on_every_address_starts_with_keys_or_when_allowed_open(
    database_url, tmp_path: Path, settings
):
    """With INGEST_ALLOW_OPEN_API=true, or with API keys, `--host 0.0.0.0` serves."""
    log = tmp_path / "serve.log"
    args = ("--host", "0.0.0.0", "--port", "0")
    with service("serve", log, database_url, *args, worker_enabled="false", **settings) as serve:
        await serve.wait_for_line("Application startup complete")
        found = re.search(r"listening on http://0\.0\.0\.0:(\d+)", serve.text())
        assert found, serve.text()
        async with httpx.AsyncClient(trust_env=False) as client:
            health = await client.get(f"http://127.0.0.1:{found[1]}/healthz")
    assert 200 == health.status_code
