"""What became of a suggestion after its outcome (issue 35): the editor's final report on
``outcomes`` — ``chars_kept`` (accepted characters still present ``kept_after`` keystrokes
later), ``undone`` (the accept was undone), ``switched_off`` (the person switched Tab off
after it) and ``final_at`` (when the report came). NULL in every row until a report
arrives, so older stores' outcomes read as "nothing further reported".

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("outcomes") as batch:  # SQLite cannot ALTER most things in place
        batch.add_column(sa.Column("chars_kept", sa.Integer))
        batch.add_column(sa.Column("kept_after", sa.Integer))
        batch.add_column(sa.Column("undone", sa.Boolean))
        batch.add_column(sa.Column("switched_off", sa.Boolean))
        batch.add_column(sa.Column("final_at", sa.Float))


def downgrade() -> None:
    with op.batch_alter_table("outcomes") as batch:
        batch.drop_column("final_at")
        batch.drop_column("switched_off")
        batch.drop_column("undone")
        batch.drop_column("kept_after")
        batch.drop_column("chars_kept")
