"""Processes that need the schema refuse a database without it, behind it or ahead of it:
one line, exit 2, nothing created. `ingest db upgrade` says what it applied."""

import asyncio
import hashlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
import sqlalchemy as sa
from alembic import command
from typer.testing import CliRunner, Result

from app.cli import cli
from app.cli.schema import Migrations
from app.store.database import (
    HEAD_REVISION,
    MIGRATIONS,
    Database,
    alembic_config,
    upgrade_to_head,
)
from tests.cli.test_cli import one_line_error
from tests.conftest import PG_URL, REQUIRE_PG

MIGRATED = [path.stem for path in sorted((MIGRATIONS / "versions").glob("[0-9]*.py"))]
HEAD = MIGRATED[-1]
NEED_SCHEMA = [["jobs", "list"], ["jobs", "show", "0172ff91"], ["stats"], ["domains"], ["worker"]]
"""Every command that needs the schema and does not create it."""

runner = CliRunner()


async def pg_admin(sql: str) -> None:
    conn = await asyncpg.connect(PG_URL.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def blank_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database without any table: a SQLite path with no file (nor directory) yet, or a
    PostgreSQL database of this test's own, dropped after it."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'data' / 'ingest.db'}"
        return
    name = f"ingest_blank_{uuid.uuid4().hex[:10]}"
    try:
        asyncio.run(pg_admin(f'CREATE DATABASE "{name}"'))
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        if REQUIRE_PG:
            pytest.fail(f"PostgreSQL required but unreachable at {PG_URL}: {exc}")
        pytest.skip(f"PostgreSQL unreachable at {PG_URL}")
    yield PG_URL.rsplit("/", 1)[0] + f"/{name}"
    asyncio.run(pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def ingest(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Run `ingest` on a database URL, from a directory without a .env."""
    monkeypatch.chdir(tmp_path)

    def run(database_url: str, *args: str) -> Result:
        monkeypatch.setenv("INGEST_DATABASE_URL", database_url)
        return runner.invoke(cli, list(args))

    return run


def sqlite_path(url: str) -> Path | None:
    return Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite") else None


async def set_revision(url: str, revision: str) -> None:
    database = Database(url)
    try:
        stamp = sa.text("UPDATE alembic_version SET version_num = :r")
        await database.transact(lambda conn: conn.execute(stamp, {"r": revision}))
    finally:
        await database.dispose()


def test_no_schema_is_refused_then_created(blank_url, ingest):
    """Without the schema every command exits 2 with one line naming the database (a SQLite
    file by its absolute path) and `ingest db upgrade`, and creates nothing; `ingest db
    upgrade` then applies every migration and says so."""
    path = sqlite_path(blank_url)
    if path is not None:
        expected = f"error: no SQLite database at {path}; create it with: ingest db upgrade"
    else:
        expected = f"error: database {blank_url} has no schema; create it with: ingest db upgrade"
    for args in NEED_SCHEMA:
        result = ingest(blank_url, *args)
        assert 2 == result.exit_code, args
        assert expected == one_line_error(result), args
    if path is not None:
        assert not path.parent.exists()
    upgraded = ingest(blank_url, "db", "upgrade")
    again = ingest(blank_url, "db", "upgrade")
    assert f"applied {', '.join(MIGRATED)}; database {blank_url} is at {HEAD}\n" == (
        upgraded.stdout
    )
    assert f"database {blank_url} is already at {HEAD}; nothing to apply\n" == again.stdout
    assert 0 == ingest(blank_url, "stats").exit_code


def test_an_older_schema_is_refused_then_upgraded(blank_url, ingest):
    """A database some migrations behind: refused with where it is and what is needed;
    `ingest db upgrade` names the migrations it applied."""
    command.upgrade(alembic_config(blank_url), MIGRATED[3][:4])
    for args in NEED_SCHEMA:
        result = ingest(blank_url, *args)
        assert 2 == result.exit_code, args
        assert (
            f"error: database {blank_url} is at {MIGRATED[3]}, this version of ingest needs "
            f"{HEAD}; apply the migrations with: ingest db upgrade"
        ) == one_line_error(result)
    upgraded = ingest(blank_url, "db", "upgrade")
    assert f"applied {', '.join(MIGRATED[4:])}; database {blank_url} is at {HEAD}\n" == (
        upgraded.stdout
    )


def test_an_unknown_revision_is_refused_everywhere(blank_url, ingest):
    """A database at a revision this code does not know (a newer version migrated it) is
    refused by every command, `ingest db upgrade` and `ingest serve` included."""
    upgrade_to_head(blank_url)
    asyncio.run(set_revision(blank_url, "9999"))
    expected = (
        f"error: database {blank_url} is at revision 9999, which this version of ingest does "
        "not know (a newer one migrated it?); use that version"
    )
    for args in [*NEED_SCHEMA, ["db", "upgrade"], ["serve", "--port", "1"]]:
        result = ingest(blank_url, *args)
        assert 2 == result.exit_code, args
        assert expected == one_line_error(result), args


def test_an_empty_sqlite_file_has_no_schema(ingest, tmp_path: Path):
    """A SQLite file without tables: refused as a database without the schema."""
    path = tmp_path / "ingest.db"
    path.touch()
    result = ingest(f"sqlite:///{path}", "stats")
    assert 2 == result.exit_code
    assert (
        f"error: database sqlite:///{path} has no schema; create it with: ingest db upgrade"
    ) == one_line_error(result)


def test_a_relative_sqlite_path_is_shown_absolute(ingest, tmp_path: Path, monkeypatch):
    """The default URL is relative to the working directory: the error says so and shows
    the absolute path; `ingest db upgrade` names the file it created."""
    result = ingest("sqlite:///data/ingest.db", "jobs", "list")
    monkeypatch.delenv("INGEST_DATABASE_URL")
    upgraded = runner.invoke(cli, ["db", "upgrade"])
    path = tmp_path / "data" / "ingest.db"
    assert 2 == result.exit_code
    assert (
        f"error: no SQLite database at {path} (INGEST_DATABASE_URL's path is relative to the "
        "working directory); create it with: ingest db upgrade"
    ) == one_line_error(result)
    assert upgraded.stdout.endswith(f"; database sqlite:///{path} is at {HEAD}\n")
    assert path.is_file()


def test_a_worker_process_refuses_a_new_sqlite_path(tmp_path: Path):
    """`ingest worker` on a path with no database exits 2 at once, with one line, and leaves
    no file behind (it used to create one and log "no such table" forever)."""
    path = tmp_path / "ingest.db"
    env = {**os.environ, "INGEST_DATABASE_URL": f"sqlite:///{path}"}
    done = subprocess.run(
        [sys.executable, "-m", "app", "worker"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert 2 == done.returncode
    assert [f"error: no SQLite database at {path}; create it with: ingest db upgrade"] == (
        done.stderr.splitlines()
    )
    assert not path.exists()


def test_the_head_revision_constant_is_the_newest_migration():
    """HEAD_REVISION (what a worker's start compares with, without Alembic) names the head
    of the migrations shipped: a new migration must move it."""
    scripts = Migrations.load("sqlite://").scripts
    assert HEAD_REVISION == scripts.get_current_head()
    assert HEAD.startswith(HEAD_REVISION)


def test_a_worker_at_the_head_starts_without_alembic(tmp_path):
    """The worker's schema check on a migrated database loads neither Alembic nor the
    migrations (half a second of a worker's start)."""
    url = f"sqlite:///{tmp_path / 'ingest.db'}"
    upgrade_to_head(url)
    code = (
        "import sys\nfrom app.cli.runner import require_schema\nimport app.runtime\n"
        f"require_schema({url!r})\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.splitlines()[-1].split())
    assert "sqlalchemy" in loaded
    assert "alembic" not in loaded


JOB_0008 = """INSERT INTO jobs (id, url, domain, tenant, status, priority, attempts, max_attempts,
deferrals, result_http_status, result_sha256, result_title, result_metadata, created_at,
updated_at, finished_at) VALUES ('0172ff91-0000-4000-8000-000000000000', 'http://a.test/',
'a.test', 'default', 'succeeded', 0, 1, 4, 0, 200, 'b', 'A title', '{"title": "A title"}',
'2026-12-01 10:00:00', '2026-12-01 10:00:00', '2026-12-01 10:00:00')"""
CONTENT_0008 = """INSERT INTO job_contents (job_id, content, content_type, text, markdown,
text_length, stored_at) VALUES ('0172ff91-0000-4000-8000-000000000000', :body, 'text/html',
'Ünïcode text', 'Ünïcode text', 12, '2026-12-01 10:00:00')"""


def _write(url: str, *statements: tuple[str, dict]) -> None:
    async def write() -> None:
        database = Database(url)
        try:
            await database.transact(
                lambda conn: [conn.execute(sa.text(sql), params) for sql, params in statements]
            )
        finally:
            await database.dispose()

    asyncio.run(write())


def _read(url: str, sql: str) -> list[tuple]:
    async def read() -> list[tuple]:
        database = Database(url)
        try:
            async with database.read() as conn:
                return [tuple(row) for row in await conn.execute(sa.text(sql))]
        finally:
            await database.dispose()

    return asyncio.run(read())


def test_content_stored_before_versions_becomes_version_1(blank_url):
    """Migration 0009 keeps a job's content readable as version 1, with its text's sha256
    (on the content and the job), its title and metadata; going back to 0008 keeps it too."""
    config = alembic_config(blank_url)
    command.upgrade(config, "0008")
    _write(blank_url, (JOB_0008, {}), (CONTENT_0008, {"body": b"<p>x</p>"}))
    command.upgrade(config, "head")
    contents = _read(blank_url, "SELECT version, text_sha256, title, text FROM job_contents")
    job = _read(blank_url, "SELECT content_version, result_text_sha256, changed_at FROM jobs")
    digest = hashlib.sha256("Ünïcode text".encode()).hexdigest()
    assert [(1, digest, "A title", "Ünïcode text")] == contents
    assert (1, digest) == job[0][:2] and job[0][2] is not None
    command.downgrade(config, "0008")
    assert [("Ünïcode text",)] == _read(blank_url, "SELECT text FROM job_contents")


RUNNING_0013 = """INSERT INTO jobs (id, url, domain, tenant, status, priority, attempts,
max_attempts, deferrals, worker_id, lease_id, started_at, created_at, updated_at) VALUES
('0172ff91-0000-4000-8000-000000000001', 'http://a.test/', 'a.test', 'default', 'running', 0,
2, 4, 0, 'host:1:w', 'l', '2026-12-01 10:00:05', '2026-12-01 10:00:00', '2026-12-01 10:00:05')"""
ATTEMPTS_0013 = """INSERT INTO attempts (job_id, number, worker_id, started_at, finished_at,
outcome) VALUES ('0172ff91-0000-4000-8000-000000000001', 1, 'host:1:w', '2026-12-01 10:00:00',
'2026-12-01 10:00:01', 'failed'), ('0172ff91-0000-4000-8000-000000000001', 2, 'host:1:w',
'2026-12-01 10:00:05', NULL, NULL)"""


def test_running_attempts_rows_go_with_migration_0014(blank_url):
    """Migration 0014 deletes the rows of attempts still running (the record that ends them
    writes them whole), keeps the ended ones; going back to 0013 opens them again."""
    config = alembic_config(blank_url)
    command.upgrade(config, "0013")
    _write(blank_url, (RUNNING_0013, {}), (ATTEMPTS_0013, {}))
    command.upgrade(config, "head")
    history = "SELECT number, outcome FROM attempts ORDER BY id"
    assert [(1, "failed")] == _read(blank_url, history)
    command.downgrade(config, "0013")
    assert [(1, "failed"), (2, None)] == _read(blank_url, history)


CONTENT_VERSION = """INSERT INTO job_contents (job_id, version, content, content_type, text,
markdown, text_length, stored_at) VALUES ('0172ff91-0000-4000-8000-000000000000', :version,
:body, 'text/html', 'Ünïcode text', 'Ünïcode text', 12, '2026-12-01 10:00:00')"""


def test_contents_are_compressed_by_lz4_from_migration_0015(blank_url):
    """Migration 0015: on PostgreSQL a body stored before it keeps pglz and reads as before, one
    stored after is compressed by lz4, and going back to 0014 the next one is compressed by
    the server's default again; on SQLite every body reads as written."""
    config = alembic_config(blank_url)
    command.upgrade(config, "0014")
    body = ("<p>" + "a page worth compressing " * 2000 + "</p>").encode()
    _write(blank_url, (JOB_0008, {}), (CONTENT_VERSION, {"version": 1, "body": body}))
    command.upgrade(config, "0015")
    _write(blank_url, (CONTENT_VERSION, {"version": 2, "body": body}))
    command.downgrade(config, "0014")
    _write(blank_url, (CONTENT_VERSION, {"version": 3, "body": body}))
    stored = "SELECT version, content FROM job_contents ORDER BY version"
    assert [(1, body), (2, body), (3, body)] == _read(blank_url, stored)
    if blank_url.startswith("postgresql"):
        methods = "SELECT pg_column_compression(content) FROM job_contents ORDER BY version"
        assert [("pglz",), ("lz4",), ("pglz",)] == _read(blank_url, methods)


KEYED_JOB = """INSERT INTO jobs (id, url, domain, tenant, status, priority, attempts, max_attempts,
deferrals, idempotency_key, created_at, updated_at) VALUES (:id, 'http://a.test/', 'a.test',
'default', 'pending', 0, 0, 4, 0, :key, '2026-12-01 10:00:00', '2026-12-01 10:00:00')"""
KEY_INDEXES = """SELECT indexname, indexdef LIKE '%WHERE (idempotency_key IS NOT NULL)%'
FROM pg_indexes WHERE tablename = 'jobs' AND indexname LIKE 'uq_jobs_%' ORDER BY 1"""


def test_idempotency_keys_are_indexed_where_given_from_migration_0016(blank_url):
    """Migration 0016: on PostgreSQL the unique constraint over every job becomes a unique
    index of the jobs with a key, and back on downgrade; across both, a second job of a
    tenant under a key is refused and jobs without a key are not (SQLite keeps its
    constraint)."""

    def job(key: str | None) -> tuple[str, dict]:
        return KEYED_JOB, {"id": str(uuid.uuid4()), "key": key}

    config = alembic_config(blank_url)
    command.upgrade(config, "0015")
    _write(blank_url, job("k1"), job(None))
    command.upgrade(config, "0016")
    _write(blank_url, job(None), job("k2"))
    with pytest.raises(sa.exc.IntegrityError):
        _write(blank_url, job("k1"))
    if blank_url.startswith("postgresql"):
        given = [("uq_jobs_tenant_given_idempotency_key", True)]
        assert given == _read(blank_url, KEY_INDEXES)
    command.downgrade(config, "0015")
    with pytest.raises(sa.exc.IntegrityError):
        _write(blank_url, job("k2"))
    if blank_url.startswith("postgresql"):
        assert [("uq_jobs_tenant_idempotency_key", False)] == _read(blank_url, KEY_INDEXES)
    assert [(4,)] == _read(blank_url, "SELECT count(*) FROM jobs")


VERSION_0017 = """INSERT INTO job_contents (job_id, version, tenant, content, content_type, text,
markdown, markdown_as_text, text_length, stored_at) VALUES ('0172ff91-0000-4000-8000-000000000000',
:version, 'default', :body, 'text/plain', 'Ünïcode text', NULL, :as_text, 12,
'2026-12-01 10:00:00')"""
BYTES_KEPT = "SELECT tenant, sum(bytes) FROM bytes_kept GROUP BY tenant"


def test_bytes_kept_are_counted_from_migration_0017(blank_url):
    """Migration 0017: a version stored before names its job's tenant and counts in its bytes
    kept (its body, and its text and Markdown as UTF-8); from then on each version stored,
    and deleted with its job, counts; back at 0016, Markdown kept as the text is a copy
    again, and 0017 once more counts it."""
    config = alembic_config(blank_url)
    command.upgrade(config, "0016")
    body, text = b"<p>x</p>", "Ünïcode text".encode()
    _write(blank_url, (JOB_0008, {}), (CONTENT_VERSION, {"version": 1, "body": body}))
    command.upgrade(config, "0017")
    one, two = len(body) + 2 * len(text), len(body) + len(text)
    assert [("default", one)] == _read(blank_url, BYTES_KEPT)
    assert [("default",)] == _read(blank_url, "SELECT tenant FROM job_contents")
    _write(blank_url, (VERSION_0017, {"version": 2, "body": body, "as_text": True}))
    assert [("default", one + two)] == _read(blank_url, BYTES_KEPT)
    command.downgrade(config, "0016")
    markdowns = "SELECT markdown FROM job_contents ORDER BY version"
    assert [("Ünïcode text",), ("Ünïcode text",)] == _read(blank_url, markdowns)
    command.upgrade(config, "0017")
    assert [("default", 2 * one)] == _read(blank_url, BYTES_KEPT)
    _write(blank_url, ("DELETE FROM jobs", {}))
    assert [("default", 0)] == _read(blank_url, BYTES_KEPT)


URL_JOB = """INSERT INTO jobs (id, url, domain, tenant, status, priority, attempts, max_attempts,
deferrals, created_at, updated_at) VALUES (:id, :url, 'a.test', :tenant, 'pending', 0, 0, 4, 0,
'2026-12-01 10:00:00', '2026-12-01 10:00:00')"""
HELD = "UPDATE jobs SET unique_key = 7"


def test_url_keys_are_made_for_jobs_stored_before_migration_0018(blank_url):
    """Migration 0018: each job stored before gets its URL's key (more than a batch of them,
    of several tenants); from then on two jobs of a tenant that hold one key cannot both be
    pending, of two tenants they can; back at 0017 the keys go, the jobs stay."""
    config = alembic_config(blank_url)
    command.upgrade(config, "0017")
    ids = [str(uuid.uuid4()) for _ in range(2500)]
    _write(
        blank_url,
        *(
            (
                URL_JOB,
                {
                    "id": job_id,
                    "url": f"HTTP://A.test:80/{i}?utm_source=x#f",
                    "tenant": f"t{i % 2}",
                },
            )
            for i, job_id in enumerate(ids)
        ),
    )
    command.upgrade(config, "0018")
    keys = dict(_read(blank_url, "SELECT job_id, url_key FROM job_urls"))
    assert {job_id: f"http://a.test/{i}" for i, job_id in enumerate(ids)} == keys
    tenants = _read(
        blank_url,
        "SELECT count(*) FROM job_urls JOIN jobs ON jobs.id = job_id"
        " WHERE job_urls.tenant = jobs.tenant",
    )
    assert [(2500,)] == tenants
    _write(
        blank_url,
        (HELD + " WHERE id = :id", {"id": ids[0]}),
        (HELD + " WHERE id = :id", {"id": ids[1]}),
    )
    with pytest.raises(sa.exc.IntegrityError):
        _write(blank_url, (HELD + " WHERE id = :id", {"id": ids[2]}))
    command.downgrade(config, "0017")
    assert [(2500,)] == _read(blank_url, "SELECT count(*) FROM jobs")
