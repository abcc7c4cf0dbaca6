"""`ingest jobs ...` and `ingest stats` through typer's CliRunner, on a real database.

The tests are plain functions: the commands run `asyncio.run` themselves. The jobs they
look at were made by the real app and worker against a local server.
"""

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner, Result

from app.cli import cli
from app.cli.output import printable
from app.clock import utc_now
from app.model import DeadReason, ErrorKind, Failure, Fetched, MarkDead, NewJob
from app.settings import Settings
from app.store.database import Database
from app.store.jobs import JobStore
from app.text.wording import SHORT_ID, distinct_prefix
from tests.conftest import eventually, running_app, wait_for_status
from tests.support.outcomes import failed, succeeded
from tests.support.processes import INSTALLED
from tests.support.stores import queue_on
from tests.support.webserver import Reply

runner = CliRunner()


def ingest(*args: str, columns: int = 200) -> Result:
    """`ingest *args` with its output `columns` wide (captured output has no terminal)."""
    return runner.invoke(cli, list(args), env={"COLUMNS": str(columns)})


def json_lines(output: str) -> list:
    """The values of `--json` output, each line written as the API writes JSON: compact."""
    values = [json.loads(line) for line in output.splitlines()]
    compact = [json.dumps(v, ensure_ascii=False, separators=(",", ":")) for v in values]
    assert compact == output.splitlines()
    return values


def one_line_error(result: Result) -> str:
    """The error a failed command printed: exactly one line on stderr, no traceback."""
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert 1 == len(lines), result.stderr
    return lines[0]


@pytest.fixture
def made(database_url, make_settings, web, monkeypatch, tmp_path) -> dict[str, dict]:
    """A succeeded, a dead (404), a waiting (503, backoff 600 s) and a cancelled job, as the
    API returns them; the CLI is pointed at their database."""

    async def make() -> dict[str, dict]:
        settings = make_settings(backoff_base_seconds=600, backoff_max_seconds=600)
        async with running_app(settings) as (_, client):

            async def submit(url: str, **fields: object) -> str:
                response = await client.post("/jobs", json={"url": url, **fields})
                assert 201 == response.status_code, response.text
                return response.json()["id"]

            ok = await submit(web.script("/ok", Reply(200)), tenant="shop")
            gone = await submit(web.script("/gone", Reply(404)))
            await wait_for_status(client, ok, "succeeded")
            await wait_for_status(client, gone, "dead")
            waiting = await submit(web.script("/down", Reply(503)))

            async def retry_pending() -> bool:
                job = (await client.get(f"/jobs/{waiting}")).json()
                return job["status"] == "pending" and job["retry_after"] is not None

            await eventually(retry_pending)
            later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
            cancelled = await submit(web.url("/never"), not_before=later)
            assert 200 == (await client.post(f"/jobs/{cancelled}/cancel")).status_code
            made = {}
            for name, job_id in [
                ("ok", ok),
                ("gone", gone),
                ("waiting", waiting),
                ("cancelled", cancelled),
            ]:
                made[name] = (await client.get(f"/jobs/{job_id}")).json()
            made["gone_attempts"] = (await client.get(f"/jobs/{gone}/attempts")).json()
            made["stats"] = (await client.get("/stats")).json()
            return made

    jobs = asyncio.run(make())
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("INGEST_DATABASE_URL", database_url)
    return jobs


def test_list_shows_a_table_of_every_job(made):
    """The table: id, URL, status (with dead reason), attempts/max, what holds a pending job
    back and until when (the 503 paused its domain), last error."""
    result = ingest("jobs", "list")
    assert 0 == result.exit_code, result.output
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    gone, waiting = rows[made["gone"]["id"]], rows[made["waiting"]["id"]]
    assert made["gone"]["url"] in gone
    assert re.search(r"dead \(fatal\)\s+1/4\s+-\s+fatal HTTPStatus 404", gone), gone
    assert re.search(r"pending\s+1/4\s+domain_paused \(in (9m5\ds|10m00s)\)", waiting), waiting
    assert "transient HTTPStatus 503" in waiting
    assert {made[name]["id"] for name in ("ok", "gone", "waiting", "cancelled")} <= set(rows)


def test_list_json_is_the_api_model(made):
    """--json prints one line per job, each equal to what GET /jobs/{id} answers."""
    result = ingest("jobs", "list", "--status", "dead", "--json")
    assert 0 == result.exit_code, result.output
    assert [made["gone"]] == json_lines(result.stdout)


def test_list_filters(made):
    """--status takes several, --tenant and --domain filter, --limit keeps the newest."""

    def ids(*args: str) -> list[str]:
        result = ingest("jobs", "list", "--json", *args)
        assert 0 == result.exit_code, result.output
        return [json.loads(line)["id"] for line in result.stdout.splitlines()]

    assert {made["waiting"]["id"], made["cancelled"]["id"]} == set(
        ids("--status", "pending,cancelled")
    )
    assert [made["ok"]["id"]] == ids("--tenant", "shop")
    assert [] == ids("--domain", "elsewhere.example")
    assert 4 == len(ids("--domain", made["ok"]["domain"]))
    assert [made["cancelled"]["id"]] == ids("--limit", "1")


def test_list_by_url_finds_the_jobs_of_its_key(made):
    """--url finds the jobs of a URL's key, as GET /jobs?url= does (tracking parameters and
    a fragment do not matter, another query does); a URL no submit takes is exit 2."""

    def ids(url: str) -> list[str]:
        result = ingest("jobs", "list", "--json", "--url", url)
        assert 0 == result.exit_code, result.output
        return [json.loads(line)["id"] for line in result.stdout.splitlines()]

    gone = made["gone"]["url"]
    assert [made["gone"]["id"]] == ids(gone + "?utm_source=x#top")
    assert [] == ids(gone + "?page=2")
    refused = ingest("jobs", "list", "--url", "ftp://example.com/")
    assert 2 == refused.exit_code
    assert one_line_error(refused).startswith("error: --url: ")


def test_status_names_ignore_case(made):
    """--status DEAD,Cancelled is --status dead,cancelled."""
    result = ingest("jobs", "list", "--json", "--status", "DEAD,Cancelled")
    assert 0 == result.exit_code, result.output
    listed = {json.loads(line)["id"] for line in result.stdout.splitlines()}
    assert {made["gone"]["id"], made["cancelled"]["id"]} == listed


def test_list_rejects_an_unknown_status(made):
    """A status name that does not exist is a one-line usage error (exit 2)."""
    result = ingest("jobs", "list", "--status", "lost")
    assert 2 == result.exit_code
    assert one_line_error(result).startswith("error: --status takes pending, running,")


def test_show_prints_the_job_and_its_attempts(made):
    """`jobs show` prints the job's fields and one row per attempt."""
    gone = made["gone"]
    result = ingest("jobs", "show", gone["id"])
    assert 0 == result.exit_code, result.output
    assert gone["url"] in result.stdout
    assert re.search(r"status\s+dead \(fatal\)", result.stdout)
    assert re.search(r"last error\s+fatal HTTPStatus 404: HTTP 404", result.stdout)
    assert re.search(
        r"^1\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+\d+\s+fatal\s+HTTPStatus\s+404", result.stdout, re.M
    )


def test_show_says_what_holds_a_pending_job_back(made):
    """`jobs show` of the job whose 503 paused its domain: blocked by the pause, until when
    and why (the list says it too, shorter)."""
    result = ingest("jobs", "show", made["waiting"]["id"])
    assert 0 == result.exit_code, result.output
    # A time of another day (a pause past midnight) is shown with its date.
    assert re.search(
        r"^blocked by\s+domain_paused until (\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d \(in \d+m\d\ds\): "
        r"HTTP 503",
        result.stdout,
        re.M,
    ), result.stdout


def test_show_json_is_what_the_api_answers(made):
    """`jobs show --json` prints exactly GET /jobs/{id}; with --attempts, the job beside
    GET /jobs/{id}/attempts's items."""
    gone, attempts = made["gone"], made["gone_attempts"]["items"]
    alone = ingest("jobs", "show", gone["id"], "--json")
    both = ingest("jobs", "show", gone["id"], "--json", "--attempts")
    assert (0, 0) == (alone.exit_code, both.exit_code), alone.output + both.output
    assert [gone] == json_lines(alone.stdout)
    assert [{"job": gone, "attempts": attempts}] == json_lines(both.stdout)


def test_attempts_needs_json():
    """--attempts without --json is a usage error: the table always shows the attempts."""
    result = ingest("jobs", "show", "0172ff91", "--attempts")
    assert 2 == result.exit_code
    assert "error: --attempts goes with --json (the table always shows them)" == (
        one_line_error(result)
    )


def test_retry_a_dead_job_then_a_conflict(made):
    """Retrying a dead job makes it pending with a fresh budget; a succeeded one is refused."""
    gone, ok = made["gone"]["id"], made["ok"]["id"]
    result = ingest("jobs", "retry", gone)
    assert 0 == result.exit_code, result.output
    assert f"job {gone}: pending, due now, attempts 0/4\n" == result.stdout
    shown = json.loads(ingest("jobs", "show", gone, "--json").stdout)
    assert ("pending", 0, None) == (shown["status"], shown["attempts"], shown["dead_reason"])
    refused = ingest("jobs", "retry", ok)
    assert 1 == refused.exit_code
    assert f"error: job {ok} is succeeded; cannot retry" == one_line_error(refused)


def test_retry_all_dead_by_domain(made):
    """--all-dead requeues every dead job, of one domain with --domain."""
    none = ingest("jobs", "retry", "--all-dead", "--domain", "Elsewhere.example")
    assert "requeued 0 dead jobs of elsewhere.example\n" == none.stdout
    some = ingest("jobs", "retry", "--all-dead")
    assert "requeued 1 dead job\n" == some.stdout
    assert "" == ingest("jobs", "list", "--status", "dead", "--json").stdout


def test_retry_needs_an_id_or_all_dead(made):
    """Neither, both, or --domain without --all-dead: one-line usage errors saying which."""
    gone = made["gone"]["id"]
    expected = {
        (): "error: give a job id or --all-dead",
        (gone, "--all-dead"): "error: give a job id or --all-dead, not both",
        (gone, "--domain", "x"): "error: --domain goes with --all-dead",
    }
    for args, error in expected.items():
        result = ingest("jobs", "retry", *args)
        assert 2 == result.exit_code, args
        assert error == one_line_error(result)


def test_cancel_a_pending_job_then_again(made):
    """A pending job is cancelled; cancelling it again is a state conflict."""
    waiting = made["waiting"]["id"]
    assert f"job {waiting}: cancelled\n" == ingest("jobs", "cancel", waiting).stdout
    again = ingest("jobs", "cancel", waiting)
    assert 1 == again.exit_code
    assert f"error: job {waiting} is cancelled; cannot cancel" == one_line_error(again)


def test_delete_a_dead_job_then_a_pending_one(made):
    """A dead job is deleted (then unknown); a pending one is a state conflict."""
    gone, waiting = made["gone"]["id"], made["waiting"]["id"]
    assert f"job {gone}: deleted\n" == ingest("jobs", "delete", gone).stdout
    again = ingest("jobs", "delete", gone)
    refused = ingest("jobs", "delete", waiting)
    assert f"error: no job {gone}" == one_line_error(again)
    assert f"error: job {waiting} is pending; cannot delete" == one_line_error(refused)


@pytest.mark.parametrize("command", [["show"], ["retry"], ["refresh"], ["cancel"], ["versions"]])
def test_an_unknown_id_is_one_line(made, command):
    """An id that names no job: exit 1 and `error: no job <id>`."""
    result = ingest("jobs", *command, "no-such-job")
    assert 1 == result.exit_code
    assert "error: no job no-such-job" == one_line_error(result)


def test_stats(made):
    """`ingest stats` counts what GET /stats counts; --json is its model. Of the pending
    jobs it says the oldest due (none: the one left waits for its retry) and how many are
    not due yet."""
    result = ingest("stats", "--json")
    assert 0 == result.exit_code, result.output
    assert made["stats"]["counts"] == json_lines(result.stdout)[0]["counts"]
    assert (None, 1) == (made["stats"]["oldest_due_age_seconds"], made["stats"]["scheduled"])
    table = ingest("stats").stdout
    assert re.search(r"^succeeded\s+1$", table, re.M), table
    assert re.search(r"^oldest due job: none\nnot due yet: 1$", table, re.M), table


LONG_URL = "https://very-long-host-name.example.com/" + "/".join(["segment"] * 20) + "/end.html"


def submit_long_url(database_url: str) -> str:
    """A pending job with a 190-character URL, submitted through the store."""

    async def submit() -> str:
        database = Database(database_url)
        try:
            new = NewJob(LONG_URL, "very-long-host-name.example.com", "default", 4)
            return (await JobStore(database, utc_now).submit([new]))[0].id
        finally:
            await database.dispose()

    return asyncio.run(submit())


def widest(output: str) -> int:
    return max(len(line.rstrip()) for line in output.splitlines())


def short(job_id: str, made: dict) -> str:
    """`job_id`'s start, as long as `jobs list` shows it beside the other jobs `made`."""
    ids = [made[name]["id"] for name in ("ok", "gone", "waiting", "cancelled")]
    return job_id[: distinct_prefix(ids)]


def test_list_at_80_columns(made, database_url):
    """At 80 columns each job is one line: short id, URL (a long one without its middle),
    status and last error."""
    long_id = submit_long_url(database_url)
    result = ingest("jobs", "list", columns=80)
    assert 0 == result.exit_code, result.output
    assert widest(result.stdout) <= 80
    rows = {line.split()[0]: line.rstrip() for line in result.stdout.splitlines()[2:]}
    ids = [made[name]["id"] for name in ("ok", "gone", "waiting", "cancelled")] + [long_id]
    # Ids made within a minute share their first 8 characters: each is shown as long as
    # tells them apart, and no longer.
    length = distinct_prefix(ids)
    assert SHORT_ID < length < len(long_id)
    assert sorted(job_id[:length] for job_id in ids) == sorted(rows)
    assert len({job_id[: length - 1] for job_id in ids}) < len(ids)
    gone, waiting = made["gone"]["id"][:length], made["waiting"]["id"][:length]
    assert re.search(r"dead \(fatal\)\s+fatal HTTPStatus 404$", rows[gone])
    assert re.search(r"pending\s+transient HTTPStatus 503$", rows[waiting])
    cut = rows[long_id[:length]].split()[1]
    head, tail = cut.split("…")
    assert LONG_URL.startswith(head) and LONG_URL.endswith(tail) and len(head) > 10
    assert not any(job_id in result.stdout for job_id in ids)


def test_list_at_200_columns_and_wide(made, database_url):
    """At 200 columns: whole ids, attempts, what blocks, tenant and creation time; --wide
    adds whole URLs however narrow the terminal."""
    long_id = submit_long_url(database_url)
    result = ingest("jobs", "list", columns=200)
    wide = ingest("jobs", "list", "--wide", columns=80)
    assert 0 == result.exit_code == wide.exit_code, result.output + wide.output
    assert widest(result.stdout) <= 200
    header = result.stdout.splitlines()[0].split()
    assert ["ID", "URL", "STATUS", "ATTEMPTS", "BLOCKED", "BY", "LAST", "ERROR"] == header[:8]
    assert ["TENANT", "CREATED", "(UTC)"] == header[8:]
    assert re.search(rf"^{made['ok']['id']}\s.*\s1/4\s.*\sshop\s+\d{{4}}-", result.stdout, re.M)
    assert LONG_URL not in result.stdout
    assert re.search(rf"^{long_id}\s+{re.escape(LONG_URL)}\s+pending\s", wide.stdout, re.M)
    assert widest(wide.stdout) > 200


def test_show_at_80_columns(made):
    """`jobs show` at 80 columns: the details and each attempt on lines of at most 80."""
    gone = made["gone"]
    narrow = ingest("jobs", "show", short(gone["id"], made), columns=80)
    wide = ingest("jobs", "show", short(gone["id"], made), "--wide", columns=80)
    assert 0 == narrow.exit_code == wide.exit_code, narrow.output + wide.output
    assert widest(narrow.stdout) <= 80
    assert re.search(r"^job\s+" + gone["id"], narrow.stdout, re.M)
    attempt = re.search(r"^\s*1\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s.*$", narrow.stdout, re.M)
    assert attempt is not None
    assert re.search(r"fatal\s+HTTPStatus\s+404", attempt[0])
    assert re.search(r"fatal\s+HTTPStatus\s+404\s+-\s+\S+:\d+:\w+\s+HTTP 404", wide.stdout)


def test_short_ids_name_jobs_everywhere(made):
    """Show, retry, cancel and delete take the first characters of an id (any case)."""
    gone, waiting = made["gone"]["id"], made["waiting"]["id"]
    shown = json_lines(ingest("jobs", "show", short(gone, made).upper(), "--json").stdout)
    retried = ingest("jobs", "retry", short(gone, made))
    cancelled = ingest("jobs", "cancel", short(waiting, made))
    deleted = ingest("jobs", "delete", waiting[:-1])
    assert [made["gone"]] == shown
    assert f"job {gone}: pending, due now, attempts 0/4\n" == retried.stdout
    assert f"job {waiting}: cancelled\n" == cancelled.stdout
    assert f"job {waiting}: deleted\n" == deleted.stdout


HELP = [[], ["jobs"], ["jobs", "list"], ["jobs", "show"], ["jobs", "retry"], ["stats"]]
HELP += [["domains"], ["worker"], ["serve"], ["db", "upgrade"], ["openapi"]]
HELP += [["jobs", "refresh"], ["jobs", "versions"]]


def test_help_shows_flags_without_a_value():
    """No help shows a flag as an option taking a value (`--json <bool>`)."""
    for command in HELP:
        result = ingest(*command, "--help")
        assert 0 == result.exit_code, command
        assert "<bool>" not in result.stdout, command
    assert re.search(r"^  --json\s+JSON", ingest("jobs", "list", "--help").stdout, re.M)


def test_help_loads_no_web_framework_or_orm():
    """`ingest jobs list --help` imports neither FastAPI, SQLAlchemy nor Alembic."""
    code = (
        "import sys\nfrom app.cli import cli\ntry:\n    cli(['jobs', 'list', '--help'])\n"
        "except SystemExit:\n    print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.splitlines()[-1].split())
    assert "typer" in loaded
    assert set() == loaded & {"fastapi", "starlette", "sqlalchemy", "alembic", "uvicorn", "jinja2"}


def test_a_command_on_the_database_loads_no_worker_nor_fetcher(database_url, monkeypatch, tmp_path):
    """`ingest jobs list` takes its stores from the composition root (`app.runtime`) without
    importing the worker, the webhook sender or the fetcher (its parsers and extractors)."""
    monkeypatch.chdir(tmp_path)  # no stray .env
    code = (
        "import sys\nfrom app.cli import cli\ntry:\n    cli(['jobs', 'list'])\n"
        "except SystemExit as exit:\n    assert exit.code == 0, exit.code\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    env = {**os.environ, "INGEST_DATABASE_URL": database_url}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    loaded = set(done.stdout.splitlines()[-1].split())
    assert "app.runtime" in loaded
    workers = {
        "app.worker.job_worker",
        "app.worker.webhooks",
        "app.fetch.fetcher",
        "app.content.extract",
    }
    assert set() == loaded & (workers | {"trafilatura", "lxml"})


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_postgresql_is_one_line(monkeypatch, tmp_path):
    """Nothing listens on the port: exit 1, one line naming the database, no password."""
    monkeypatch.chdir(tmp_path)
    port = closed_port()
    monkeypatch.setenv("INGEST_DATABASE_URL", f"postgresql://ingest:s3cret@127.0.0.1:{port}/x")
    for args in (["jobs", "list"], ["jobs", "retry", "--all-dead"], ["stats"]):
        result = ingest(*args)
        assert 1 == result.exit_code, args
        line = one_line_error(result)
        assert line.startswith(f"error: database postgresql://ingest:***@127.0.0.1:{port}/x: ")
        assert "s3cret" not in result.output


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql://ingest:s3cret@127.0.0.1:notaport/x",
            "postgresql://***@127.0.0.1:notaport/x",
        ),
        ("ingest:s3cret@127.0.0.1/x", "***@127.0.0.1/x"),
        ("postgres ql://ingest:s3cret@127.0.0.1/x", "postgres ql://***@127.0.0.1/x"),
        ("postgresql://ingest:s3cret@[::1/x", "postgresql://***@[::1/x"),
        ("mysql://ingest:s3cret@127.0.0.1/x", "mysql://ingest:***@127.0.0.1/x"),
        ("postgresql://ingest:s3c@ret@127.0.0.1:1/x", "postgresql://***@127.0.0.1:1/x"),
        ("postgresql://127.0.0.1:1/x?password=s3cret", "postgresql://127.0.0.1:1/x?password=***"),
    ],
)
def test_a_bad_database_url_never_shows_its_password(monkeypatch, tmp_path, url, shown):
    """A database URL that does not parse, names another database or cannot be reached:
    every command fails with one line that names it with its password hidden."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INGEST_DATABASE_URL", url)
    for args in (["serve"], ["worker"], ["db", "upgrade"], ["jobs", "list"], ["stats"]):
        result = ingest(*args)
        assert "s3cret" not in result.output, args
        assert shown in one_line_error(result), args


@pytest.mark.parametrize("command", [["serve"], ["worker"], ["stats"], ["jobs", "list"]])
@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        (
            "INGEST_WORKER_CONCURRENCY",
            "abc",
            "error: INGEST_WORKER_CONCURRENCY=abc: expected an integer from 1 to 1000",
        ),
        (
            "INGEST_WORKER_CONCURENCY",
            "3",
            "error: unknown setting INGEST_WORKER_CONCURENCY "
            "(did you mean INGEST_WORKER_CONCURRENCY?)",
        ),
    ],
)
def test_a_bad_setting_stops_every_command_naming_it(
    monkeypatch, tmp_path, command, name, value, error
):
    """An invalid value, or an INGEST_ name that is no setting (a typo the settings would
    ignore): exit 2 and one line naming the variable and what it should be."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(name, value)
    result = ingest(*command)
    assert (2, error) == (result.exit_code, one_line_error(result))


def test_an_unknown_setting_in_the_env_file_is_refused(monkeypatch, tmp_path):
    """`.env` is read as the settings read it, its unknown names said with where they are."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("INGEST_MAX_ATTEMPS=3\n")
    result = ingest("stats")
    assert (
        2,
        "error: unknown setting INGEST_MAX_ATTEMPS in .env (did you mean INGEST_MAX_ATTEMPTS?)",
    ) == (result.exit_code, one_line_error(result))


def test_the_test_suites_variables_are_no_unknown_settings(database_url, monkeypatch, tmp_path):
    """INGEST_TEST_* (INGEST_TEST_POSTGRES_URL, ...) are the test suite's, not settings: a
    command run where they are set starts."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INGEST_DATABASE_URL", database_url)
    monkeypatch.setenv("INGEST_TEST_REQUIRE_POSTGRES", "1")
    result = ingest("stats")
    assert 0 == result.exit_code, result.output


def test_a_bad_setting_is_one_line_from_the_installed_command(tmp_path):
    """What an operator sees: `ingest worker` exits 2 with the one line, no traceback."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_")}
    env["INGEST_WORKER_CONCURRENCY"] = "0"
    done = subprocess.run(
        [*INSTALLED, "worker"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert (2, "", "error: INGEST_WORKER_CONCURRENCY=0: expected an integer from 1 to 1000\n") == (
        done.returncode,
        done.stdout,
        done.stderr,
    )


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain é 😀 \\x1b", "plain é 😀 \\x1b"),
        ("\x1b]52;c;aGk=\x07", "\\x1b]52;c;aGk=\\x07"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("a\tb\nc\rd\x00\x7f\x9b", "a\\tb\\nc\\rd\\x00\\x7f\\x9b"),
        ("\u202eevil\u202c", "\\u202eevil\\u202c"),
    ],
)
def test_printable_escapes_control_characters(text, shown):
    """Control characters (C0, DEL, C1, bidirectional controls) are escaped as Python
    writes them; everything else, backslashes included, is left as it is."""
    assert shown == printable(text)


OSC_52 = "\x1b]52;c;aGVsbG8=\x07"
"""The terminal command that sets the clipboard (to "hello")."""


def test_show_escapes_what_the_remote_side_sent(database_url, monkeypatch, tmp_path):
    """A dead job whose error message, and a succeeded one whose title, hold terminal
    commands (OSC 52, a colour): `jobs show` prints them escaped, no ESC or BEL raw."""

    async def store() -> tuple[str, str]:
        database = Database(database_url)
        try:
            jobs, queue = JobStore(database, utc_now), queue_on(database, Settings(_env_file=None))
            news = [NewJob(f"http://a.test/{i}", "a.test", "default", 1) for i in range(2)]
            dead, ok = await jobs.submit(news)
            leases = {lease.id: lease for lease in await queue.claim("w", 2, utc_now(), 60)}
            message = f"HTTP 404 {OSC_52}\x1b[31mred"
            failure = Failure(ErrorKind.FATAL, "HTTPStatus", message, 404)
            fetched = Fetched(200, "http://a.test/1", "text/html", 1, "0" * 64, f"t{OSC_52}")
            outcomes = [
                failed(leases[dead.id], MarkDead(DeadReason.FATAL, failure)),
                succeeded(leases[ok.id], fetched),
            ]
            await queue.record(outcomes, utc_now())
            return dead.id, ok.id
        finally:
            await database.dispose()

    dead, ok = asyncio.run(store())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INGEST_DATABASE_URL", database_url)
    shown_dead, shown_ok = ingest("jobs", "show", dead), ingest("jobs", "show", ok)
    assert 0 == shown_dead.exit_code == shown_ok.exit_code, shown_dead.output + shown_ok.output
    escaped = "\\x1b]52;c;aGVsbG8=\\x07"
    assert re.search(
        rf"last error\s+fatal HTTPStatus 404: HTTP 404 {re.escape(escaped)}\\x1b\[31mred",
        shown_dead.stdout,
    ), shown_dead.stdout
    assert f"HTTP 404 {escaped}" in shown_dead.stdout.split("attempts")[-1]  # its MESSAGE
    assert f"title 't{escaped}'" in shown_ok.stdout
    assert not {"\x1b", "\x07"} & set(shown_dead.stdout + shown_ok.stdout)


def test_refresh_a_succeeded_job_keeps_its_content(made):
    """A succeeded job (named by its id's start) is pending again with a fresh budget, its
    content version and text kept; a dead one too, with no version to keep."""
    ok, gone = made["ok"]["id"], made["gone"]["id"]
    result = ingest("jobs", "refresh", short(ok, made))
    dead = ingest("jobs", "refresh", gone)
    assert 0 == result.exit_code == dead.exit_code, result.output + dead.output
    assert f"job {ok}: pending, due now, attempts 0/4, content version 1 kept\n" == result.stdout
    assert f"job {gone}: pending, due now, attempts 0/4\n" == dead.stdout
    shown = json.loads(ingest("jobs", "show", ok, "--json").stdout)
    assert ("pending", 0, 1) == (shown["status"], shown["attempts"], shown["version"])
    assert "hi\n" == ingest("jobs", "text", ok).stdout


def test_refresh_refuses_a_pending_or_cancelled_job(made):
    """A job that is pending (it fetches already) or cancelled is a state conflict: exit 1,
    one line saying its status."""
    for status, job_id in [
        ("pending", made["waiting"]["id"]),
        ("cancelled", made["cancelled"]["id"]),
    ]:
        result = ingest("jobs", "refresh", job_id)
        after = json.loads(ingest("jobs", "show", job_id, "--json").stdout)
        assert 1 == result.exit_code, status
        assert f"error: job {job_id} is {status}; cannot refresh" == one_line_error(result)
        assert status == after["status"]


def test_refresh_every_succeeded_job_of_a_domain(made):
    """--domain requeues that domain's succeeded jobs (named in any case), not its dead
    ones."""
    ok, domain = made["ok"]["id"], made["ok"]["domain"]
    none = ingest("jobs", "refresh", "--domain", "Elsewhere.example")
    some = ingest("jobs", "refresh", "--domain", domain.upper())
    assert "requeued 0 succeeded jobs of elsewhere.example to refresh\n" == none.stdout
    assert f"requeued 1 succeeded job of {domain} to refresh\n" == some.stdout
    assert "pending" == json.loads(ingest("jobs", "show", ok, "--json").stdout)["status"]
    dead = json_lines(ingest("jobs", "list", "--status", "dead", "--json").stdout)
    assert [made["gone"]["id"]] == [job["id"] for job in dead]


def test_refresh_all(made):
    """--all requeues every succeeded job, whatever its tenant; then none is left."""
    result = ingest("jobs", "refresh", "--all")
    again = ingest("jobs", "refresh", "--all")
    assert "requeued 1 succeeded job to refresh\n" == result.stdout
    assert "requeued 0 succeeded jobs to refresh\n" == again.stdout
    assert (
        "pending" == json.loads(ingest("jobs", "show", made["ok"]["id"], "--json").stdout)["status"]
    )


def test_refresh_needs_one_of_an_id_a_domain_or_all():
    """Neither, or two of a job id, --domain and --all: one-line usage errors saying which."""
    job = "0172ff91"
    mixed = "error: give only one of a job id, --domain and --all"
    expected = {
        (): "error: give a job id, --domain or --all",
        (job, "--domain", "x"): mixed,
        (job, "--all"): mixed,
        ("--domain", "x", "--all"): mixed,
    }
    for args, error in expected.items():
        result = ingest("jobs", "refresh", *args)
        assert 2 == result.exit_code, args
        assert error == one_line_error(result)


def versioned_page(title: str, text: str) -> bytes:
    body = f"<html><head><title>{title}</title></head><body><article><p>{text}</p></article>"
    return (body + "</body></html>").encode()


@pytest.fixture
def versioned(database_url, make_settings, web, monkeypatch, tmp_path) -> dict:
    """A job refreshed hourly whose refresh found its text changed (version 2, "Second",
    after version 1, "First"), and what the API says of it and of its versions; the CLI is
    pointed at its database."""
    url = web.script(
        "/p",
        Reply(200, versioned_page("First", "old words")),
        Reply(200, versioned_page("Second", "new words")),
    )

    async def make() -> dict:
        async with running_app(make_settings()) as (_, client):
            response = await client.post("/jobs", json={"url": url, "refresh_every": 3600})
            job_id = response.json()["id"]
            await wait_for_status(client, job_id, "succeeded")
            assert 200 == (await client.post(f"/jobs/{job_id}/refresh")).status_code
            job = await wait_for_status(client, job_id, "succeeded")
            versions = (await client.get(f"/jobs/{job_id}/versions")).json()["items"]
            return {"job": job, "versions": versions}

    made = asyncio.run(make())
    assert 2 == made["job"]["version"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INGEST_DATABASE_URL", database_url)
    return made


def test_versions_table_newest_first(versioned):
    """One row per version, newest first: its number, when it was stored, its size, its
    text's length and sha256 (the first 12 digits), its title; --json prints what
    GET /jobs/{id}/versions lists, one version per line."""
    job_id = versioned["job"]["id"]
    result = ingest("jobs", "versions", job_id[:-4])
    as_json = ingest("jobs", "versions", job_id, "--json")
    assert 0 == result.exit_code == as_json.exit_code, result.output + as_json.output
    lines = result.stdout.splitlines()
    assert ["VERSION", "STORED", "(UTC)", "BYTES", "TEXT", "LENGTH", "TEXT", "SHA256", "TITLE"] == (
        lines[0].split()
    )
    rows = [line.split() for line in lines[2:]]
    expected = [
        [
            str(v["version"]),
            *datetime.fromisoformat(v["stored_at"]).strftime("%Y-%m-%d %H:%M:%S").split(),
            str(v["bytes"]),
            str(v["text_length"]),
            v["text_sha256"][:12],
            v["title"],
        ]
        for v in versioned["versions"]
    ]
    assert ["2", "1"] == [row[0] for row in rows]
    assert expected == rows
    assert ["Second", "First"] == [v["title"] for v in versioned["versions"]]
    assert versioned["versions"] == json_lines(as_json.stdout)


def test_versions_of_a_job_that_never_succeeded(made):
    """A job with no content version says so, exit 0; --json prints nothing."""
    gone = made["gone"]["id"]
    result = ingest("jobs", "versions", gone)
    assert (0, f"job {gone} keeps no content version\n") == (result.exit_code, result.stdout)
    assert "" == ingest("jobs", "versions", gone, "--json").stdout


def test_show_says_the_version_and_the_refresh_schedule(versioned, made):
    """`jobs show` of a job refreshed hourly: its version and when it changed, and when it is
    next fetched; a job with neither shows neither row."""
    job_id = versioned["job"]["id"]
    result = ingest("jobs", "show", job_id)
    assert 0 == result.exit_code, result.output
    moment = r"(\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d"
    assert re.search(rf"^version\s+2, changed {moment} \(\d+s ago\)\s*$", result.stdout, re.M)
    assert re.search(
        rf"^refreshes\s+every 1h00m, next {moment} \(in (59m\d\ds|1h00m)\)\s*$", result.stdout, re.M
    ), result.stdout
    plain = ingest("jobs", "show", made["gone"]["id"]).stdout
    assert not re.search(r"^(version|refreshes)\s", plain, re.M), plain
