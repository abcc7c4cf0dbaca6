"""`ingest submit` and `ingest jobs text` through typer's CliRunner, on a real database;
`--wait` follows jobs that an `ingest worker` process fetches from a local server."""

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from app.model import NewJob
from app.store.database import Database
from app.store.jobs import JobStore
from tests.api.test_pages import fetched
from tests.cli.test_cli import ingest, json_lines, one_line_error
from tests.support.outcomes import succeeded
from tests.support.processes import READY, worker_process
from tests.support.stores import queue_on
from tests.support.webserver import Reply

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def cli_db(database_url, monkeypatch, tmp_path) -> str:
    """The CLI pointed at an empty database, allowed to fetch from 127.0.0.1."""
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("INGEST_DATABASE_URL", database_url)
    monkeypatch.setenv("INGEST_ALLOW_PRIVATE_NETWORKS", "true")
    return database_url


def test_submit_prints_the_ids_or_the_jobs(cli_db, web):
    """Plain: one id a line; --json: each job as POST /jobs answers it, pending, with the
    priority and tenant given."""
    plain = ingest("submit", web.url("/a"), web.url("/b"))
    as_json = ingest("submit", web.url("/c"), "--json", "--priority", "7", "--tenant", "shop")
    assert (0, 0) == (plain.exit_code, as_json.exit_code), plain.output + as_json.output
    ids = plain.stdout.split()
    [job] = json_lines(as_json.stdout)
    assert [36, 36] == [len(job_id) for job_id in ids]
    assert (web.url("/c"), "pending", 7, "shop") == (
        job["url"],
        job["status"],
        job["priority"],
        job["tenant"],
    )


def test_submit_refuses_what_the_api_refuses(cli_db, monkeypatch):
    """A URL that is no http(s) URL, or one the SSRF guard refuses, is exit 2 with one line;
    nothing is submitted. --timeout without --wait is exit 2."""
    bad = ingest("submit", "http://a.test/", "ftp://a.test/")
    monkeypatch.setenv("INGEST_ALLOW_PRIVATE_NETWORKS", "false")
    private = ingest("submit", "http://127.0.0.1:9/")
    alone = ingest("submit", "http://a.test/", "--timeout", "5")
    listed = ingest("jobs", "list", "--json")
    assert (2, 2, 2) == (bad.exit_code, private.exit_code, alone.exit_code)
    assert "error: ftp://a.test/: URL scheme must be http or https" == one_line_error(bad)
    assert one_line_error(private).startswith("error: http://127.0.0.1:9/: ")
    assert "error: --timeout goes with --wait" == one_line_error(alone)
    assert "" == listed.stdout


def test_wait_follows_each_job_to_its_end(cli_db, web, tmp_path):
    """--wait prints each job's end (succeeded with its title, dead with its error): exit 1
    if one did not succeed, 0 when all did; --timeout gives up with exit 1 and one line."""
    ok, gone = web.url("/ok"), web.script("/gone", Reply(404))
    slow = web.script("/slow", Reply(200, delay=5))
    with worker_process(tmp_path / "worker.log", cli_db, poll_interval_seconds=0.2) as worker:
        asyncio.run(worker.wait_for_line(READY))
        mixed = ingest("submit", ok, gone, "--wait", "--timeout", "60")
        fine = ingest("submit", ok, "--wait", "--json")
        late = ingest("submit", slow, "--wait", "--timeout", "0.5")
    ok_id, gone_id, *ends = mixed.stdout.splitlines()
    ended = {end.split()[0]: end for end in ends}
    assert 1 == mixed.exit_code, mixed.output
    assert f"{ok_id} succeeded “Hello”" == ended[ok_id]
    assert ended[gone_id].startswith(f"{gone_id} dead (fatal): HTTPStatus 404"), ended
    assert 0 == fine.exit_code, fine.output
    assert ["pending", "succeeded"] == [job["status"] for job in json_lines(fine.stdout)]
    assert "error: 1 of 1 jobs not finished after 0.5s" == one_line_error_of(late)


def one_line_error_of(result) -> str:
    """The one line on stderr of a command that printed its ids before failing."""
    assert 1 == result.exit_code, result.output
    [line] = result.stderr.splitlines()
    return line


def test_jobs_text_prints_the_text_or_markdown_escaped(cli_db, make_settings):
    """`jobs text ID` prints the stored text, `--markdown` the Markdown, control characters
    escaped and lines kept; an image's job, and an old job's Markdown, are one-line errors."""
    html = fetched("text/html", "line 1\n\x1b[31mred\tcell", "# Title\n\u202eevil")
    old = fetched("text/plain", "old", None)
    ids = asyncio.run(record(make_settings(), html, fetched("image/png"), old))
    html_id, image_id, old_id = ids
    text = ingest("jobs", "text", html_id[:-4])
    markdown = ingest("jobs", "text", html_id, "--markdown")
    image = ingest("jobs", "text", image_id)
    none = ingest("jobs", "text", old_id, "--markdown")
    assert (0, "line 1\n\\x1b[31mred\tcell\n") == (text.exit_code, text.stdout)
    assert (0, "# Title\n\\u202eevil\n") == (markdown.exit_code, markdown.stdout)
    assert f"error: job {image_id} fetched image/png, which has no text" == one_line_error(image)
    assert (
        f"error: no Markdown stored for job {old_id} (fetched before Markdown was kept)"
        == one_line_error(none)
    )


async def record(settings, *results) -> list[str]:
    """Jobs succeeded with these fetches, as the worker records them; their ids in order."""
    database = Database(settings.database_url)
    store, queue = JobStore(database, lambda: NOW), queue_on(database, settings)
    new = [NewJob(f"http://a.test/{i}", "a.test", "default", 3) for i in range(len(results))]
    ids = {job.url: job.id for job in await store.submit(new)}
    leases = {lease.url: lease for lease in await queue.claim("w", len(new), NOW, 60)}
    outcomes = [
        succeeded(leases[job.url], result) for job, result in zip(new, results, strict=True)
    ]
    await queue.record(outcomes, NOW + timedelta(seconds=1))
    await database.dispose()
    return [ids[job.url] for job in new]


def test_jobs_text_of_a_pending_job_says_so(cli_db):
    """A pending job has no text yet: one line saying so, exit 1."""
    [job_id] = ingest("submit", "http://a.test/").stdout.split()
    result = ingest("jobs", "text", job_id)
    assert f"error: job {job_id} is pending; content exists once it succeeded" == one_line_error(
        result
    )
