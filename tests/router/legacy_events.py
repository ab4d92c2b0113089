"""The event store's schema as complement made it before Alembic (``specialists/tab/
events.py`` up to commit 15ac810): ``_v1`` and the migration step copied verbatim, so the
tests can build a store "by the old code path" on SQLite and PostgreSQL alike.
(``fixtures/events-schema-v1.sqlite3`` is a file that old code itself wrote.)
"""

from __future__ import annotations

from typing import Any, Callable


def _v1(metadata: Any) -> None:
    from sqlalchemy import Boolean, Column, Float, Integer, String, Table, Text

    Table("actions", metadata,
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
          Column("expires_at", Float))
    Table("outcomes", metadata,
          Column("request_id", String(200), primary_key=True),
          Column("outcome", String(16), nullable=False),
          Column("chars_accepted", Integer, nullable=False),
          Column("created_at", Float, nullable=False),
          Column("source", String(16), nullable=False))
    Table("deploys", metadata,
          Column("id", Integer, primary_key=True, autoincrement=True),
          Column("created_at", Float, nullable=False),
          Column("version", String(64), nullable=False),
          Column("event", String(32), nullable=False),
          Column("detail", Text, nullable=False))


MIGRATIONS: list[tuple[int, Callable[[Any], None]]] = [(1, _v1)]


def make_legacy_store(url: str) -> Any:
    """Open ``url`` the old way (schema_version table, create_all); the engine."""
    from sqlalchemy import Column, Integer, MetaData, Table, create_engine, select

    engine = create_engine(url)
    meta = MetaData()
    version_table = Table("schema_version", meta, Column("version", Integer, nullable=False))
    with engine.begin() as conn:
        meta.create_all(conn)
        current = conn.execute(select(version_table.c.version)).scalar()
        latest = MIGRATIONS[-1][0]
        for number, add_tables in MIGRATIONS:
            if current is None or number > current:
                step = MetaData()
                add_tables(step)
                step.create_all(conn)
        if current is None:
            conn.execute(version_table.insert().values(version=latest))
    return engine
