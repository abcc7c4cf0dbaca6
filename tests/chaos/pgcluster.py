"""A PostgreSQL cluster a test owns, so it can stop, start and starve it at will.

`initdb` into a temporary directory, listening on 127.0.0.1 at a free port with trust
auth, its unix socket in that directory; started and stopped with `pg_ctl -w`. As root
(this machine, CI) the server runs as the `postgres` user, which PostgreSQL requires.
initdb takes seconds: share one cluster across tests, one database per test.
"""

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg

from app.store.database import upgrade_to_head

PG_BIN = Path(os.environ.get("INGEST_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_USER = "postgres"
START_SECONDS = 60
"""How long `pg_ctl -w` waits for the server to start or stop on a loaded machine."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresCluster:
    def __init__(self, max_connections: int = 100) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="ingest-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.running = False
        if os.geteuid() == 0:
            shutil.chown(self.root, PG_USER, PG_USER)
        self._run("initdb", "-D", str(self.data), "-U", PG_USER, "--auth=trust", "--no-sync")
        with (self.data / "postgresql.conf").open("a") as conf:
            # Settings a test may change later go to their own file (see `configure`).
            conf.write(
                "listen_addresses = '127.0.0.1'\n"
                f"port = {self.port}\n"
                f"unix_socket_directories = '{self.root}'\n"
                "fsync = off\n"  # throwaway data: no test here is about durability
                "include_if_exists = 'ingest_test.conf'\n"
            )
        self.configure(max_connections=max_connections)

    def _run(self, program: str, *args: str) -> None:
        command = [str(PG_BIN / program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", PG_USER, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.root)
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{program} {' '.join(args)}: {done.stderr or done.stdout}{log}")

    def _pg_ctl(self, *args: str) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", str(START_SECONDS), *args)

    def configure(self, **settings: object) -> None:
        """Replace the test's settings (`max_connections=20`); they apply at the next start."""
        lines = "".join(f"{name} = {value}\n" for name, value in settings.items())
        (self.data / "ingest_test.conf").write_text(lines)
        if os.geteuid() == 0:
            shutil.chown(self.data / "ingest_test.conf", PG_USER, PG_USER)

    def start(self) -> None:
        self._pg_ctl("-l", str(self.log), "start")
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        """`fast`: connections are cut, the server shuts down cleanly; `immediate`: as a crash."""
        self._pg_ctl("-m", mode, "stop")
        self.running = False

    def restart(self) -> None:
        self.stop()
        self.start()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{PG_USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new database on this cluster, migrated to head; its URL."""
        name = f"ingest_{uuid.uuid4().hex[:10]}"
        asyncio.run(self._admin(f'CREATE DATABASE "{name}"'))
        url = self.url(name)
        upgrade_to_head(url)
        return url

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        asyncio.run(self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    async def _admin(self, sql: str) -> None:
        conn = await asyncpg.connect(self.url(), timeout=10)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    def remove(self) -> None:
        if self.running:
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def postgres_cluster(max_connections: int = 100) -> Iterator[PostgresCluster]:
    """A started cluster, stopped and deleted on the way out."""
    cluster = PostgresCluster(max_connections)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()


async def terminate_backends(admin: asyncpg.Connection, database: str) -> int:
    """pg_terminate_backend every connection to `database` but `admin`'s own; how many."""
    killed = await admin.fetchval(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = $1 AND pid <> pg_backend_pid()) AS terminated",
        database,
    )
    return int(killed)
