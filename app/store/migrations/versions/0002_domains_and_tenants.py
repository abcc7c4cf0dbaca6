"""domains and tenants: per-domain pauses and politeness, fair share across tenants

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "domains",
        sa.Column("domain", sa.String(300), primary_key=True),
        sa.Column("paused_until", sa.DateTime(), nullable=True),
        sa.Column("pause_reason", sa.String(), nullable=True),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("in_flight", sa.Integer(), nullable=False),
        sa.Column("last_started_at", sa.DateTime(), nullable=True),
        sa.Column("next_start_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
    )
    op.execute(
        "INSERT INTO domains (domain, consecutive_failures, in_flight)"
        " SELECT domain, 0, SUM(CASE WHEN status = 'running' THEN 1 ELSE 0 END)"
        " FROM jobs GROUP BY domain"
    )
    op.create_table(
        "tenants",
        sa.Column("tenant", sa.String(100), primary_key=True),
        sa.Column("last_served_at", sa.DateTime(), nullable=True),
    )
    op.execute("INSERT INTO tenants (tenant) SELECT DISTINCT tenant FROM jobs")
    running = sa.text("status = 'running'")
    op.create_index(
        "ix_jobs_running_domain",
        "jobs",
        ["domain"],
        postgresql_where=running,
        sqlite_where=running,
    )
    pending = sa.text("status = 'pending'")
    op.create_index(
        "ix_jobs_tenant_claim",
        "jobs",
        ["tenant", sa.text("priority DESC"), "created_at"],
        postgresql_where=pending,
        sqlite_where=pending,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_tenant_claim", table_name="jobs")
    op.drop_index("ix_jobs_running_domain", table_name="jobs")
    op.drop_table("tenants")
    op.drop_table("domains")
