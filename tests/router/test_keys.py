"""Issue 37: the admin key, inference keys and virtual keys with budgets and rate limits, on
the real server over HTTP (the default config's specialists: tab, apply, retrieval; the
frontier answered by the fake provider) with the real database: SQLite, and PostgreSQL when
one is reachable (``COMPLEMENT_TEST_PG_URL``; ``.ci/run`` starts one)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from tests.conftest import serving_ready
from tests.fakes.fake_frontier import FakeFrontier
from tests.router.test_events import _pg_database

ADMIN = "admin-test-key-0123456789"
INFER = "inference-test-key-0123456789"
TAB = {"file": "def add(a, b):\n    return ", "cursor": 26, "language": "python"}
#: One request per route a key's limits hold on: (method, path, body).
ROUTES: dict[str, tuple[str, str, Any]] = {
    "chat": ("POST", "/v1/chat/completions",
             {"model": "fast", "messages": [{"role": "user", "content": "hi"}]}),
    "tab": ("POST", "/v1/tab", TAB),
    "apply": ("POST", "/v1/apply", {"original": "def add(a, b):\n    return a + b\n",
                                    "sketch": "def add(a, b):\n    return b + a\n"}),
    "retrieve": ("POST", "/v1/retrieve", {"query": "add two numbers"}),
    "edit": ("POST", "/v1/edit", {"instruction": "add a docstring", "route": "fast",
                                  "texts": {"ops.py": "def add(a, b):\n    return a + b\n"}}),
}
ADMIN_ONLY: list[tuple[str, str, Any]] = [
    ("POST", "/v1/tab/deploy", {"version": 1}),
    ("POST", "/v1/tab/canary", {"version": 1, "share": 0.5}),
    ("POST", "/v1/tab/canary/promote", None),
    ("POST", "/v1/tab/canary/abort", None),
    ("POST", "/key/generate", {}),
    ("GET", "/key/list", None),
    ("GET", "/key/info?key=" + "0" * 64, None),
    ("POST", "/key/update", {"key": "0" * 64, "rpm_limit": 1}),
    ("POST", "/key/delete", {"keys": ["0" * 64]}),
]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def events_url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "sqlite":
        yield ""
    else:
        yield from _pg_database()


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeFrontier]:
    server = FakeFrontier().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("keys")


def config_data(root: Path, fake: FakeFrontier, events_url: str = "",
                **server: Any) -> dict[str, Any]:
    from router.contract import contract_server_config

    data = contract_server_config(root, fake.url)
    data["server"].update({"admin_keys": [ADMIN], "api_keys": [INFER], **server})
    data["events"]["url"] = events_url
    return data


@pytest.fixture(scope="module")
def base(root: Path, fake: FakeFrontier, events_url: str) -> Iterator[str]:
    with serving_ready(config_data(root, fake, events_url)) as url:
        index = call(url, ADMIN, "POST", "/v1/index", {"path": "calc"})
        assert index.status_code == 200, index.text
        yield url


def call(base: str, key: str | None, method: str, path: str, body: Any = None) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    content = b"" if body is None else httpx.Request("POST", "/", json=body).content
    return httpx.request(method, f"{base}{path}", content=content if method == "POST" else None,
                         headers=headers, timeout=60)


def generate(base: str, **limits: Any) -> str:
    r = call(base, ADMIN, "POST", "/key/generate", limits)
    assert r.status_code == 200, r.text
    return str(r.json()["key"])


def info(base: str, key: str) -> dict[str, Any]:
    from router.keys import hash_key

    r = call(base, ADMIN, "GET", f"/key/info?key={hash_key(key)}")
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def on(base: str, key: str, route: str) -> httpx.Response:
    method, path, body = ROUTES[route]
    return call(base, key, method, path, body)


# -- who may do what -------------------------------------------------------------------------
@pytest.mark.parametrize("method,path,body", ADMIN_ONLY, ids=[p for _, p, _ in ADMIN_ONLY])
def test_admin_endpoints_refuse_no_key_an_inference_key_and_a_virtual_key(
        base: str, method: str, path: str, body: Any) -> None:
    assert call(base, None, method, path, body).status_code == 401
    refused = call(base, INFER, method, path, body)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "admin_only"
    assert "admin key" in refused.json()["error"]["message"]
    assert call(base, generate(base), method, path, body).status_code == 403
    assert call(base, ADMIN, method, path, body).status_code not in (401, 403)


def test_the_admin_key_deploys_and_the_inference_key_serves(base: str) -> None:
    versions = call(base, INFER, "GET", "/v1/tab/versions").json()
    deployed = call(base, ADMIN, "POST", "/v1/tab/deploy", {"version": versions["deployed"]})
    assert deployed.status_code == 200, deployed.text
    for route in ROUTES:
        if route not in ("chat", "edit"):
            assert on(base, INFER, route).status_code == 200, route


def test_a_key_is_shown_once_and_stored_hashed(base: str, events_url: str, root: Path) -> None:
    from sqlalchemy import create_engine, text

    key = generate(base, key_name="ci", metadata={"team": "web"})
    listed = call(base, ADMIN, "GET", "/key/list").json()["keys"]
    assert key not in str(listed)
    mine = [k for k in listed if k["key_name"] == "ci"]
    assert mine and mine[0]["metadata"] == {"team": "web"}
    url = events_url or f"sqlite:///{root / 'data' / 'events.sqlite3'}"
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(text("SELECT * FROM virtual_keys")).all()]
    engine.dispose()
    assert rows and key not in str(rows)


# -- budgets, rates, revocation, expiry on every route ------------------------------------------
@pytest.mark.parametrize("route", list(ROUTES))
def test_a_spent_budget_is_refused_naming_the_budget_and_amounts(base: str, route: str) -> None:
    key = generate(base, max_budget=0.0)
    r = on(base, key, route)
    assert r.status_code == 402, r.text
    error = r.json()["error"]
    assert error["code"] == "key_budget_exceeded"
    assert "max_budget $0.000000" in error["message"] and error["max_budget"] == 0.0


def test_chat_spends_until_the_budget_then_every_route_is_refused(base: str) -> None:
    key = generate(base, max_budget=0.0005)
    spent = 0.0
    for _ in range(400):
        r = on(base, key, "chat")
        if r.status_code == 402:
            break
        assert r.status_code == 200, r.text
        spent += float(r.headers["x-complement-cost-usd"])
    else:
        pytest.fail("the budget was never reached")
    error = r.json()["error"]
    assert "worst-case cost" in error["message"] and "max_budget $0.000500" in error["message"]
    record = info(base, key)
    assert record["spend"] == pytest.approx(spent) and record["spend"] <= 0.0005
    assert record["held"] == 0.0
    # settle the rest of the budget by hand: spend reaches it, every route is refused
    call(base, ADMIN, "POST", "/key/update", {"key": key, "spend": 0.0005})
    for route in ROUTES:
        assert on(base, key, route).status_code == 402, route


@pytest.mark.parametrize("route", list(ROUTES))
def test_the_rpm_limit_holds_with_retry_after(base: str, route: str) -> None:
    key = generate(base, rpm_limit=2)
    assert [on(base, key, route).status_code != 429 for _ in range(2)] == [True, True]
    r = on(base, key, route)
    assert r.status_code == 429, r.text
    assert 1 <= int(r.headers["retry-after"]) <= 60
    assert r.json()["error"]["code"] == "rpm_limit_exceeded"
    assert "rpm_limit of 2" in r.json()["error"]["message"]


def test_the_tpm_limit_counts_chat_tokens(base: str) -> None:
    key = generate(base, tpm_limit=5)
    long = {"model": "fast", "messages": [{"role": "user", "content": "word " * 20}]}
    first = call(base, key, "POST", "/v1/chat/completions", long)
    assert first.status_code == 200 and first.json()["usage"]["total_tokens"] > 5
    r = on(base, key, "chat")
    assert r.status_code == 429 and "tpm_limit of 5" in r.json()["error"]["message"]
    assert int(r.headers["retry-after"]) >= 1


@pytest.mark.parametrize("route", list(ROUTES))
def test_revoked_and_expired_keys_are_refused(base: str, route: str) -> None:
    revoked, expiring = generate(base), generate(base, duration="1s")
    assert on(base, revoked, route).status_code != 401
    deleted = call(base, ADMIN, "POST", "/key/delete", {"keys": [revoked]})
    assert deleted.status_code == 200, deleted.text
    r = on(base, revoked, route)
    assert r.status_code == 401 and r.json()["error"]["code"] == "key_revoked"
    time.sleep(1.05)
    r = on(base, expiring, route)
    assert r.status_code == 401 and r.json()["error"]["code"] == "key_expired"
    assert "expired at" in r.json()["error"]["message"]


def test_allowed_routes_and_models(base: str) -> None:
    key = generate(base, allowed_routes=["tab"], models=["auto"])
    assert on(base, key, "tab").status_code == 200
    r = on(base, key, "apply")
    assert r.status_code == 403 and r.json()["error"]["code"] == "route_not_allowed"
    key = generate(base, models=["auto"])
    r = on(base, key, "chat")  # model "fast"
    assert r.status_code == 403 and r.json()["error"]["code"] == "model_not_allowed"
    r = call(base, ADMIN, "POST", "/key/generate", {"models": ["nope"]})
    assert r.status_code == 400 and "not routes of this server" in r.json()["error"]["message"]
    r = call(base, ADMIN, "POST", "/key/generate", {"duration": "soon"})
    assert r.status_code == 400 and "'30d'" in r.json()["error"]["message"]


def test_an_update_applies_at_once(base: str) -> None:
    key = generate(base)
    assert on(base, key, "tab").status_code == 200
    call(base, ADMIN, "POST", "/key/update", {"key": key, "max_budget": 0.0})
    assert on(base, key, "tab").status_code == 402
    call(base, ADMIN, "POST", "/key/update", {"key": key, "max_budget": None})
    assert on(base, key, "tab").status_code == 200


def test_spend_and_limits_show_in_metrics_and_the_dashboard(base: str) -> None:
    key = generate(base, key_name="shown", max_budget=1.0, rpm_limit=100)
    assert on(base, key, "chat").status_code == 200
    alias = info(base, key)["key_alias"]
    metrics = call(base, ADMIN, "GET", "/metrics").text
    assert f'complement_key_spend_usd{{key="{alias}",name="shown"}}' in metrics
    assert f'complement_key_max_budget_usd{{key="{alias}",name="shown"}} 1.0' in metrics
    assert f'complement_key_rpm_limit{{key="{alias}",name="shown"}} 100.0' in metrics
    admin_view = call(base, ADMIN, "GET", "/v1/dashboard").json()["keys"]
    assert any(k["key_alias"] == alias and k["spend"] > 0 for k in admin_view)
    own = call(base, key, "GET", "/v1/dashboard").json()["keys"]
    assert [k["key_alias"] for k in own] == [alias]
    assert call(base, INFER, "GET", "/v1/dashboard").json()["keys"] == []


def test_a_streamed_chat_is_charged_before_it_ends(base: str) -> None:
    key = generate(base, max_budget=1.0)
    method, path, body = ROUTES["chat"]
    with httpx.stream("POST", f"{base}{path}", json={**body, "stream": True},
                      headers={"Authorization": f"Bearer {key}"}, timeout=60) as r:
        text = "".join(r.iter_text())
    assert "[DONE]" in text
    record = info(base, key)
    assert record["spend"] > 0 and record["held"] == 0.0 and record["requests_charged"] == 1


def test_concurrent_requests_do_not_overshoot_the_budget(base: str) -> None:
    """64 clients at once on a key whose budget covers a handful of requests."""
    probe = generate(base)
    one = float(on(base, probe, "chat").headers["x-complement-cost-usd"])
    budget = one * 10.5
    key = generate(base, max_budget=budget)
    statuses: list[int] = []

    def client() -> None:
        for _ in range(3):
            statuses.append(on(base, key, "chat").status_code)

    threads = [threading.Thread(target=client) for _ in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(statuses) <= {200, 402}, statuses
    record = info(base, key)
    assert record["spend"] <= budget + one
    assert record["spend"] == pytest.approx(statuses.count(200) * one)
    assert record["held"] == 0.0


# -- restarts and servers without keys ----------------------------------------------------------
def test_spend_survives_a_restart(tmp_path: Path, fake: FakeFrontier, events_url: str) -> None:
    data = config_data(tmp_path, fake, events_url)
    with serving_ready(data) as url:
        key = generate(url, max_budget=1.0)
        costs = [float(on(url, key, "chat").headers["x-complement-cost-usd"]) for _ in range(3)]
    with serving_ready(data) as url:
        assert info(url, key)["spend"] == pytest.approx(sum(costs))
        assert on(url, key, "tab").status_code == 200
        call(url, ADMIN, "POST", "/key/delete", {"keys": [key]})
    with serving_ready(data) as url:
        assert on(url, key, "tab").status_code == 401


def test_without_keys_everything_is_open_and_key_management_says_what_to_set(
        tmp_path: Path, fake: FakeFrontier) -> None:
    data = config_data(tmp_path, fake, admin_keys=[], api_keys=[])
    with serving_ready(data) as url:
        versions = call(url, None, "GET", "/v1/tab/versions").json()
        assert call(url, None, "POST", "/v1/tab/deploy",
                    {"version": versions["deployed"]}).status_code == 200
        assert on(url, None, "tab").status_code == 200  # type: ignore[arg-type]
        r = call(url, None, "POST", "/key/generate", {})
        assert r.status_code == 409 and "COMPLEMENT_ADMIN_KEY" in r.json()["error"]["message"]
        assert call(url, None, "GET", "/v1/dashboard").json()["keys"] == []


def test_inference_keys_alone_close_the_admin_endpoints(tmp_path: Path,
                                                        fake: FakeFrontier) -> None:
    data = config_data(tmp_path, fake, admin_keys=[])
    with serving_ready(data) as url:
        r = call(url, INFER, "POST", "/v1/tab/deploy", {"version": 1})
        assert r.status_code == 403 and "COMPLEMENT_ADMIN_KEY" in r.json()["error"]["message"]
        assert on(url, INFER, "tab").status_code == 200


def test_config_refuses_an_admin_key_that_is_also_an_inference_key() -> None:
    from router.config import parse_config

    with pytest.raises(Exception, match="must differ from every inference key"):
        parse_config({"server": {"admin_keys": ["same"], "api_keys": ["same"]}}, env={})
    with pytest.raises(Exception, match="server.admin_keys"):
        parse_config({"server": {"host": "0.0.0.0"}}, env={})
    # off loopback with an admin key only: inference is by virtual keys
    parse_config({"server": {"host": "0.0.0.0", "admin_keys": ["a"]}}, env={})


# -- the store itself ----------------------------------------------------------------------------
def test_the_loop_never_waits_for_a_held_sqlite_lock(tmp_path: Path) -> None:
    """Reserve and settle on the event loop give way (Busy) while another writer holds the
    database; the same call in a thread waits and then counts once."""
    import sqlite3

    from router.keys import Busy, KeyStore
    from specialists.tab.events import EventStore, sqlite_url

    events = EventStore(sqlite_url(tmp_path))
    store = KeyStore(events.engine)
    try:
        _, record = store.create(max_budget=1.0)
        rid = store.reserve(record.key_hash, 0.5, 60, wait=False)
        with pytest.raises(Exception, match="would pass its max_budget"):
            store.reserve(record.key_hash, 0.6, 60, wait=False)
        other = sqlite3.connect(str(tmp_path / "events.sqlite3"), isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(Busy):
            store.settle(record.key_hash, rid, 0.25, wait=False)
        done: list[float] = []
        waiter = threading.Thread(target=lambda: done.append(
            store.settle(record.key_hash, rid, 0.25)))
        waiter.start()
        time.sleep(0.2)
        assert not done  # waiting for the lock
        other.execute("COMMIT")
        waiter.join(10)
        assert done == [0.25] and store.held(record.key_hash) == 0.0
        assert store.get(record.key_hash).requests == 1  # type: ignore[union-attr]
    finally:
        store.close()
        events.close()


def test_a_killed_servers_reservations_stop_counting(tmp_path: Path) -> None:
    from router.keys import KeyStore
    from specialists.tab.events import EventStore, sqlite_url

    events = EventStore(sqlite_url(tmp_path))
    store = KeyStore(events.engine)
    _, record = store.create(max_budget=1.0)
    store.reserve(record.key_hash, 0.9, ttl_s=0.1)
    with pytest.raises(Exception, match="held by requests in flight"):
        store.reserve(record.key_hash, 0.2, 60)
    time.sleep(0.15)
    store.reserve(record.key_hash, 0.2, 60)  # the first one expired
    store.close()
    events.close()


def test_the_cli_manages_keys_in_the_database_and_through_the_server(
        base: str, root: Path, tmp_path: Path, events_url: str,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    import yaml

    from router.cli import main

    monkeypatch.setenv("COMPLEMENT_ADMIN_KEY", ADMIN)
    assert main(["keys", "--server", base, "generate", "--max-budget", "2", "--name",
                 "cli"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert created["key"].startswith("sk-cmp-") and created["max_budget"] == 2.0
    assert main(["keys", "--server", base, "update", created["token"], "--rpm-limit", "7"]) == 0
    assert json.loads(capsys.readouterr().out)["rpm_limit"] == 7
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"data_dir": str(root / "data"),
                                      "events": {"url": events_url}}))
    assert main(["keys", "-c", str(config), "list"]) == 0
    table = capsys.readouterr().out
    assert created["key_alias"] in table and "cli" in table and created["key"] not in table
    assert main(["keys", "-c", str(config), "delete", created["token"]]) == 0
    capsys.readouterr()
    assert main(["keys", "--server", base, "info", created["token"]]) == 0
    assert json.loads(capsys.readouterr().out)["revoked_at"] is not None
    assert main(["keys", "-c", str(config), "generate", "--duration", "soon"]) == 2
    assert "'30d'" in capsys.readouterr().err
    monkeypatch.delenv("COMPLEMENT_ADMIN_KEY")
    assert main(["keys", "--server", base, "list"]) == 2
    assert "401" in capsys.readouterr().err
