"""An attempt's history row is written once, when the attempt ends

The claim wrote each attempt's row and the record wrote it again: at ten million jobs the
claim's insert cost a claim of 32 a quarter of its time. The claim now writes none; the
record inserts the whole row, and the attempt running now is read off its job's row
(`JobStore.attempts`). The rows of attempts still running when this runs are deleted: their
jobs' rows say the same, and the record that ends them writes them whole.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("DELETE FROM attempts WHERE outcome IS NULL")


def downgrade() -> None:
    # The claim of the older version opened each attempt's row: open those of the running
    # jobs again, so their records close them.
    op.execute(
        "INSERT INTO attempts (job_id, number, worker_id, started_at) "
        "SELECT id, attempts, COALESCE(worker_id, ''), started_at FROM jobs "
        "WHERE status = 'running' AND started_at IS NOT NULL"
    )
