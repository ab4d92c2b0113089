"""Virtual keys with budgets and rate limits, and the budget reservations of requests in
flight (issue 37): ``virtual_keys`` and ``key_reservations``.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "virtual_keys",
        sa.Column("key_hash", sa.String(64), primary_key=True),
        sa.Column("key_alias", sa.String(32), nullable=False),
        sa.Column("key_name", sa.String(200)),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float),
        sa.Column("revoked_at", sa.Float),
        sa.Column("max_budget", sa.Float),
        sa.Column("spend", sa.Float, nullable=False),
        sa.Column("requests", sa.Integer, nullable=False),
        sa.Column("rpm_limit", sa.Integer),
        sa.Column("tpm_limit", sa.Integer),
        sa.Column("allowed_routes", sa.Text),
        sa.Column("models", sa.Text),
        sa.Column("key_metadata", sa.Text, nullable=False))
    op.create_table(
        "key_reservations",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("amount", sa.Float, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False))
    op.create_index("ix_key_reservations_key_hash", "key_reservations", ["key_hash"])


def downgrade() -> None:
    op.drop_index("ix_key_reservations_key_hash", table_name="key_reservations")
    op.drop_table("key_reservations")
    op.drop_table("virtual_keys")
