"""domains.crawl_delay_seconds: the Crawl-delay of a domain's robots.txt when a worker last
read it (INGEST_ROBOTS_TXT=obey), which every claim spaces the domain's starts by

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable without a default: both databases add it in place; existing domains have
    # none until a worker that obeys robots.txt reads theirs.
    op.add_column("domains", sa.Column("crawl_delay_seconds", sa.Float(), nullable=True))


def downgrade() -> None:
    op.drop_column("domains", "crawl_delay_seconds")  # SQLite 3.35+ drops columns in place
