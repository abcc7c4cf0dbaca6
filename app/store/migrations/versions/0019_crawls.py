"""Crawls: crawls, their frontier (crawl_urls, one row per URL a crawl found, keyed by
crawl, kind and URL key), their tallies and rounds, jobs' crawl_id, crawl_depth and
found_on, each content version's links, and deliveries of a crawl

Existing rows stay as they are: no job belongs to a crawl, no version has links (null).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BIGINT_PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_NEW = sa.text("state = 'new'")
_IN_CRAWL = sa.text("crawl_id IS NOT NULL")


def upgrade() -> None:
    op.create_table(
        "crawls",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("tenant", sa.String(100), nullable=False),
        sa.Column("mode", sa.String(8), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("seeds", sa.JSON(), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("made", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("refresh_every", sa.Integer(), nullable=True),
        sa.Column("round", sa.Integer(), nullable=False, server_default=sa.text("1")),
        sa.Column("round_started_at", sa.DateTime(), nullable=False),
        sa.Column("next_round_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
    )
    op.create_index("ix_crawls_tenant_created", "crawls", ["tenant", "created_at", "id"])
    op.create_index(
        "ix_crawls_running",
        "crawls",
        ["updated_at"],
        postgresql_where=sa.text("status = 'running'"),
        sqlite_where=sa.text("status = 'running'"),
    )
    op.create_index(
        "ix_crawls_next_round",
        "crawls",
        ["next_round_at"],
        postgresql_where=sa.text("next_round_at IS NOT NULL"),
        sqlite_where=sa.text("next_round_at IS NOT NULL"),
    )
    op.create_table(
        "crawl_urls",
        sa.Column(
            "crawl_id",
            sa.String(36),
            sa.ForeignKey("crawls.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("kind", sa.String(8), primary_key=True),
        sa.Column("url_hash", sa.BigInteger(), primary_key=True),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("state", sa.String(12), nullable=False),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(8), nullable=False),
        sa.Column("found_on", sa.Text(), nullable=True),
        sa.Column("lastmod", sa.String(40), nullable=True),
        sa.Column("job_id", sa.String(36), nullable=True),
        sa.Column("first_round", sa.Integer(), nullable=True),
        sa.Column("round", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index(
        "ix_crawl_urls_new",
        "crawl_urls",
        ["crawl_id", "kind", "depth"],
        postgresql_where=_NEW,
        sqlite_where=_NEW,
    )
    op.create_table(
        "crawl_rounds",
        sa.Column(
            "crawl_id",
            sa.String(36),
            sa.ForeignKey("crawls.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("round", sa.Integer(), primary_key=True),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("pages", sa.JSON(), nullable=False),
    )
    op.create_table(
        "crawl_tallies",
        sa.Column("id", _BIGINT_PK, primary_key=True, autoincrement=True),
        sa.Column(
            "crawl_id",
            sa.String(36),
            sa.ForeignKey("crawls.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(16), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
    )
    op.create_index("ix_crawl_tallies_crawl", "crawl_tallies", ["crawl_id"])
    op.add_column("jobs", sa.Column("crawl_id", sa.String(36), nullable=True))
    op.add_column("jobs", sa.Column("crawl_depth", sa.Integer(), nullable=True))
    op.add_column("jobs", sa.Column("found_on", sa.Text(), nullable=True))
    op.create_index(
        "ix_jobs_crawl",
        "jobs",
        ["crawl_id", "status"],
        postgresql_where=_IN_CRAWL,
        sqlite_where=_IN_CRAWL,
    )
    op.add_column("job_contents", sa.Column("links", sa.JSON(), nullable=True))
    # A crawl's callbacks (crawl.completed, crawl.changed) are deliveries of no job.
    with op.batch_alter_table("deliveries", reflect_kwargs={"resolve_fks": False}) as deliveries:
        deliveries.add_column(
            sa.Column(
                "crawl_id",
                sa.String(36),
                sa.ForeignKey("crawls.id", name="fk_deliveries_crawl", ondelete="CASCADE"),
                nullable=True,
            )
        )
        deliveries.alter_column("job_id", existing_type=sa.String(36), nullable=True)


def downgrade() -> None:
    op.execute("DELETE FROM deliveries WHERE job_id IS NULL")
    with op.batch_alter_table("deliveries", reflect_kwargs={"resolve_fks": False}) as deliveries:
        deliveries.alter_column("job_id", existing_type=sa.String(36), nullable=False)
        deliveries.drop_constraint("fk_deliveries_crawl", type_="foreignkey")
        deliveries.drop_column("crawl_id")
    op.drop_column("job_contents", "links")
    op.drop_index("ix_jobs_crawl", table_name="jobs")
    for column in ("found_on", "crawl_depth", "crawl_id"):
        op.drop_column("jobs", column)  # SQLite 3.35+ drops columns in place
    op.drop_table("crawl_tallies")
    op.drop_table("crawl_rounds")
    op.drop_table("crawl_urls")
    op.drop_table("crawls")
