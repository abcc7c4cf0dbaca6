"""`ingest domains` through typer's CliRunner, on a real database."""

import asyncio

from typer.testing import CliRunner

from app.cli import cli
from tests.conftest import eventually, running_app
from tests.webserver import Reply

runner = CliRunner()


def test_domains_lists_a_pause_and_resumes_it(database_url, make_settings, web, monkeypatch):
    """A 429 pauses the domain; `ingest domains` shows why; --resume clears it."""
    url = web.script("/busy", Reply(429, headers={"Retry-After": "600"}))

    async def pause() -> str:
        async with running_app(make_settings()) as (_, client):
            job = (await client.post("/jobs", json={"url": url})).json()

            async def paused() -> bool:
                return (await client.get(f"/jobs/{job['id']}")).json()["deferrals"] == 1

            await eventually(paused)
            return job["domain"]

    domain = asyncio.run(pause())
    monkeypatch.setenv("INGEST_DATABASE_URL", database_url)
    listed = runner.invoke(cli, ["domains"])
    resumed = runner.invoke(cli, ["domains", "--resume", domain])
    unknown = runner.invoke(cli, ["domains", "--resume", "nowhere.test"])
    assert 0 == listed.exit_code, listed.output
    assert domain in listed.stdout
    assert "HTTP 429, Retry-After 600s" in listed.stdout
    assert 0 == resumed.exit_code
    assert f"resumed {domain}" in resumed.stdout
    assert "Retry-After" not in resumed.stdout
    assert (1, "error: no domain nowhere.test\n") == (unknown.exit_code, unknown.stderr)
