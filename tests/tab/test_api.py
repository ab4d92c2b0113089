"""``POST /v1/tab`` on the tiny checkpoint: answers, bad input, cancellation."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

FILE = "def area(w, h):\n    return w * h\n\n\ndef volume(w, h, d):\n    return w * h"


@pytest.fixture(scope="module")
def spec(tiny_checkpoint):
    from specialists.tab import TabSpecialist

    s = TabSpecialist(checkpoint=str(tiny_checkpoint), context_tokens=48)
    s.setup()
    return s


@pytest.fixture(scope="module")
def client(spec):
    from router.api.tab import create_app

    return TestClient(create_app(spec))


def test_answer_shape(client) -> None:
    r = client.post("/v1/tab", json={"file": FILE, "cursor": len(FILE), "language": "python",
                                     "request_id": "r1", "recent_edits": ["-a\n+b\n", {"old": "x", "new": "y"}]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["request_id"] == "r1"
    assert isinstance(body["policy_version"], int)
    assert body["latency_ms"] >= 0
    if body["suggestion"] is None:
        assert body["reason"]
    else:
        s = body["suggestion"]
        assert 0 <= s["range"]["start"] <= s["range"]["end"] <= len(FILE)
        assert s["text"] and s["kind"] in ("completion", "next_edit")


@pytest.mark.parametrize("payload", [
    {"file": FILE, "cursor": len(FILE) + 1},
    {"file": FILE, "cursor": -1},
    {"file": FILE, "cursor": 3, "seq": "later"},
])
def test_bad_input_is_4xx(client, payload) -> None:
    r = client.post("/v1/tab", json=payload)
    assert 400 <= r.status_code < 500, r.text


@pytest.mark.parametrize("body", [
    "not json",
    json.dumps({"cursor": 1}),
    json.dumps({"file": 3, "cursor": 0}),
    json.dumps({"file": "x", "cursor": 0, "last_outcome": "maybe"}),
    json.dumps({"file": "x", "cursor": 0, "seconds_since_last": -4}),
])
def test_malformed_body_is_400(client, body) -> None:
    r = client.post("/v1/tab", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("file,cursor,reason", [
    ("", 0, "empty"),
    ("   \n", 2, "empty"),
    ("abc\x00def", 3, "binary"),
])
def test_explicit_no_suggestion(client, file, cursor, reason) -> None:
    r = client.post("/v1/tab", json={"file": file, "cursor": cursor})
    assert r.status_code == 200
    assert r.json()["suggestion"] is None and reason in r.json()["reason"]


def test_non_utf8_content_is_no_suggestion(client) -> None:
    raw = '{"file": "x = \\udc80\\udcff y", "cursor": 4}'  # lone surrogates: undecodable bytes
    r = client.post("/v1/tab", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 200
    assert r.json()["suggestion"] is None and "UTF-8" in r.json()["reason"]


def test_unknown_language_and_huge_file(client) -> None:
    r = client.post("/v1/tab", json={"file": FILE, "cursor": 10, "language": "klingon"})
    assert r.status_code == 200
    huge = ("x = 1\n" * 400_000) + FILE  # 2.4 MB: only a window around the cursor is read
    r = client.post("/v1/tab", json={"file": huge, "cursor": len(huge), "language": "python"})
    assert r.status_code == 200
    s = r.json()["suggestion"]
    if s is not None:
        assert s["range"]["start"] >= len(huge) - 24_000


def test_open_files_are_a_copy_source(spec) -> None:
    other = "def volume(w, h, d):\n    return w * h * d  # from the other file\n"
    file = "x = 1\n\n\ndef volume(w, h, d):\n    return w * h"
    res = spec.answer({"file": file, "cursor": len(file), "open_files": [other]})
    assert res.meta["policy_version"] >= 0
    with pytest.raises(Exception):
        spec.answer({"file": file, "cursor": 0, "open_files": "not a list"})


def test_stale_request_is_cancelled(spec) -> None:
    fresh = spec.answer({"file": FILE, "cursor": len(FILE), "session": "doc1", "seq": 5})
    assert not fresh.meta.get("cancelled")
    stale = spec.answer({"file": FILE, "cursor": len(FILE) - 1, "session": "doc1", "seq": 4})
    assert stale.output is None and stale.meta["cancelled"] and "newer" in stale.reason
    other = spec.answer({"file": FILE, "cursor": len(FILE), "session": "doc2", "seq": 1})
    assert not other.meta.get("cancelled")
