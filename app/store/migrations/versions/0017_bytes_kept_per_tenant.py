"""Bytes kept per tenant, kept by triggers on job_contents (INGEST_TENANT_MAX_STORAGE_BYTES);
job_contents.tenant, and Markdown that is the text kept once (job_contents.markdown_as_text)

A version's bytes: its body's, its text's and its Markdown's, as stored (UTF-8); none for
Markdown kept as the text. Each row of bytes_kept is a change (+n or -n) of a tenant's
bytes, as job_counts' rows are of its jobs (migration 0012): the triggers add rows in the
transaction that inserts or deletes versions, whatever statement does it (a record, the
oldest version's delete, retention, a job's delete cascading), and only append, so no two
records wait for each other on a tenant's count; `app.store.counts` folds them. A cascade
deletes a version after its job's row, so each version names its tenant itself: filled
here from its job. Versions stored before keep their Markdown as it was.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PG_BYTES = (
    "octet_length({v}.content)::bigint + octet_length({v}.text)"
    " + coalesce(octet_length({v}.markdown), 0)"
)
# Differs from PostgreSQL because SQLite's length() counts a text's characters: as a blob,
# its bytes. (octet_length() came with SQLite 3.43.)
_SQLITE_BYTES = (
    "length(CAST({v}.content AS BLOB)) + length(CAST({v}.text AS BLOB))"
    " + coalesce(length(CAST({v}.markdown AS BLOB)), 0)"
)

_POSTGRESQL = (
    f"""
    CREATE FUNCTION ingest_count_bytes_kept() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO bytes_kept (tenant, bytes)
            SELECT tenant, sum({_PG_BYTES.format(v="new_rows")}) FROM new_rows GROUP BY tenant;
        ELSIF TG_OP = 'DELETE' THEN
            INSERT INTO bytes_kept (tenant, bytes)
            SELECT tenant, -sum({_PG_BYTES.format(v="old_rows")}) FROM old_rows GROUP BY tenant;
        ELSE
            INSERT INTO bytes_kept (tenant, bytes)
            SELECT tenant, sum(change) FROM (
                SELECT tenant, {_PG_BYTES.format(v="new_rows")} AS change FROM new_rows
                UNION ALL
                SELECT tenant, -({_PG_BYTES.format(v="old_rows")}) FROM old_rows
            ) AS changes
            GROUP BY tenant HAVING sum(change) <> 0;
        END IF;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER job_contents_kept_insert AFTER INSERT ON job_contents
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ingest_count_bytes_kept()
    """,
    """
    CREATE TRIGGER job_contents_kept_update AFTER UPDATE ON job_contents
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ingest_count_bytes_kept()
    """,
    """
    CREATE TRIGGER job_contents_kept_delete AFTER DELETE ON job_contents
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ingest_count_bytes_kept()
    """,
)
_SQLITE = (
    f"""
    CREATE TRIGGER job_contents_kept_insert AFTER INSERT ON job_contents BEGIN
        INSERT INTO bytes_kept (tenant, bytes)
        VALUES (NEW.tenant, {_SQLITE_BYTES.format(v="NEW")});
    END
    """,
    f"""
    CREATE TRIGGER job_contents_kept_update AFTER UPDATE OF tenant, content, text, markdown
    ON job_contents BEGIN
        INSERT INTO bytes_kept (tenant, bytes)
        VALUES (OLD.tenant, -({_SQLITE_BYTES.format(v="OLD")}));
        INSERT INTO bytes_kept (tenant, bytes)
        VALUES (NEW.tenant, {_SQLITE_BYTES.format(v="NEW")});
    END
    """,
    f"""
    CREATE TRIGGER job_contents_kept_delete AFTER DELETE ON job_contents BEGIN
        INSERT INTO bytes_kept (tenant, bytes)
        VALUES (OLD.tenant, -({_SQLITE_BYTES.format(v="OLD")}));
    END
    """,
)
_TRIGGERS = ("job_contents_kept_insert", "job_contents_kept_update", "job_contents_kept_delete")


def upgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "bytes_kept",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("tenant", sa.String(100), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
    )
    op.add_column(
        "job_contents",
        sa.Column("markdown_as_text", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    if postgresql:
        # The ALTER holds job_contents (ACCESS EXCLUSIVE) to the end of the migration: no
        # version comes or goes between the count and the triggers. (SQLite: the migration
        # holds the one write lock already.)
        op.add_column("job_contents", sa.Column("tenant", sa.String(100), nullable=True))
        op.execute(
            "UPDATE job_contents SET tenant = jobs.tenant FROM jobs"
            " WHERE jobs.id = job_contents.job_id"
        )
        op.alter_column("job_contents", "tenant", nullable=False)
    else:
        # Differs from PostgreSQL because SQLite adds a NOT NULL column only with a default.
        op.add_column(
            "job_contents",
            sa.Column("tenant", sa.String(100), nullable=False, server_default=""),
        )
        op.execute(
            "UPDATE job_contents SET tenant = (SELECT tenant FROM jobs"
            " WHERE jobs.id = job_contents.job_id)"
        )
    size = (_PG_BYTES if postgresql else _SQLITE_BYTES).format(v="job_contents")
    op.execute(
        f"INSERT INTO bytes_kept (tenant, bytes) SELECT tenant, sum({size})"
        " FROM job_contents GROUP BY tenant"
    )
    for statement in _POSTGRESQL if postgresql else _SQLITE:
        op.execute(statement)


def downgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for name in _TRIGGERS:
        op.execute(f"DROP TRIGGER {name} ON job_contents" if postgresql else f"DROP TRIGGER {name}")
    if postgresql:
        op.execute("DROP FUNCTION ingest_count_bytes_kept()")
    # The Markdown kept as the text, as a copy again: the columns before knew no other way.
    op.execute("UPDATE job_contents SET markdown = text WHERE markdown_as_text")
    op.drop_column("job_contents", "markdown_as_text")  # SQLite 3.35+ drops columns in place
    op.drop_column("job_contents", "tenant")
    op.drop_table("bytes_kept")
