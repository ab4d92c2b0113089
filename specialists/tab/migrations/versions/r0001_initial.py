"""The first schema: actions, outcomes, deploys (what ``schema_version`` 1 meant before
the store moved to Alembic; such stores are stamped at this revision, not re-created).

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "actions",
        sa.Column("request_id", sa.String(200), primary_key=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("route", sa.String(64), nullable=False),
        sa.Column("policy_version", sa.String(64), nullable=False),
        sa.Column("state_digest", sa.String(64), nullable=False),
        sa.Column("features", sa.Text, nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("logprob", sa.Float, nullable=False),
        sa.Column("suggestion", sa.Text),
        sa.Column("shown", sa.Boolean, nullable=False),
        sa.Column("latency_ms", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float))
    op.create_index("ix_actions_created_at", "actions", ["created_at"])
    op.create_index("ix_actions_policy_version", "actions", ["policy_version"])
    op.create_table(
        "outcomes",
        sa.Column("request_id", sa.String(200), primary_key=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("chars_accepted", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("source", sa.String(16), nullable=False))
    op.create_table(
        "deploys",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("detail", sa.Text, nullable=False))


def downgrade() -> None:
    op.drop_table("deploys")
    op.drop_table("outcomes")
    op.drop_index("ix_actions_policy_version", table_name="actions")
    op.drop_index("ix_actions_created_at", table_name="actions")
    op.drop_table("actions")
