"""The event store's tables as they are at the newest migration: what ``EventStore`` queries
and what ``alembic revision --autogenerate`` compares a database with.

Changing a table here is half of a schema change; the other half is a new revision in
``specialists/tab/migrations/versions/`` that brings existing stores to the same shape.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Column, Float, Integer, MetaData, String, Table, Text

__all__ = ["actions", "deploys", "key_reservations", "metadata", "outcomes", "virtual_keys"]

metadata = MetaData()

actions = Table(
    "actions", metadata,
    Column("request_id", String(200), primary_key=True),
    Column("created_at", Float, nullable=False, index=True),
    Column("route", String(64), nullable=False),
    Column("policy_version", String(64), nullable=False, index=True),
    Column("state_digest", String(64), nullable=False),
    Column("features", Text, nullable=False),
    Column("action", String(64), nullable=False),
    Column("logprob", Float, nullable=False),
    Column("suggestion", Text),
    Column("shown", Boolean, nullable=False),
    Column("latency_ms", Float, nullable=False),
    Column("expires_at", Float),
    Column("kind", String(16)),
    Column("rule", String(16)))
"""``kind``: what the user saw (``completion``, ``next_edit``, ``jump``; NULL: nothing).
``rule``: set when one of the specialist's rules, not the policy's own choice, decided it
(``rewrite``, ``jump``, ``held``); the policy's action is then credited as showing nothing."""

outcomes = Table(
    "outcomes", metadata,
    Column("request_id", String(200), primary_key=True),
    Column("outcome", String(16), nullable=False),
    Column("chars_accepted", Integer, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("source", String(16), nullable=False),
    Column("chars_kept", Integer),
    Column("kept_after", Integer),
    Column("undone", Boolean),
    Column("switched_off", Boolean),
    Column("final_at", Float))
"""``chars_kept`` .. ``final_at``: the editor's final report on what became of a suggestion
(issue 35), NULL until one arrives: accepted characters still present ``kept_after``
keystrokes later, an accept ``undone``, Tab ``switched_off`` after it."""

deploys = Table(
    "deploys", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("created_at", Float, nullable=False),
    Column("version", String(64), nullable=False),
    Column("event", String(32), nullable=False),
    Column("detail", Text, nullable=False))

virtual_keys = Table(
    "virtual_keys", metadata,
    Column("key_hash", String(64), primary_key=True),
    Column("key_alias", String(32), nullable=False),
    Column("key_name", String(200)),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("expires_at", Float),
    Column("revoked_at", Float),
    Column("max_budget", Float),
    Column("spend", Float, nullable=False),
    Column("requests", Integer, nullable=False),
    Column("rpm_limit", Integer),
    Column("tpm_limit", Integer),
    Column("allowed_routes", Text),
    Column("models", Text),
    Column("key_metadata", Text, nullable=False))
"""The router's virtual keys (issue 37): a key is stored only as the SHA-256 of its text
(``key_hash``); ``key_alias`` is its first and last characters, to tell keys apart.
``spend`` (USD) is the settled cost of every request made with it; ``allowed_routes`` and
``models`` are JSON lists (NULL: any)."""

key_reservations = Table(
    "key_reservations", metadata,
    Column("id", String(64), primary_key=True),
    Column("key_hash", String(64), nullable=False, index=True),
    Column("amount", Float, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False))
"""A request's worst-case cost held against its key's budget until the request settles
(its row deleted and its real cost added to ``spend`` in one transaction). A row left by
a killed server stops counting at ``expires_at``."""
