"""job_contents: a succeeded job's body and extracted text; jobs.result_text_length

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("result_text_length", sa.Integer(), nullable=True))
    op.create_table(
        "job_contents",
        sa.Column(
            "job_id",
            sa.String(36),
            sa.ForeignKey("jobs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("content_type", sa.String(255), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("text_length", sa.Integer(), nullable=False),
        sa.Column("stored_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_job_contents_stored_at", "job_contents", ["stored_at"])


def downgrade() -> None:
    op.drop_table("job_contents")
    op.drop_column("jobs", "result_text_length")  # SQLite 3.35+ drops columns in place
