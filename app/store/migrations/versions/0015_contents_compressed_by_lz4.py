"""PostgreSQL compresses the stored bodies, texts and Markdown with lz4

A page's body (85 KB at the median of the extraction benchmark's pages) goes to TOAST,
compressed by pglz unless told otherwise: 3.9-4.8 ms of the server's CPU a page, against
1.1-1.2 ms with lz4 for the same size on disk. Only values written from now on are
compressed by lz4; those stored before stay as they are, and read as before. A server
without lz4 (built without it, or older than PostgreSQL 14) keeps pglz. SQLite compresses
nothing: no change there.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("content", "text", "markdown")


def _compress_with(method: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    alter = "ALTER TABLE job_contents " + ", ".join(
        f"ALTER COLUMN {column} SET COMPRESSION {method}" for column in COLUMNS
    )
    # EXECUTE, so a server older than 14 (no SET COMPRESSION) skips it rather than fail
    # to parse it; a server built without lz4 refuses it as not supported.
    op.execute(
        f"""
        DO $$
        BEGIN
            IF current_setting('server_version_num')::int >= 140000 THEN
                EXECUTE '{alter}';
            END IF;
        EXCEPTION WHEN feature_not_supported THEN
            RAISE NOTICE 'no {method} on this server: job_contents keeps its compression';
        END $$
        """
    )


def upgrade() -> None:
    _compress_with("lz4")


def downgrade() -> None:
    # The server's default_toast_compression (pglz unless configured), as before.
    _compress_with("default")
