"""The claim's indexes hold ready jobs only (pending, no `retry_after`), and a tenant's
waiting jobs get an index by when they come due

Jobs waiting for a retry, a deferral or a `not_before` piled up at the head of each
tenant's list in the claim's indexes, and every claim stepped over them (ten million jobs,
a fifth of the pending ones waiting: 47 ms a claim of 32). A waiting job now joins the
ready ones when it comes due: the claim moves it in (`app.store.claim`, step 0). Waiting
jobs already due when this runs are moved in by the first claim.

The new (tenant, retry_after) index of the waiting jobs makes a tenant's count of jobs not
due yet (GET /stats with a tenant's key) a range scan of that tenant's entries.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_READY = sa.text("status = 'pending' AND retry_after IS NULL")
_PENDING = sa.text("status = 'pending'")
_WAITING = sa.text("status = 'pending' AND retry_after IS NOT NULL")


def _claim_indexes(where: sa.TextClause) -> None:
    op.create_index(
        "ix_jobs_claim",
        "jobs",
        [sa.text("priority DESC"), "created_at"],
        postgresql_where=where,
        sqlite_where=where,
    )
    op.create_index(
        "ix_jobs_tenant_claim",
        "jobs",
        ["tenant", sa.text("priority DESC"), "created_at"],
        postgresql_where=where,
        sqlite_where=where,
    )


def upgrade() -> None:
    op.drop_index("ix_jobs_claim", table_name="jobs")
    op.drop_index("ix_jobs_tenant_claim", table_name="jobs")
    _claim_indexes(_READY)
    op.create_index(
        "ix_jobs_tenant_retry_after",
        "jobs",
        ["tenant", "retry_after"],
        postgresql_where=_WAITING,
        sqlite_where=_WAITING,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_tenant_retry_after", table_name="jobs")
    op.drop_index("ix_jobs_claim", table_name="jobs")
    op.drop_index("ix_jobs_tenant_claim", table_name="jobs")
    _claim_indexes(_PENDING)
