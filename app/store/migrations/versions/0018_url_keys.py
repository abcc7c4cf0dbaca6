"""URL keys: job_urls (each job's URL key and its digest, indexed per tenant) and
jobs.unique_key with the partial unique index that makes two unique submits one job

Every job's key is computed here (`app.rules.url_key`, in Python, a batch of jobs at a
time: no SQL of both databases normalizes a URL) and inserted into job_urls; the rows of
jobs are not rewritten. A URL httpx cannot parse (none the API accepted) gets no key. A
job submitted by an older version after this runs has no key either (`GET /jobs?url=`
does not find it). No job held its key before: unique_key starts null everywhere.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.rules.url_key import url_hash, url_key

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 2000
# Two equalities, not IN: PostgreSQL's rendering of an IN over a varchar does not read back
# as the same index (an index made again from its definition would differ).
_HOLDS_KEY = sa.text("unique_key IS NOT NULL AND (status = 'pending' OR status = 'running')")


def upgrade() -> None:
    op.create_table(
        "job_urls",
        sa.Column(
            "job_id",
            sa.String(36),
            sa.ForeignKey("jobs.id", ondelete="CASCADE", onupdate="CASCADE"),
            primary_key=True,
        ),
        sa.Column("tenant", sa.String(100), nullable=False),
        sa.Column("url_hash", sa.BigInteger(), nullable=False),
        sa.Column("url_key", sa.Text(), nullable=False),
    )
    _key_existing()
    op.create_index("ix_job_urls_key", "job_urls", ["url_hash", "tenant"])
    op.add_column("jobs", sa.Column("unique_key", sa.BigInteger(), nullable=True))
    op.create_index(
        "uq_jobs_unique_key",
        "jobs",
        ["unique_key", "tenant"],
        unique=True,
        postgresql_where=_HOLDS_KEY,
        sqlite_where=_HOLDS_KEY,
    )


def _key_existing() -> None:
    """Each job's URL key, into job_urls (before its index: built once, not row by row)."""
    bind = op.get_bind()
    jobs = sa.table(
        "jobs", sa.column("id", sa.String), sa.column("tenant", sa.String), sa.column("url")
    )
    job_urls = sa.table(
        "job_urls",
        sa.column("job_id", sa.String),
        sa.column("tenant", sa.String),
        sa.column("url_hash", sa.BigInteger),
        sa.column("url_key", sa.Text),
    )
    after = ""
    while True:
        rows = bind.execute(
            sa.select(jobs.c.id, jobs.c.tenant, jobs.c.url)
            .where(jobs.c.id > after)
            .order_by(jobs.c.id)
            .limit(_BATCH)
        ).all()
        if not rows:
            return
        keyed = []
        for job_id, tenant, url in rows:
            try:
                key = url_key(url)
            except ValueError:
                continue
            keyed.append(
                {"job_id": job_id, "tenant": tenant, "url_hash": url_hash(key), "url_key": key}
            )
        if keyed:
            bind.execute(job_urls.insert(), keyed)
        after = rows[-1][0]


def downgrade() -> None:
    op.drop_index("uq_jobs_unique_key", table_name="jobs")
    op.drop_column("jobs", "unique_key")  # SQLite 3.35+ drops columns in place
    op.drop_table("job_urls")
