"""`ingest domains` through typer's CliRunner, on a real database."""

import asyncio
import re

from typer.testing import CliRunner

from app.cli import cli
from tests.conftest import eventually, running_app
from tests.support.webserver import Reply

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
    narrow = runner.invoke(cli, ["domains"], env={"COLUMNS": "80"})
    listed = runner.invoke(cli, ["domains"], env={"COLUMNS": "200"})
    resumed = runner.invoke(cli, ["domains", "--resume", domain])
    unknown = runner.invoke(cli, ["domains", "--resume", "nowhere.test"])
    assert 0 == listed.exit_code == narrow.exit_code, listed.output + narrow.output
    assert re.search(
        rf"^{domain}\s+(\S+ )?\S+ \(in (9m5\ds|10m00s)\)\s+HTTP 429, Retry-After 600s\s",
        listed.stdout,
        re.M,
    )
    assert re.search(
        rf"^{domain}\s+(\S+ )?\S+ \(in (9m5\ds|10m00s)\)\s+HTTP 429, Retry\S*\s+0\s+1\s*$",
        narrow.stdout,
        re.M,
    )
    assert max(len(line.rstrip()) for line in narrow.stdout.splitlines()) <= 80
    assert 0 == resumed.exit_code
    assert f"resumed {domain}" in resumed.stdout
    assert "Retry-After" not in resumed.stdout
    assert (1, "error: no domain nowhere.test\n") == (unknown.exit_code, unknown.stderr)
