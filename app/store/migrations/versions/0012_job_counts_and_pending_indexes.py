"""Job counts per tenant and status, kept by triggers on jobs, and indexes of the pending
jobs by creation and by when they became due: GET /stats reads a few hundred rows and the
first row of two indexes instead of every job (10 M rows: seconds)

Each row of job_counts is a change (+n or -n jobs of a tenant in a status); their sum is
the count. The triggers add rows in the transaction that changes jobs, whatever statement
does it; `app.store.counts` folds them into one row per tenant and status now and then.
PostgreSQL: one trigger per statement (its rows grouped), appending rows only, so no two
transactions ever wait for each other on a count (an upsert of one row per count would make
every claim of a tenant queue behind the last, and could deadlock). SQLite: one trigger
per row (it has no statement triggers), its one writer at a time.

The rows of the jobs there are now are counted here, once.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_POSTGRESQL = (
    """
    CREATE FUNCTION ingest_count_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO job_counts (tenant, status, jobs)
            SELECT tenant, status, count(*) FROM new_rows GROUP BY tenant, status;
        ELSIF TG_OP = 'DELETE' THEN
            INSERT INTO job_counts (tenant, status, jobs)
            SELECT tenant, status, -count(*) FROM old_rows GROUP BY tenant, status;
        ELSE
            INSERT INTO job_counts (tenant, status, jobs)
            SELECT tenant, status, sum(change) FROM (
                SELECT tenant, status, 1 AS change FROM new_rows
                UNION ALL
                SELECT tenant, status, -1 FROM old_rows
            ) AS changes
            GROUP BY tenant, status HAVING sum(change) <> 0;
        END IF;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER jobs_counted_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ingest_count_jobs()
    """,
    """
    CREATE TRIGGER jobs_counted_update AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ingest_count_jobs()
    """,
    """
    CREATE TRIGGER jobs_counted_delete AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ingest_count_jobs()
    """,
)
_SQLITE = (
    """
    CREATE TRIGGER jobs_counted_insert AFTER INSERT ON jobs BEGIN
        INSERT INTO job_counts (tenant, status, jobs) VALUES (NEW.tenant, NEW.status, 1);
    END
    """,
    """
    CREATE TRIGGER jobs_counted_update AFTER UPDATE OF status, tenant ON jobs
    WHEN OLD.status IS NOT NEW.status OR OLD.tenant IS NOT NEW.tenant BEGIN
        INSERT INTO job_counts (tenant, status, jobs) VALUES (OLD.tenant, OLD.status, -1);
        INSERT INTO job_counts (tenant, status, jobs) VALUES (NEW.tenant, NEW.status, 1);
    END
    """,
    """
    CREATE TRIGGER jobs_counted_delete AFTER DELETE ON jobs BEGIN
        INSERT INTO job_counts (tenant, status, jobs) VALUES (OLD.tenant, OLD.status, -1);
    END
    """,
)


def upgrade() -> None:
    op.create_table(
        "job_counts",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("tenant", sa.String(100), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("jobs", sa.BigInteger(), nullable=False),
    )
    pending = sa.text("status = 'pending'")
    op.create_index(
        "ix_jobs_pending_created",
        "jobs",
        ["created_at"],
        postgresql_where=pending,
        sqlite_where=pending,
    )
    op.create_index(
        "ix_jobs_pending_due",
        "jobs",
        [sa.text("coalesce(retry_after, updated_at)")],
        postgresql_where=pending,
        sqlite_where=pending,
    )
    postgresql = op.get_bind().dialect.name == "postgresql"
    if postgresql:
        # No job changes between the count and the triggers (SQLite: the migration holds
        # the one write lock already).
        op.execute("LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE")
    op.execute(
        "INSERT INTO job_counts (tenant, status, jobs)"
        " SELECT tenant, status, count(*) FROM jobs GROUP BY tenant, status"
    )
    for statement in _POSTGRESQL if postgresql else _SQLITE:
        op.execute(statement)


def downgrade() -> None:
    for name in ("jobs_counted_insert", "jobs_counted_update", "jobs_counted_delete"):
        if op.get_bind().dialect.name == "postgresql":
            op.execute(f"DROP TRIGGER {name} ON jobs")
        else:
            op.execute(f"DROP TRIGGER {name}")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION ingest_count_jobs()")
    op.drop_table("job_counts")
    op.drop_index("ix_jobs_pending_due", table_name="jobs")
    op.drop_index("ix_jobs_pending_created", table_name="jobs")
