"""The event store's schema migrations (Alembic), run by ``EventStore`` each time it opens.

``upgrade(engine)`` brings a store to the newest revision in ``versions/`` and returns it.
It needs no ``alembic.ini``: the script directory is this package, and Alembic runs on the
store's own connection inside one transaction that holds a lock, so several server workers
opening the same store at once migrate it once (PostgreSQL: an advisory lock, and its DDL
is transactional; SQLite: ``BEGIN IMMEDIATE``, the database's write lock).

A store made before Alembic (a ``schema_version`` table holding the migration number) is
adopted: stamped at the revision that number stands for (``LEGACY_REVISIONS``), its
``schema_version`` table dropped, nothing else touched; then upgraded like any other.

A store at a revision this code does not know (written by a newer complement) is refused
with ``RuntimeError`` rather than written to.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

__all__ = ["LEGACY_REVISIONS", "SCRIPT_DIR", "head", "upgrade"]

SCRIPT_DIR = Path(__file__).resolve().parent
#: ``schema_version`` number of the old hand-numbered scheme → the revision with that schema.
LEGACY_REVISIONS = {1: "0001"}
# any constant both sides agree on: the advisory lock that serialises migrations on PostgreSQL
_PG_LOCK_KEY = 0x636F6D70  # "comp"


def _config(connection: "Connection | None" = None) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(SCRIPT_DIR))
    config.attributes["connection"] = connection
    return config


def head() -> str:
    """The newest revision this code knows."""
    from alembic.script import ScriptDirectory

    heads = ScriptDirectory.from_config(_config()).get_heads()
    if len(heads) != 1:  # two revisions with the same parent: someone forgot to rebase one
        raise RuntimeError(f"the event store's migrations have {len(heads)} heads {heads}; "
                           "give one revision the other as its down_revision")
    return str(heads[0])


def upgrade(engine: "Engine") -> str:
    """Migrate the store behind ``engine`` to ``head()``; the revision it is now at."""
    from alembic import command

    target = head()
    with _locked(engine) as conn:
        config = _config(conn)
        _adopt_legacy(conn, config)
        _refuse_unknown(conn, config, target)
        command.upgrade(config, "head")
    return target


@contextmanager
def _locked(engine: "Engine") -> Iterator["Connection"]:
    """One transaction on ``engine``'s database that no other migration runs beside."""
    from sqlalchemy import create_engine, event, pool, text

    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
            yield conn
        return
    if engine.dialect.name != "sqlite" or engine.url.database in (None, "", ":memory:"):
        with engine.begin() as conn:  # nothing else can see this database
            yield conn
        return
    # pysqlite does not begin a transaction before DDL; take over: BEGIN IMMEDIATE holds
    # the write lock from the first statement, so CREATE TABLE and the version row commit
    # together and a second process waits (busy timeout), then finds the work done.
    locking = create_engine(engine.url, poolclass=pool.NullPool, connect_args={"timeout": 60})

    @event.listens_for(locking, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # the driver emits no BEGIN / COMMIT of its own

    @event.listens_for(locking, "begin")
    def _begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    try:
        with locking.begin() as conn:
            yield conn
    finally:
        locking.dispose()


def _adopt_legacy(conn: "Connection", config: Any) -> None:
    from alembic import command
    from sqlalchemy import inspect, text

    tables = set(inspect(conn).get_table_names())
    if "schema_version" not in tables or "alembic_version" in tables:
        return
    number = conn.execute(text("SELECT max(version) FROM schema_version")).scalar()
    if number is None:  # the old code wrote its row in the transaction that made the table
        number = min(LEGACY_REVISIONS)
    if int(number) not in LEGACY_REVISIONS:
        raise RuntimeError(f"the event store {_shown(conn)} has schema version {number}, "
                           f"newer than this code knows ({max(LEGACY_REVISIONS)}); "
                           "upgrade complement")
    command.stamp(config, LEGACY_REVISIONS[int(number)])
    conn.execute(text("DROP TABLE schema_version"))


def _refuse_unknown(conn: "Connection", config: Any, target: str) -> None:
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    script = ScriptDirectory.from_config(config)
    for current in MigrationContext.configure(conn).get_current_heads():
        try:
            script.get_revision(current)
        except CommandError:
            raise RuntimeError(f"the event store {_shown(conn)} is at schema revision "
                               f"{current!r}, which this code does not know (its newest is "
                               f"{target!r}): it is newer than this code; upgrade "
                               "complement") from None


def _shown(conn: "Connection") -> str:
    return repr(conn.engine.url.render_as_string(hide_password=True))
