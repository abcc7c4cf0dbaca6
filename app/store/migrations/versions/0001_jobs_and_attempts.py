"""jobs and attempts

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PENDING = sa.text("status = 'pending'")


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("domain", sa.String(300), nullable=False),
        sa.Column("tenant", sa.String(100), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("deferrals", sa.Integer(), nullable=False),
        sa.Column("retry_after", sa.DateTime(), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(), nullable=True),
        sa.Column("worker_id", sa.String(100), nullable=True),
        sa.Column("last_error_kind", sa.String(16), nullable=True),
        sa.Column("last_error_type", sa.String(100), nullable=True),
        sa.Column("last_error_message", sa.String(), nullable=True),
        sa.Column("last_error_http_status", sa.Integer(), nullable=True),
        sa.Column("last_error_at", sa.DateTime(), nullable=True),
        sa.Column("dead_reason", sa.String(32), nullable=True),
        sa.Column("result_http_status", sa.Integer(), nullable=True),
        sa.Column("result_final_url", sa.String(), nullable=True),
        sa.Column("result_content_type", sa.String(255), nullable=True),
        sa.Column("result_bytes", sa.BigInteger(), nullable=True),
        sa.Column("result_sha256", sa.String(64), nullable=True),
        sa.Column("result_title", sa.String(), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=True),
        sa.Column("callback_url", sa.String(2048), nullable=True),
        sa.Column("idempotency_key", sa.String(255), nullable=True),
        sa.Column("idempotency_fingerprint", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.UniqueConstraint("tenant", "idempotency_key", name="uq_jobs_tenant_idempotency_key"),
    )
    op.create_index(
        "ix_jobs_claim",
        "jobs",
        [sa.text("priority DESC"), "created_at"],
        postgresql_where=PENDING,
        sqlite_where=PENDING,
    )
    pending_waiting = sa.text("status = 'pending' AND retry_after IS NOT NULL")
    op.create_index(
        "ix_jobs_pending_retry_after",
        "jobs",
        ["retry_after"],
        postgresql_where=pending_waiting,
        sqlite_where=pending_waiting,
    )
    running = sa.text("status = 'running'")
    op.create_index(
        "ix_jobs_running_lease",
        "jobs",
        ["lease_expires_at"],
        postgresql_where=running,
        sqlite_where=running,
    )
    dead = sa.text("status = 'dead'")
    op.create_index(
        "ix_jobs_dead_created",
        "jobs",
        ["created_at", "id"],
        postgresql_where=dead,
        sqlite_where=dead,
    )
    op.create_index("ix_jobs_created", "jobs", ["created_at", "id"])
    op.create_index("ix_jobs_domain_created", "jobs", ["domain", "created_at", "id"])

    op.create_table(
        "attempts",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column(
            "job_id",
            sa.String(36),
            sa.ForeignKey("jobs.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.String(100), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.Column("error_type", sa.String(100), nullable=True),
        sa.Column("message", sa.String(), nullable=True),
        sa.Column("http_status", sa.Integer(), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=True),
        sa.Column("next_retry_at", sa.DateTime(), nullable=True),
    )
    op.create_index("ix_attempts_job", "attempts", ["job_id", "id"])


def downgrade() -> None:
    op.drop_table("attempts")
    op.drop_table("jobs")
