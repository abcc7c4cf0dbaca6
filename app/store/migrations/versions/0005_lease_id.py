"""jobs.lease_id: a random fencing token per claim

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A nullable column without a default: both databases add it in place (no batch copy).
    op.add_column("jobs", sa.Column("lease_id", sa.String(32), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "lease_id")  # SQLite 3.35+ drops columns in place
