"""workers: each worker process's row; attempts.queue_lag_ms and an index on finished_at,
for the dashboard's last hour

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("id", sa.String(100), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(32), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("running", sa.Integer(), nullable=False),
        sa.Column("queued", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("last_heartbeat_at", sa.DateTime(), nullable=False),
        sa.Column("stopped_at", sa.DateTime(), nullable=True),
    )
    # A nullable column without a default: both databases add it in place (no batch copy).
    op.add_column("attempts", sa.Column("queue_lag_ms", sa.BigInteger(), nullable=True))
    op.create_index("ix_attempts_finished", "attempts", ["finished_at"])


def downgrade() -> None:
    op.drop_index("ix_attempts_finished", table_name="attempts")
    op.drop_column("attempts", "queue_lag_ms")  # SQLite 3.35+ drops columns in place
    op.drop_table("workers")
