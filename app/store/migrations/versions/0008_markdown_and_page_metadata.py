"""job_contents.markdown; jobs.result_metadata (the page's metadata) and jobs.callback_content
(what a callback carries of the content)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable columns without a default: both databases add them in place (no batch copy),
    # and the rows of jobs fetched before are null: no Markdown, no metadata kept.
    op.add_column("job_contents", sa.Column("markdown", sa.Text(), nullable=True))
    op.add_column("jobs", sa.Column("result_metadata", sa.JSON(), nullable=True))
    op.add_column("jobs", sa.Column("callback_content", sa.String(16), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "callback_content")  # SQLite 3.35+ drops columns in place
    op.drop_column("jobs", "result_metadata")
    op.drop_column("job_contents", "markdown")
