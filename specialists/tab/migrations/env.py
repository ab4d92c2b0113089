"""Alembic's entry point for the event store's migrations.

``specialists.tab.migrations.upgrade`` runs it with the store's own connection, already in a
locked transaction (``config.attributes["connection"]``). From the ``alembic`` command line
(developers: new revisions, ``--sql`` scripts for a DBA) it connects to the URL given as
``-x url=...``; see ``specialists/tab/migrations/alembic.ini``.
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import create_engine, pool

from specialists.tab.schema import metadata


def _configure(**kwargs: Any) -> None:
    context.configure(target_metadata=metadata, compare_type=True, **kwargs)


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or \
        context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("name the event store: alembic -x url=sqlite:///path/events.sqlite3 ...")
    return url


def run_offline() -> None:
    """``alembic upgrade head --sql``: the SQL a DBA can read and run."""
    _configure(url=_url(), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online(connection: Any) -> None:
    # SQLite cannot ALTER most things in place; batch mode copies the table instead.
    _configure(connection=connection, render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
elif context.config.attributes.get("connection") is not None:
    run_online(context.config.attributes["connection"])
else:
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.begin() as conn:
        run_online(conn)
    engine.dispose()
