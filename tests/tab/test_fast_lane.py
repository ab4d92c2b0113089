"""``TabFastLane``: ``POST /v1/tab`` answered without FastAPI's layers (issue 17) gives what
the route gives — the same answers, and for anything it does not take, the route's own
errors — and inside the full app the guard and the headers still apply."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

FILE = "def area(w, h):\n    return w * h\n\n\ndef volume(w, h, d):\n    return w * h"


@pytest.fixture(scope="module")
def spec(tiny_checkpoint):
    from specialists.tab import TabSpecialist

    s = TabSpecialist(checkpoint=str(tiny_checkpoint), context_tokens=48)  # greedy
    s.setup()
    return s


def _clients(spec: Any) -> tuple[TestClient, TestClient]:
    """The app with the lane, and the same app forced through the route (a dependency
    override is the one thing the lane leaves to FastAPI)."""
    from router.api.tab import create_app
    from router.registry import uses

    lane, route = create_app(spec), create_app(spec)
    route.dependency_overrides[uses("tab")] = lambda: spec
    return TestClient(lane), TestClient(route)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    import router.api.tab as tab_api

    calls: list[str] = []
    real = tab_api.specialist_for

    def counted(request: Any, kind: str) -> Any:
        calls.append(kind)
        return real(request, kind)

    monkeypatch.setattr(tab_api, "specialist_for", counted)
    return calls


def test_the_lane_answers_as_the_route_does(spec, monkeypatch) -> None:
    lane, route = _clients(spec)
    calls = _counting(monkeypatch)
    for i, cursor in enumerate([len(FILE), len(FILE) - 3, 20, 0]):
        body = {"file": FILE, "cursor": cursor, "language": "python", "request_id": f"q{i}",
                "recent_edits": ["-a\n+b\n", {"old": "x", "new": "y"}]}
        a, b = lane.post("/v1/tab", json=body), route.post("/v1/tab", json=body)
        assert a.status_code == b.status_code == 200, (a.text, b.text)
        ja, jb = a.json(), b.json()
        assert ja.pop("latency_ms") >= 0 and jb.pop("latency_ms") >= 0
        assert ja == jb
    assert calls == ["tab"] * 4  # the lane answered each; the route never asked it


@pytest.mark.parametrize("content, headers", [
    ("not json", {"content-type": "application/json"}),
    (json.dumps({"cursor": 1}), {"content-type": "application/json"}),
    (json.dumps({"file": 3, "cursor": 0}), {"content-type": "application/json"}),
    (json.dumps({"file": "x", "cursor": 0, "last_outcome": "maybe"}), {"content-type": "application/json"}),
    (json.dumps({"file": "x", "cursor": 0, "seq": "later"}), {"content-type": "application/json"}),
    (json.dumps({"file": FILE, "cursor": len(FILE) + 1}), {"content-type": "application/json"}),
    ("[" * 100_000 + "]" * 100_000, {"content-type": "application/json"}),
    ("", {"content-type": "application/json"}),
    (json.dumps({"file": "x", "cursor": 0}), {"content-type": "text/plain"}),
    (json.dumps({"file": "x", "cursor": 0}), {}),
])
def test_what_the_lane_does_not_take_reads_as_the_route(spec, content, headers) -> None:
    lane, route = _clients(spec)
    a = lane.post("/v1/tab", content=content, headers=headers)
    b = route.post("/v1/tab", content=content, headers=headers)
    assert a.status_code == b.status_code, (a.text, b.text)
    if a.status_code == 200:
        ja, jb = a.json(), b.json()
        ja.pop("latency_ms"), jb.pop("latency_ms"), ja.pop("request_id"), jb.pop("request_id")
        assert ja == jb
    else:
        assert 400 <= a.status_code < 500 and a.json() == b.json()


def test_an_error_while_answering_goes_through_the_apps_handlers(monkeypatch) -> None:
    from specialists.base import SpecialistError

    class Refusing:
        kind, version = "tab", "7"

        def answer(self, request: dict[str, Any]) -> Any:
            raise SpecialistError("this editor is not allowed here", param="session")

    lane, route = _clients(Refusing())
    calls = _counting(monkeypatch)
    a = lane.post("/v1/tab", json={"file": "x", "cursor": 1})
    b = route.post("/v1/tab", json={"file": "x", "cursor": 1})
    assert calls == ["tab"]
    assert a.status_code == b.status_code == 400
    assert a.json() == b.json() and a.json()["error"]["param"] == "session"


def test_in_the_full_app_the_guard_and_headers_still_apply(tiny_checkpoint, tmp_path, monkeypatch) -> None:
    from router.app import create_app
    from router.config import parse_config
    from router.registry import Registry
    from specialists.tab import TabSpecialist

    spec = TabSpecialist(checkpoint=str(tiny_checkpoint), context_tokens=48, log_features=True)
    spec.setup()  # its decisions go to the event store: a reused request id is refused

    config = parse_config({"server": {"api_keys": ["k1"], "max_body_bytes": 2000},
                           "events": {"url": f"sqlite:///{tmp_path / 'events.db'}"}}, env={})
    calls = _counting(monkeypatch)
    with TestClient(create_app(config, registry=Registry({"tab": spec}))) as client:
        body = {"file": FILE, "cursor": len(FILE), "request_id": "full-1"}
        assert client.post("/v1/tab", json=body).status_code == 401
        assert client.post("/v1/tab", json={"file": "x" * 3000, "cursor": 0},
                           headers={"authorization": "Bearer k1"}).status_code == 413
        assert calls == []
        ok = client.post("/v1/tab", json=body, headers={"authorization": "Bearer k1"})
        assert ok.status_code == 200, ok.text
        assert ok.headers["x-complement-route"] == "tab"
        assert ok.headers["x-complement-model"] == f"TabSpecialist@{spec.version}"
        again = client.post("/v1/tab", json=body, headers={"authorization": "Bearer k1"})
        assert again.status_code == 409, again.text  # the event store refuses a reused id
    assert calls == ["tab", "tab"]
