"""The Host allow-list against DNS rebinding: in-process and through `ingest serve`."""

import re

import httpx
import pytest

from tests.conftest import running_app
from tests.support.processes import service

ADMIN = "admin-key-0123456789"


def refused(response: httpx.Response) -> bool:
    return (421, "application/problem+json") == (
        response.status_code,
        response.headers["content-type"],
    ) and "INGEST_ALLOWED_HOSTNAMES" in response.json()["detail"]


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/jobs"), ("POST", "/jobs"), ("GET", "/dashboard"), ("GET", "/healthz")],
)
async def test_a_rebound_name_is_refused_key_or_not(make_settings, method, path):
    """`Host: evil.example` (a name pointed at this service) is a 421 on any route, with the
    admin's key too; the same request for an allowed host is answered."""
    settings = make_settings(worker_enabled=False, api_keys={ADMIN: "*"})
    bearer = {"authorization": f"Bearer {ADMIN}"}
    body = {"url": "http://example.test/"} if method == "POST" else None
    async with running_app(settings) as (_, client):
        rebound = [
            await client.request(method, path, json=body, headers={"host": host} | bearer)
            for host in ("evil.example", "evil.example:8000")
        ]
        same = await client.request(method, path, json=body, headers={"host": "127.0.0.1:8000"})
        keyed = await client.request(method, path, json=body, headers=bearer)
    assert [True, True] == [refused(response) for response in rebound]
    assert not refused(same)
    assert keyed.status_code < 400


async def test_serve_answers_to_its_names_only(database_url, tmp_path):
    """`ingest serve`: a foreign Host is refused with 421; 127.0.0.1, localhost and [::1]
    with its port, and a name of INGEST_ALLOWED_HOSTNAMES, are answered."""
    log = tmp_path / "serve.log"
    with service(
        "serve",
        log,
        database_url,
        "--port",
        "0",
        worker_enabled="false",
        allowed_hostnames="ingest.example.com",
    ) as process:
        await process.wait_for_line("Application startup complete")
        found = re.search(r"listening on (http://127\.0\.0\.1:(\d+))", process.text())
        assert found, process.text()
        base, port = found[1], found[2]
        async with httpx.AsyncClient(base_url=base, trust_env=False) as client:
            answers = {
                host: (await client.get("/jobs", headers={"host": host})).status_code
                for host in (
                    "evil.example",
                    f"evil.example:{port}",
                    f"127.0.0.1:{port}",
                    "localhost",
                    f"[::1]:{port}",
                    "ingest.example.com",
                )
            }
    assert {
        "evil.example": 421,
        f"evil.example:{port}": 421,
        f"127.0.0.1:{port}": 200,
        "localhost": 200,
        f"[::1]:{port}": 200,
        "ingest.example.com": 200,
    } == answers
