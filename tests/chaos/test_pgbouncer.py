"""Through PgBouncer in transaction mode (each transaction on any of its server connections):
`ingest db upgrade`, `ingest serve` and four `ingest worker` processes drain 2,000 jobs with
none lost and none fetched twice, over a pool of 10 server connections.

PgBouncer is Debian's (`.ci/run` installs it), started here on a free port in front of the
test's PostgreSQL database, as the `postgres` user (it refuses to run as root).
"""

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.chaos.kit import HOST, Ledger, figures, free_port, hits, slow_pages, started
from tests.conftest import eventually
from tests.support.processes import INGEST, READY, service, service_env
from tests.support.webserver import Reply

JOBS = 2000
WORKERS = 4
SERVER_CONNECTIONS = 10
PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
REQUIRED = os.environ.get("INGEST_TEST_REQUIRE_PGBOUNCER") == "1"


@pytest.fixture
def pgbouncer(pg_url: str) -> Iterator[str]:
    """The test database's URL through a PgBouncer in transaction mode, with
    `?pooler=transaction` (what a user adds to INGEST_DATABASE_URL)."""
    if not Path(PGBOUNCER).exists():
        if REQUIRED:
            pytest.fail("PgBouncer required but not installed (apt-get install pgbouncer)")
        pytest.skip("PgBouncer not installed (apt-get install pgbouncer)")
    server = make_url(pg_url)
    port = free_port()
    # Its own directory under /tmp: the test's (under a 0700 directory) is root's alone.
    home = Path(tempfile.mkdtemp(prefix="ingest-pgbouncer-"))
    (home / "users.txt").write_text('"postgres" ""\n')
    (home / "pgbouncer.ini").write_text(
        f"""[databases]
{server.database} = host={server.host or HOST} port={server.port or 5432} dbname={server.database}

[pgbouncer]
listen_addr = {HOST}
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {home / "users.txt"}
pool_mode = transaction
default_pool_size = {SERVER_CONNECTIONS}
max_db_connections = {SERVER_CONNECTIONS}
max_client_conn = 400
ignore_startup_parameters = extra_float_digits
"""
    )
    for path in (home, *home.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)
    user = ["-u", "postgres"] if os.geteuid() == 0 else []
    process = subprocess.Popen([PGBOUNCER, *user, str(home / "pgbouncer.ini")])
    try:
        asyncio.run(_accepting(process, port))
        yield str(server.set(port=port, host=HOST)) + "?pooler=transaction"
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(home, ignore_errors=True)


async def _accepting(process: subprocess.Popen[bytes], port: int) -> None:
    async def ready() -> bool:
        if process.poll() is not None:
            pytest.fail(f"pgbouncer exited ({process.returncode})")
        try:
            _, writer = await asyncio.open_connection(HOST, port)
        except OSError:
            return False
        writer.close()
        return True

    await eventually(ready, timeout=20)


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_serve_and_four_workers_drain_through_pgbouncer(pgbouncer, pg_url, web, tmp_path):
    """Jobs POSTed to `ingest serve` and fetched by it and four `ingest worker` processes,
    every one connected through PgBouncer: all 2,000 succeed on their first attempt, each
    URL fetched once, and no log holds a traceback or a prepared-statement error."""
    upgrade = await asyncio.create_subprocess_exec(
        *INGEST,
        "db",
        "upgrade",
        env=service_env(pgbouncer),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    said = (await asyncio.wait_for(upgrade.communicate(), 60))[0].decode()
    assert 0 == upgrade.returncode, said
    urls = slow_pages(web, JOBS, Reply(delay=0.02))
    port = free_port()
    # Serve's and the workers' LISTEN go to the server itself.
    settings = {"worker_concurrency": 16, "lease_seconds": 10, "listen_database_url": pg_url}
    async with Ledger(pg_url) as ledger:
        with ExitStack() as stack:
            serve = stack.enter_context(
                service(
                    "serve",
                    tmp_path / "serve.log",
                    pgbouncer,
                    "--host",
                    HOST,
                    "--port",
                    str(port),
                    **(settings | {"poll_interval_seconds": 0.2, "domain_max_in_flight": 1000}),
                )
            )
            workers = [
                stack.enter_context(
                    started("worker", tmp_path / f"worker-{n}.log", pgbouncer, **settings)
                )
                for n in range(WORKERS)
            ]
            for process in (serve, *workers):
                await process.wait_for_line(READY)
            async with httpx.AsyncClient(base_url=f"http://{HOST}:{port}", timeout=30) as api:
                for start in range(0, JOBS, 500):
                    batch = [{"url": url} for url in urls[start : start + 500]]
                    answer = await api.post("/jobs/batch", json={"jobs": batch})
                    assert 201 == answer.status_code, answer.text
            statuses = await ledger.until_all("succeeded", JOBS, timeout=200)
        jobs, history = await ledger.jobs(), await ledger.attempts()
    logs = [process.text() for process in (serve, *workers)]
    fetched = hits(web, urls)
    figures(
        "serve and 4 workers through PgBouncer",
        jobs=JOBS,
        lost=JOBS - statuses["succeeded"],
        duplicates=sum(count - 1 for count in fetched.values() if count > 1),
        server_connections=SERVER_CONNECTIONS,
    )
    assert {"succeeded": JOBS} == dict(statuses)
    assert {(1, 1)} == {(job.attempts, len(history[job.id])) for job in jobs}
    assert {1} == set(fetched.values())
    assert not [log for log in logs if "Traceback" in log or "prepared statement" in log]
