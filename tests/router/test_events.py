"""The event store on SQLite and on a real PostgreSQL server (when one is reachable)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from specialists.base import ConflictError, NotFoundError, SpecialistError
from specialists.tab.events import ActionRecord, EventStore, Feedback, PoolOptions, sqlite_url
from specialists.tab.migrations import head

PG_URL = os.environ.get("COMPLEMENT_TEST_PG_URL", "")
REPO = Path(__file__).resolve().parents[2]


def _pg_database() -> Iterator[str]:
    from sqlalchemy import create_engine, text

    if not PG_URL:
        pytest.skip("PostgreSQL tests skipped: COMPLEMENT_TEST_PG_URL is not set "
                    "(.ci/run starts a server and sets it)")
    name = f"complement_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # no server: say so, do not fail the SQLite half
        pytest.skip(f"PostgreSQL tests skipped: cannot reach {PG_URL}: {exc}")
    base, _, _ = PG_URL.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield sqlite_url(tmp_path)
    else:
        yield from _pg_database()


@pytest.fixture
def store(url: str) -> Iterator[EventStore]:
    s = EventStore(url, feedback_timeout_s=5)
    try:
        yield s
    finally:
        s.close()


def act(rid: str, version: str = "v1", shown: bool = True, text: str = "abc") -> ActionRecord:
    return ActionRecord(rid, version, "show" if shown else "none", -0.25, shown,
                        features={"match_len": 12}, suggestion=text if shown else None)


def test_training_reads_only_labelled_current_version(store: EventStore) -> None:
    store.record_action(act("a", "v1"))
    store.record_action(act("b", "v1", shown=False))
    store.record_action(act("c", "v1"))  # shown, no feedback yet: not labelled
    store.record_action(act("old", "v0"))
    store.record_feedback(Feedback("a", "accepted"))
    store.record_feedback(Feedback("old", "rejected"))
    events = store.labelled("v1")
    assert [(e.request_id, e.outcome) for e in events] == [("a", "accepted"), ("b", None)]
    assert events[0].features == {"match_len": 12} and events[0].chars_accepted == 3
    assert store.count_other_versions("v1") == 1
    assert store.pending() == 1


def test_feedback_is_idempotent_and_conflicts_are_refused(store: EventStore) -> None:
    store.record_action(act("r"))
    assert store.record_feedback(Feedback("r", "accepted")) is True
    assert store.record_feedback(Feedback("r", "accepted")) is False
    assert store.counts()["outcomes"] == 1
    with pytest.raises(ConflictError, match="already has outcome 'accepted'"):
        store.record_feedback(Feedback("r", "rejected"))
    with pytest.raises(NotFoundError, match="no tab request"):
        store.record_feedback(Feedback("ghost", "accepted"))
    store.record_action(act("silent", shown=False))
    with pytest.raises(ConflictError, match="showed no suggestion"):
        store.record_feedback(Feedback("silent", "accepted"))
    with pytest.raises(SpecialistError):
        store.record_feedback(Feedback("r", "maybe"))  # type: ignore[arg-type]


def test_partial_and_clamped_chars(store: EventStore) -> None:
    store.record_action(act("p", text="hello world"))
    store.record_action(act("q", text="hi"))
    store.record_feedback(Feedback("p", "partial", chars_accepted=5))
    store.record_feedback(Feedback("q", "accepted", chars_accepted=99))
    by_id = {e.request_id: e for e in store.labelled("v1")}
    assert by_id["p"].chars_accepted == 5 and by_id["q"].chars_accepted == 2


def test_a_final_report_is_stored_once_and_says_what_was_kept(store: EventStore) -> None:
    """Issue 35: after the outcome, what became of the suggestion — kept characters, an
    undo, Tab switched off — comes with the outcome or later; stored once, scored by the
    kept reward, the accept key's reward unchanged."""
    from specialists.tab.loop.trainer import named_reward, reward_of

    for rid in ("kept", "undone", "off", "both", "old"):
        store.record_action(act(rid, text="hello world"))
    # a later report on an accept: the outcome repeated, its chars_accepted may be left out
    assert store.record_feedback(Feedback("kept", "accepted", chars_accepted=5)) is True
    assert store.record_feedback(Feedback("kept", "accepted", chars_kept=4, kept_after=20)) is True
    assert store.record_feedback(Feedback("kept", "accepted", chars_kept=4, kept_after=20)) is False
    assert store.record_feedback(Feedback("kept", "accepted", chars_accepted=5)) is False
    with pytest.raises(ConflictError, match="already has a final report .chars_kept=4"):
        store.record_feedback(Feedback("kept", "accepted", chars_kept=3, kept_after=20))
    with pytest.raises(ConflictError, match="already has a final report"):
        store.record_feedback(Feedback("kept", "accepted", undone=True))
    with pytest.raises(ConflictError, match="already has outcome 'accepted'"):
        store.record_feedback(Feedback("kept", "rejected", switched_off=True))
    with pytest.raises(NotFoundError, match="no tab request"):
        store.record_feedback(Feedback("ghost", "accepted", undone=True))
    # with the outcome at once; an undo keeps nothing; more kept than accepted is cut
    assert store.record_feedback(Feedback("undone", "accepted", undone=True)) is True
    assert store.record_feedback(Feedback("both", "accepted", chars_accepted=3, chars_kept=9)) is True
    assert store.record_feedback(Feedback("off", "rejected", switched_off=True)) is True
    assert store.record_feedback(Feedback("old", "accepted")) is True  # no report: what was accepted
    for bad, param in ((Feedback("off", "rejected", chars_kept=1), "chars_kept"),
                       (Feedback("off", "rejected", undone=True), "undone"),
                       (Feedback("undone", "accepted", undone=True, chars_kept=2), "chars_kept"),
                       (Feedback("kept", "accepted", kept_after=3), "kept_after")):
        with pytest.raises(ConflictError) as err:  # contradicts itself or its outcome
            store.record_feedback(bad)
        assert err.value.param == param
    assert store.counts()["outcomes"] == 5

    by_id = {e.request_id: e for e in store.labelled("v1")}
    assert (by_id["kept"].chars_accepted, by_id["kept"].chars_kept) == (5, 4)
    assert by_id["undone"].undone and by_id["undone"].chars_kept == 0
    assert by_id["both"].chars_kept == 3 and by_id["off"].switched_off
    assert by_id["old"].chars_kept is None and not by_id["old"].undone
    kept, accept = named_reward("kept"), named_reward("accept")
    expected = {"kept": 0.4, "undone": -0.5, "both": 0.3, "off": -2.25, "old": 1.1}
    assert {rid: round(reward_of(e, kept), 6) for rid, e in by_id.items()} == expected
    assert {rid: reward_of(e, accept) for rid, e in by_id.items()} == \
        {"kept": 0.75, "undone": 0.75, "both": 0.75, "off": -0.25, "old": 0.75}
    (v1,) = store.version_stats()
    assert (v1["undone"], v1["switched_off"], v1["chars_kept"]) == (1, 1, 4 + 3 + 11)
    assert v1["kept_reward_per_request"] == pytest.approx(sum(expected.values()) / 5)
    assert v1["reward_per_request"] == pytest.approx((4 * 0.75 - 0.25) / 5)
    with pytest.raises(SpecialistError, match="unknown reward 'clicks'"):
        named_reward("clicks")


def test_a_store_at_the_previous_revision_gains_the_final_report(url: str) -> None:
    """Migration 0004 on a store at 0003 with an outcome in it: the row is kept, with
    nothing reported yet, and a final report then lands on it."""
    from alembic import command

    from specialists.tab.migrations import _config, _locked

    s = EventStore(url)
    s.record_action(act("r"))
    s.record_feedback(Feedback("r", "accepted"))
    with _locked(s.engine) as conn:
        command.downgrade(_config(conn), "0003")
    s.close()
    again = EventStore(url)
    try:
        assert again.schema_version == "0004"
        (event,) = again.labelled("v1")
        assert (event.outcome, event.chars_accepted, event.chars_kept, event.undone) == \
            ("accepted", 3, None, False)
        assert again.record_feedback(Feedback("r", "accepted", chars_kept=1, kept_after=5))
        assert again.labelled("v1")[0].chars_kept == 1
    finally:
        again.close()


def test_late_feedback_counts_as_rejected(store: EventStore) -> None:
    store.record_action(ActionRecord("late", "v1", "show", -1.0, True, suggestion="x",
                                     created_at=time.time() - 60))
    with pytest.raises(ConflictError, match="after its 5s window"):
        store.record_feedback(Feedback("late", "accepted"))
    assert store.labelled("v1")[0].outcome == "expired"
    store.record_action(ActionRecord("stale", "v1", "show", -1.0, True, suggestion="y",
                                     created_at=time.time() - 60))
    assert store.expire_stale() == 1
    assert store.pending() == 0
    with pytest.raises(ConflictError):
        store.record_feedback(Feedback("stale", "accepted"))


def test_schema_revision_persists_and_newer_is_refused(url: str) -> None:
    from sqlalchemy import text

    s = EventStore(url)
    s.record_action(act("keep"))
    s.close()
    again = EventStore(url)
    assert again.counts()["actions"] == 1 and again.schema_version == head() == "0004"
    with again.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'f00dface'"))
    again.close()
    with pytest.raises(RuntimeError, match="newer than this code"):
        EventStore(url)


def test_the_schema_module_matches_the_migrations(store: EventStore) -> None:
    """specialists/tab/schema.py and versions/ describe the same tables: autogenerate
    finds nothing to add (a change to one without the other fails here)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from specialists.tab.schema import metadata

    with store.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), metadata) == []


LEGACY_FILE = Path(__file__).parent / "fixtures" / "events-schema-v1.sqlite3"


def test_a_store_written_by_the_old_code_is_adopted(tmp_path: Path) -> None:
    """A store file the pre-Alembic code wrote (schema_version 1): stamped, rows kept."""
    import shutil
    import sqlite3

    shutil.copy(LEGACY_FILE, tmp_path / "events.sqlite3")
    store = EventStore(sqlite_url(tmp_path))
    try:
        assert store.schema_version == head()
        assert store.counts() == {"actions": 5, "outcomes": 2}
        labelled = {e.request_id: (e.outcome, e.chars_accepted) for e in store.labelled("3")}
        assert labelled == {"old-0": ("accepted", 5), "old-1": (None, 0),
                            "old-2": ("partial", 2), "old-3": (None, 0)}
        assert store.deploy_log()[0]["previous"] == "2"
        store.record_action(act("new-after-upgrade", "3"))
    finally:
        store.close()
    with sqlite3.connect(tmp_path / "events.sqlite3") as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "schema_version" not in tables
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(head(),)]
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_the_old_code_path_upgrades_without_losing_rows(url: str) -> None:
    """The same on both databases: a store made by the old migration code, with rows, opens
    at the newest revision with every row, and a legacy number we do not know is refused."""
    from sqlalchemy import text

    from tests.router.legacy_events import make_legacy_store

    legacy = make_legacy_store(url)
    with legacy.begin() as conn:
        for i in range(20):
            conn.execute(text("INSERT INTO actions (request_id, created_at, route, "
                              "policy_version, state_digest, features, action, logprob, "
                              "suggestion, shown, latency_ms, expires_at) VALUES (:id, :t, "
                              "'tab', 'v1', '', '{}', 'show', -0.5, 'abc', :shown, 1.0, :exp)"),
                         {"id": f"legacy-{i}", "t": 1.0 + i, "shown": True, "exp": 1e12})
        conn.execute(text("INSERT INTO outcomes VALUES ('legacy-0', 'accepted', 3, 2.0, "
                          "'client')"))
    legacy.dispose()
    store = EventStore(url)
    try:
        assert store.schema_version == head()
        assert store.counts() == {"actions": 20, "outcomes": 1}
        assert store.record_feedback(Feedback("legacy-1", "rejected"))
        assert store.pending() == 18
        # rows from before revision 0002 have no kind and no rule: the policy's own choice
        old = {e.request_id: e for e in store.labelled("v1")}
        assert old["legacy-0"].rule is None and old["legacy-0"].credited
        assert store.kind_stats() == [{"kind": "completion", "by": "policy", "shown": 2,
                                       "accepted": 1, "chars_accepted": 3}]
    finally:
        store.close()
    EventStore(url).close()  # and again: already at head, nothing to do


def test_an_unknown_legacy_number_is_refused(url: str) -> None:
    from sqlalchemy import text

    from tests.router.legacy_events import make_legacy_store

    legacy = make_legacy_store(url)
    with legacy.begin() as conn:
        conn.execute(text("UPDATE schema_version SET version = 7"))
    legacy.dispose()
    with pytest.raises(RuntimeError, match="schema version 7, newer than this code"):
        EventStore(url)


OPENER = """
import sys
from specialists.tab.events import EventStore
store = EventStore(sys.argv[1])
print(store.schema_version, flush=True)
store.close()
"""


def test_workers_opening_a_new_store_at_once_migrate_it_once(url: str) -> None:
    """Server workers start together: one migrates under the lock, the others wait and find
    the store at head (no 'table already exists', no second version row)."""
    from sqlalchemy import create_engine, text

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", OPENER, url], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err[-800:] for _, err in results]
    assert {out.strip() for out, _ in results} == {head()}
    engine = create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).all() == [(head(),)]
    engine.dispose()


def test_pool_options_reach_the_engine(url: str) -> None:
    store = EventStore(url, pool=PoolOptions(size=3, max_overflow=1, timeout_s=5,
                                             recycle_s=60, pre_ping=False))
    try:
        if url.startswith("sqlite"):
            return  # one file, no server: SQLite keeps its own settings
        assert store.engine.pool.size() == 3  # type: ignore[attr-defined]
        assert store.engine.pool._max_overflow == 1  # type: ignore[attr-defined]
        assert store.engine.pool._pre_ping is False
        assert store.engine.pool._recycle == 60
    finally:
        store.close()


def test_concurrent_writers_lose_nothing(store: EventStore) -> None:
    def writer(k: int) -> None:
        for i in range(50):
            store.record_action(act(f"w{k}-{i}"))
            store.record_feedback(Feedback(f"w{k}-{i}", "rejected"))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.counts() == {"actions": 300, "outcomes": 300}


def test_group_commit_calls_back_after_the_rows_are_stored(store: EventStore) -> None:
    """ActionWriter (issue 17): rows queued together go in one transaction; each caller
    hears only once its row is readable; a reused request_id fails that row alone."""
    from specialists.tab.events import ActionWriter

    store.record_action(act("taken"))
    writer = ActionWriter(store)
    seen: dict[str, object] = {}
    done = threading.Semaphore(0)

    def callback(rid: str):
        def call(error: object) -> None:
            # the row is committed before the callback: feedback would find it now
            seen[rid] = error if error is not None else store.version_of(rid)
            done.release()
        return call

    rids = [f"g{i}" for i in range(40)] + ["taken"]
    for rid in rids:
        writer.write(act(rid), callback(rid))
    for _ in rids:
        assert done.acquire(timeout=30)
    writer.close()
    assert isinstance(seen.pop("taken"), ConflictError)
    assert set(seen.values()) == {"v1"} and len(seen) == 40
    assert store.counts()["actions"] == 41


WRITER = """
import sys
from specialists.tab.events import ActionRecord, EventStore
store = EventStore(sys.argv[1])
for i in range(100000):
    store.record_action(ActionRecord(f"k{i}", "v1", "show", -0.1, True, suggestion="s"))
    print(i, flush=True)  # acknowledged only after the commit returned
"""


def test_sigkill_mid_burst_loses_no_acknowledged_event(url: str) -> None:
    EventStore(url).close()  # schema first, so the child only inserts
    proc = subprocess.Popen([sys.executable, "-c", WRITER, url], stdout=subprocess.PIPE,
                            text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    acknowledged = -1
    assert proc.stdout is not None
    for line in proc.stdout:
        acknowledged = int(line)
        if acknowledged >= 300:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    for line in proc.stdout:  # acknowledgements already in the pipe
        acknowledged = int(line)
    store = EventStore(url)
    try:
        stored = store.counts()["actions"]
    finally:
        store.close()
    assert stored >= acknowledged + 1


def test_feedback_http_api(tmp_path: Path) -> None:
    from router.app import create_app
    from router.config import parse_config
    from tests.conftest import running

    app = create_app(parse_config({"data_dir": str(tmp_path),
                                   "events": {"feedback_timeout_s": 30}}, env={}))
    with running(app) as base:
        app.state.events.record_action(act("r1"))
        app.state.events.record_action(act("r2"))
        app.state.events.record_action(act("r3", shown=False))
        post = lambda body: httpx.post(f"{base}/v1/feedback", json=body, timeout=30)  # noqa: E731
        first = post({"request_id": "r1", "outcome": "accepted"})
        assert first.status_code == 200 and first.json()["status"] == "recorded"
        assert post({"request_id": "r1", "outcome": "accepted"}).json()["status"] == "duplicate"
        conflict = post({"request_id": "r1", "outcome": "rejected"})
        assert conflict.status_code == 409 and "recorded once" in conflict.json()["error"]["message"]
        missing = post({"request_id": "nope", "outcome": "accepted"})
        assert missing.status_code == 404 and missing.json()["error"]["param"] == "request_id"
        bad = post({"request_id": "r2", "outcome": "loved"})
        assert bad.status_code == 400 and "outcome" in bad.json()["error"]["message"]
        batch = post({"feedback": [{"request_id": "r2", "outcome": "rejected"},
                                   {"request_id": "r3", "outcome": "accepted"},
                                   {"request_id": "zz", "outcome": "accepted"}]})
        assert batch.status_code == 200
        statuses = [(r["status"], r.get("status_code")) for r in batch.json()["results"]]
        assert statuses == [("recorded", None), ("error", 409), ("error", 404)]

        # issue 35: the final report, later, on the same request id
        app.state.events.record_action(act("r4"))
        assert post({"request_id": "r4", "outcome": "accepted", "chars_accepted": 3}).json()["status"] == "recorded"
        final = {"request_id": "r4", "outcome": "accepted", "chars_kept": 2, "kept_after": 20}
        assert post(final).json()["status"] == "recorded"
        assert post(final).json()["status"] == "duplicate"
        again = post({"request_id": "r4", "outcome": "accepted", "undone": True})
        assert again.status_code == 409 and "already has a final report" in again.json()["error"]["message"]
        unknown = post({"request_id": "nope", "outcome": "accepted", "undone": True})
        assert unknown.status_code == 404 and unknown.json()["error"]["param"] == "request_id"
        misfit = post({"request_id": "r2", "outcome": "rejected", "undone": True})
        assert misfit.status_code == 409 and misfit.json()["error"]["param"] == "undone"
        assert post({"request_id": "r2", "outcome": "rejected", "switched_off": True}).json()["status"] == "recorded"
        for body in ({"request_id": "r4", "outcome": "accepted", "chars_kept": -1},
                     {"request_id": "r4", "outcome": "accepted", "undone": "yes"}):
            refused = post(body)  # the body's validation: 400 naming the field
            assert refused.status_code == 400 and refused.json()["error"]["param"] in body, refused.text
        (row,) = app.state.events.version_stats()
        assert (row["undone"], row["switched_off"], row["chars_kept"]) == (0, 1, 3 + 2)
        schema = httpx.get(f"{base}/openapi.json", timeout=30).json()
        item = schema["components"]["schemas"]["FeedbackItem"]["properties"]
        assert {"chars_kept", "kept_after", "undone", "switched_off"} <= set(item)


def test_version_stats_and_deploy_log(store: EventStore) -> None:
    store.record_action(act("a", "v1"))
    store.record_action(act("b", "v1"))
    store.record_action(act("c", "v1", shown=False))
    store.record_action(act("d", "v2"))
    store.record_feedback(Feedback("a", "accepted"))
    store.record_feedback(Feedback("b", "rejected"))
    stats = {row["version"]: row for row in store.version_stats()}
    assert set(stats) == {"v1"}  # v2 has no label yet
    v1 = stats["v1"]
    assert v1["events"] == 3 and v1["show_rate"] == pytest.approx(2 / 3)
    assert v1["accept_rate"] == pytest.approx(0.5)
    assert v1["reward_per_request"] == pytest.approx((0.75 - 0.25 + 0.0) / 3)
    store.record_deploy("v2", "deploy", previous="v1")
    store.record_deploy("v2", "turn", turnaround_s=12.5)
    log = store.deploy_log()
    assert [e["event"] for e in log] == ["turn", "deploy"] and log[0]["turnaround_s"] == 12.5
    with pytest.raises(ConflictError, match="already used"):
        store.record_action(act("a", "v1"))


def test_sqlite_commits_never_checkpoint_and_a_thread_of_its_own_does(tmp_path: Path) -> None:
    """A commit that crossed SQLite's automatic checkpoint waited for the log's copy into
    the database and its sync (Tab answers wait for their row's commit: 0.1-1 s stalls
    under load). The store's connections turn that off; its checkpoint thread moves the log
    into the database file instead."""
    store = EventStore(sqlite_url(tmp_path))
    db = tmp_path / "events.sqlite3"
    try:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0
        store._checkpointer.stop()  # hold it: the rows stay in the log
        size = db.stat().st_size
        features = {"hidden": [0.123456789] * 3000}
        store.record_actions([ActionRecord(f"r{i}", "v1", "none", -0.5, False, features=features)
                              for i in range(200)])
        assert db.stat().st_size == size, "a commit checkpointed"
        store._checkpointer = type(store._checkpointer)(store.engine, every_s=0.05)
        deadline = time.monotonic() + 10
        while db.stat().st_size == size and time.monotonic() < deadline:
            time.sleep(0.05)
        assert db.stat().st_size > size + 1_000_000, "the checkpoint thread moved the log in"
        assert len(store.labelled("v1")) == 200 and store.counts()["actions"] == 200
    finally:
        store.close()
