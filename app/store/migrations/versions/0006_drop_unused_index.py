"""Drop ix_job_contents_stored_at: no query has used it since retention deletes whole jobs

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_job_contents_stored_at", table_name="job_contents")


def downgrade() -> None:
    op.create_index("ix_job_contents_stored_at", "job_contents", ["stored_at"])
