"""Refreshes and content versions: job_contents keyed by (job_id, version) with the text's
sha256, title and page metadata; jobs' validators, text hash, content version, changed_at
and refresh schedule

Every job that succeeded before keeps its content as version 1: its text's sha256 is
computed here (Python's hashlib, a batch of rows at a time: no SQL function of both
databases hashes text), so its first refresh tells unchanged from changed.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

import hashlib
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 500


def upgrade() -> None:
    added: tuple[sa.Column[Any], ...] = (
        sa.Column("result_etag", sa.String(255), nullable=True),
        sa.Column("result_last_modified", sa.String(255), nullable=True),
        sa.Column("result_text_sha256", sa.String(64), nullable=True),
        sa.Column("content_version", sa.Integer(), nullable=True),
        sa.Column("changed_at", sa.DateTime(), nullable=True),
        sa.Column("refresh_every", sa.Integer(), nullable=True),
        sa.Column("refresh_at", sa.DateTime(), nullable=True),
    )
    for column in added:
        op.add_column("jobs", column)
    op.create_index(
        "ix_jobs_refresh_at",
        "jobs",
        ["refresh_at"],
        postgresql_where=sa.text("status = 'succeeded' AND refresh_at IS NOT NULL"),
        sqlite_where=sa.text("status = 'succeeded' AND refresh_at IS NOT NULL"),
    )
    op.create_index(
        "ix_jobs_changed",
        "jobs",
        ["changed_at"],
        postgresql_where=sa.text("changed_at IS NOT NULL"),
        sqlite_where=sa.text("changed_at IS NOT NULL"),
    )
    # The primary key grows a column: PostgreSQL alters the table in place, SQLite (which
    # cannot) copies it into a new one. Existing rows are version 1.
    new_columns: tuple[sa.Column[Any], ...] = (
        sa.Column("version", sa.Integer(), nullable=False, server_default=sa.text("1")),
        sa.Column("text_sha256", sa.String(64), nullable=True),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("page_metadata", sa.JSON(), nullable=True),
    )
    if op.get_bind().dialect.name == "postgresql":
        for column in new_columns:
            op.add_column("job_contents", column)
        op.drop_constraint("job_contents_pkey", "job_contents", type_="primary")
        op.create_primary_key("job_contents_pkey", "job_contents", ["job_id", "version"])
    else:
        _copy_contents(new_columns, ("job_id", "version"))
    op.execute(
        sa.text(
            "UPDATE job_contents SET"
            " title = (SELECT result_title FROM jobs WHERE id = job_contents.job_id),"
            " page_metadata = (SELECT result_metadata FROM jobs WHERE id = job_contents.job_id)"
        )
    )
    _hash_existing()


_OLD_COLUMNS = ("job_id", "content", "content_type", "text", "markdown", "text_length", "stored_at")


def _copy_contents(extra: tuple[sa.Column[Any], ...], key: tuple[str, ...]) -> None:
    """SQLite: job_contents rebuilt with the columns of 0008 and `extra`, keyed on `key`."""
    op.create_table(
        "job_contents_new",
        sa.Column(
            "job_id", sa.String(36), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("content_type", sa.String(255), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("markdown", sa.Text(), nullable=True),
        sa.Column("text_length", sa.Integer(), nullable=False),
        sa.Column("stored_at", sa.DateTime(), nullable=False),
        *extra,
        sa.PrimaryKeyConstraint(*key),
    )
    columns = ", ".join(_OLD_COLUMNS)
    op.execute(f"INSERT INTO job_contents_new ({columns}) SELECT {columns} FROM job_contents")
    op.drop_table("job_contents")
    op.rename_table("job_contents_new", "job_contents")


def _hash_existing() -> None:
    """Each stored text's hash, on its row and its job's, and the job's version 1."""
    bind = op.get_bind()
    contents = sa.table(
        "job_contents",
        sa.column("job_id", sa.String),
        sa.column("version", sa.Integer),
        sa.column("text", sa.Text),
        sa.column("text_sha256", sa.String),
        sa.column("stored_at", sa.DateTime),
    )
    jobs = sa.table(
        "jobs",
        sa.column("id", sa.String),
        sa.column("result_text_sha256", sa.String),
        sa.column("content_version", sa.Integer),
        sa.column("changed_at", sa.DateTime),
    )
    after = ""
    while True:
        rows = bind.execute(
            sa.select(contents.c.job_id, contents.c.text, contents.c.stored_at)
            .where(contents.c.job_id > after)
            .order_by(contents.c.job_id)
            .limit(_BATCH)
        ).all()
        if not rows:
            return
        hashed = [
            {
                "j": job_id,
                "h": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
                "at": stored_at,
            }
            for job_id, text, stored_at in rows
        ]
        bind.execute(
            sa.update(contents)
            .where(contents.c.job_id == sa.bindparam("j"))
            .values(text_sha256=sa.bindparam("h")),
            hashed,
        )
        bind.execute(
            sa.update(jobs)
            .where(jobs.c.id == sa.bindparam("j"))
            .values(
                result_text_sha256=sa.bindparam("h"),
                content_version=1,
                changed_at=sa.bindparam("at"),
            ),
            hashed,
        )
        after = rows[-1][0]


def downgrade() -> None:
    op.execute(sa.text("DELETE FROM job_contents WHERE version > 1"))
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint("job_contents_pkey", "job_contents", type_="primary")
        op.create_primary_key("job_contents_pkey", "job_contents", ["job_id"])
        for name in ("page_metadata", "title", "text_sha256", "version"):
            op.drop_column("job_contents", name)
    else:
        _copy_contents((), ("job_id",))
    op.drop_index("ix_jobs_changed", table_name="jobs")
    op.drop_index("ix_jobs_refresh_at", table_name="jobs")
    for name in (
        "refresh_at",
        "refresh_every",
        "changed_at",
        "content_version",
        "result_text_sha256",
        "result_last_modified",
        "result_etag",
    ):
        op.drop_column("jobs", name)
