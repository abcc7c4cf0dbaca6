"""`ingest crawl` and `ingest crawls ...` through typer's CliRunner, on a real database;
`--wait` follows a crawl that an `ingest worker` process runs against a local site."""

import asyncio

from tests.cli.test_cli import ingest, json_lines, one_line_error
from tests.cli.test_cli_submit import cli_db  # noqa: F401 (a fixture)
from tests.support.processes import READY, worker_process
from tests.support.webserver import Reply

TEXT = "text/plain"


def small_site(web) -> None:
    web.script("/", Reply(200, b'<html><body><a href="/a">a</a> <a href="/b">b</a></body></html>'))
    web.script("/a", Reply(200, b'<html><body><a href="/b">b</a></body></html>'))
    for path in ("/robots.txt", "/sitemap.xml", "/llms.txt"):
        web.script(path, Reply(404, b"", TEXT))


def test_crawl_wait_follows_the_crawl_to_its_end(cli_db, web, tmp_path):  # noqa: F811
    """`ingest crawl URL --wait` prints the crawl's id, then a line each time its counts
    move, the last one `completed` with every page fetched; `crawls list` and `crawls show`
    name it; a second cancel is an error in one line."""
    small_site(web)
    with worker_process(tmp_path / "worker.log", cli_db, poll_interval_seconds=0.2) as worker:
        asyncio.run(worker.wait_for_line(READY))
        run = ingest("crawl", web.url("/"), "--wait", "--limit", "10")
    assert 0 == run.exit_code, run.output
    crawl_id, *progress = run.stdout.splitlines()
    assert progress[-1].startswith("completed: found 3, fetched 3/3 (3 succeeded, 0 dead)")
    listed = ingest("crawls", "list")
    shown = json_lines(ingest("crawls", "show", crawl_id, "--json").stdout)
    cancel = ingest("crawls", "cancel", crawl_id)
    assert listed.stdout.startswith(f"{crawl_id}  completed  crawl")
    assert (3, "completed") == (shown[0]["counts"]["succeeded"], shown[0]["status"])
    assert f"error: crawl {crawl_id} is completed; cannot cancel" == one_line_error(cancel)


def test_crawl_refuses_what_the_api_refuses(cli_db):  # noqa: F811
    """A start URL that is no http(s) URL, a pattern with too many wildcards, a limit past
    INGEST_CRAWL_MAX_PAGES: exit 2 with one line, no crawl made."""
    bad_url = ingest("crawl", "ftp://a.test/")
    bad_pattern = ingest("crawl", "http://a.test/", "--include", "/*a*a*a*a*a*a*a*a*a")
    too_many = ingest("crawl", "http://a.test/", "--limit", "100000000")
    listed = ingest("crawls", "list")
    assert (2, 2, 2) == (bad_url.exit_code, bad_pattern.exit_code, too_many.exit_code)
    assert "error: ftp://a.test/: URL scheme must be http or https" == one_line_error(bad_url)
    assert "" == listed.stdout
