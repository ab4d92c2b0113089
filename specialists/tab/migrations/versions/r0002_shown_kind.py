"""What the user saw and who chose it: ``actions.kind`` and ``actions.rule`` (issue 15).

``kind`` is what was shown — ``completion``, ``next_edit`` or ``jump`` — and NULL when
nothing was. ``rule`` is set when a rule of the specialist, not the policy's own choice,
decided what the user saw: ``rewrite`` or ``jump`` (shown where the policy showed nothing,
or held back), ``held`` (the policy's insertion was held back and nothing shown). Rows of
older stores keep NULL in both: their policy's choice was what the user saw.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("actions") as batch:  # SQLite cannot ALTER most things in place
        batch.add_column(sa.Column("kind", sa.String(16)))
        batch.add_column(sa.Column("rule", sa.String(16)))


def downgrade() -> None:
    with op.batch_alter_table("actions") as batch:
        batch.drop_column("rule")
        batch.drop_column("kind")
