"""Is the database at the schema this code needs? And `ingest db upgrade`, which says what it
applied.

The processes that need the schema but do not create it (`ingest worker`, `ingest jobs`,
`ingest stats`, `ingest domains`) check it at start and refuse to run, with one line and exit
2, on a database that lacks it (no SQLite file, an empty database, older migrations) or that
holds a revision this code does not know (a newer version migrated it: not guessed at). The
check only reads: it never creates a SQLite file. `ingest serve` migrates instead, and only
refuses the unknown revision.

Compared are Alembic's revision in the database (`alembic_version`, read with plain SQL)
and the head of the migrations shipped with the code. A database at the head
(`HEAD_REVISION`) is accepted without loading Alembic or the migrations, so a worker starts
sooner (docs/design/store.md); anything else is looked at through Alembic, for the message.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from app.store.database import HEAD_REVISION, Database, alembic_config, upgrade_to_head
from app.text.database_url import shown

if TYPE_CHECKING:  # imported where used: a database at the head needs no Alembic
    from alembic.script import ScriptDirectory

UPGRADE = "ingest db upgrade"


class SchemaRefused(Exception):
    """The database cannot be used as it is; the message says why and what to run."""


def sqlite_file(database_url: str) -> Path | None:
    """The absolute path of a SQLite database file; None for any other database."""
    try:
        url = make_url(database_url)
    except (ArgumentError, ValueError):
        return None
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database).absolute()


def describe(database_url: str) -> str:
    """How a message names the database: the absolute path of a SQLite file (a relative one
    depends on the working directory), a URL with its password hidden otherwise."""
    path = sqlite_file(database_url)
    return shown(database_url) if path is None else f"sqlite:///{path}"


def refuse_missing_file(database_url: str) -> None:
    """SchemaRefused if the URL names a SQLite file that does not exist (connecting would
    create an empty one)."""
    path = sqlite_file(database_url)
    if path is None or path.is_file():
        return
    relative = make_url(database_url).database != str(path)
    where = " (INGEST_DATABASE_URL's path is relative to the working directory)" if relative else ""
    raise SchemaRefused(f"no SQLite database at {path}{where}; create it with: {UPGRADE}")


@dataclass(frozen=True)
class Migrations:
    """The migrations shipped with this code."""

    scripts: "ScriptDirectory"

    @classmethod
    def load(cls, database_url: str) -> "Migrations":
        from alembic.script import ScriptDirectory

        return cls(ScriptDirectory.from_config(alembic_config(database_url)))

    @property
    def head(self) -> str:
        return self.name(self.scripts.get_current_head() or "")

    def name(self, revision: str) -> str:
        """`0006_drop_unused_index`: the revision and its file's slug."""
        script = self.scripts.get_revision(revision)
        return Path(script.path).stem if script is not None else revision

    def known(self, revision: str) -> bool:
        return any(script.revision == revision for script in self.scripts.walk_revisions())

    def after(self, current: tuple[str, ...]) -> list[str]:
        """The names of the migrations from `current` (exclusive) to the head, oldest first."""
        lower = current[0] if current else "base"
        pending = self.scripts.iterate_revisions("heads", lower)
        return [self.name(script.revision) for script in reversed(list(pending))]


async def current_revisions(database: Database) -> tuple[str, ...]:
    """The revisions the database is at; () for a database without Alembic's table. Read
    as Alembic keeps them (one row per head), with plain SQL."""

    def read(conn: sa.Connection) -> tuple[str, ...]:
        if not sa.inspect(conn).has_table("alembic_version"):
            return ()
        rows = conn.execute(sa.text("SELECT version_num FROM alembic_version"))
        return tuple(sorted(row.version_num for row in rows))

    async with database.read() as conn:
        return await conn.run_sync(read)


def refuse_unknown(database_url: str, current: tuple[str, ...], migrations: Migrations) -> None:
    """SchemaRefused if the database is at a revision this code does not know."""
    unknown = [revision for revision in current if not migrations.known(revision)]
    if unknown:
        raise SchemaRefused(
            f"database {describe(database_url)} is at revision {', '.join(unknown)}, which this "
            f"version of ingest does not know (a newer one migrated it?); use that version"
        )


async def require_schema(database: Database) -> None:
    """SchemaRefused unless the database is exactly at the head of the shipped migrations."""
    current = await current_revisions(database)
    if current == (HEAD_REVISION,):
        return
    migrations = Migrations.load(database.url)
    refuse_unknown(database.url, current, migrations)
    where = describe(database.url)
    if not current:
        raise SchemaRefused(f"database {where} has no schema; create it with: {UPGRADE}")
    if migrations.after(current):
        at = ", ".join(migrations.name(revision) for revision in current)
        raise SchemaRefused(
            f"database {where} is at {at}, this version of ingest needs {migrations.head}; "
            f"apply the migrations with: {UPGRADE}"
        )


def upgrade(database_url: str, current: tuple[str, ...]) -> str:
    """Migrate a database found at `current` to the head; what was done, in one line.

    SchemaRefused for a revision this code does not know (Alembic could not migrate from it).
    """
    migrations = Migrations.load(database_url)
    refuse_unknown(database_url, current, migrations)
    applied = migrations.after(current)
    where = describe(database_url)
    if not applied:
        return f"database {where} is already at {migrations.head}; nothing to apply"
    upgrade_to_head(database_url)
    return f"applied {', '.join(applied)}; database {where} is at {migrations.head}"
