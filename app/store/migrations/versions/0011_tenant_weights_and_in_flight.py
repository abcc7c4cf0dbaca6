"""Tenants' weighted fair share and jobs in flight: tenants' next_pass, last_pass and
in_flight

Every tenant starts at pass 0 (level: the first claims order them by when each was last
served, as before). Its jobs in flight are counted from its running jobs, so those running
during the upgrade are freed as their outcomes are recorded.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tenants") as table:
        for name, kind in (
            ("next_pass", sa.BigInteger()),
            ("last_pass", sa.BigInteger()),
            ("in_flight", sa.Integer()),
        ):
            table.add_column(sa.Column(name, kind, nullable=False, server_default=sa.text("0")))
    op.execute(
        sa.text(
            "UPDATE tenants SET in_flight = (SELECT count(*) FROM jobs"
            " WHERE jobs.tenant = tenants.tenant AND jobs.status = 'running')"
        )
    )


def downgrade() -> None:
    with op.batch_alter_table("tenants") as table:
        table.drop_column("in_flight")
        table.drop_column("last_pass")
        table.drop_column("next_pass")
