"""F7 (issue 41): cross-site requests and DNS rebinding against a server without API keys,
over raw HTTP to the real server (Tab: its feedback and its canary are the state at stake).
Each attack is its own test; the probe (``router/audit/f7_csrf.py``) runs them all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from router.audit import f7_csrf
from router.audit.f7_csrf import EVIL, Target
from router.audit.raw import Answer, exchange, request


@pytest.fixture(scope="module")
def t(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    with f7_csrf.target(tmp_path_factory.mktemp("f7")) as target:
        yield target


def _feedback(t: Target, name: str, **kw: object) -> tuple[Answer, int]:
    """Send feedback for a shown decision; the answer and how many outcome rows it added."""
    before = t.outcomes()
    body = json.dumps({"request_id": t.shown_request(name), "outcome": "accepted"}).encode()
    answer = exchange(t.port, request("POST", "/v1/feedback", body=body, **kw))  # type: ignore[arg-type]
    return answer, t.outcomes() - before


def test_text_plain_feedback_from_another_site_is_refused(t: Target) -> None:
    answer, added = _feedback(t, "plain", headers={"Content-Type": "text/plain;charset=UTF-8",
                                                   "Origin": EVIL})
    assert added == 0
    assert answer.status in (403, 415), answer.body
    assert answer.json()["error"]["code"] in ("cross_origin", "unsupported_media_type")


def test_text_plain_feedback_without_origin_is_415_naming_the_content_type(t: Target) -> None:
    answer, added = _feedback(t, "plain-no-origin", headers={"Content-Type": "text/plain"})
    assert added == 0
    assert answer.status == 415, answer.body
    assert "application/json" in answer.error_message()


def test_a_form_post_is_refused(t: Target) -> None:
    answer, added = _feedback(t, "form", headers={
        "Content-Type": "application/x-www-form-urlencoded"})
    assert (answer.status, added) == (415, 0), answer.body


def test_json_from_another_origin_is_403(t: Target) -> None:
    answer, added = _feedback(t, "json-evil", headers={"Content-Type": "application/json",
                                                       "Origin": EVIL})
    assert (answer.status, added) == (403, 0), answer.body
    assert "evil.example" in answer.error_message() and "Origin" in answer.error_message()
    answer, added = _feedback(t, "json-null", headers={"Content-Type": "application/json",
                                                       "Origin": "null"})
    assert (answer.status, added) == (403, 0), answer.body


def test_a_rebinding_host_is_400_naming_the_setting(t: Target) -> None:
    evil = f"evil.example:{t.port}"
    answer, added = _feedback(t, "rebind", host=evil, headers={
        "Content-Type": "application/json", "Origin": f"http://{evil}"})
    assert (answer.status, added) == (400, 0), answer.body
    assert answer.json()["error"]["code"] == "host_not_allowed"
    assert "server.allowed_hosts" in answer.error_message()
    read = exchange(t.port, request("GET", "/v1/tab/versions", host=evil))
    assert read.status == 400 and b"deployed" not in read.body


def test_a_body_less_form_post_does_not_promote_the_canary(t: Target) -> None:
    t.start_canary()
    deployed = t.policies().deployed()
    for headers in ({"Content-Type": "application/x-www-form-urlencoded", "Origin": EVIL}, {}):
        answer = exchange(t.port, request("POST", "/v1/tab/canary/promote", body=b"",
                                          headers=headers))
        assert answer.status in (403, 415), answer.body
        assert t.policies().deployed() == deployed
    abort = exchange(t.port, request("POST", "/v1/tab/canary/abort",
                                     headers={"Content-Type": "application/json"}))
    assert abort.status == 200, abort.body


def test_the_servers_own_page_and_json_clients_still_work(t: Target) -> None:
    for host in (f"127.0.0.1:{t.port}", f"localhost:{t.port}", f"[::1]:{t.port}"):
        answer, added = _feedback(t, f"own-{host}", host=host, headers={
            "Content-Type": "application/json; charset=utf-8", "Origin": f"http://{host}"})
        assert (answer.status, added) == (200, 1), (host, answer.body)
    answer, added = _feedback(t, "no-origin", headers={"Content-Type": "application/json"})
    assert (answer.status, added) == (200, 1), answer.body
    page = exchange(t.port, request("GET", "/", host=f"localhost:{t.port}"))
    assert page.status == 200 and b"<html" in page.body.lower()


def test_with_api_keys_any_host_is_answered_and_json_is_still_required(tmp_path: Path) -> None:
    from router.audit.common import serve
    from router.audit.raw import port_of

    config = {"data_dir": str(tmp_path / "data"), "server": {"api_keys": ["k1"]},
              "specialists": {"apply": {"class": "specialists.apply.specialist:ApplySpecialist"}}}
    body = json.dumps({"original": "a = 1\n", "sketch": "a = 2\n"}).encode()
    auth = {"Authorization": "Bearer k1"}
    with serve(config) as url:
        port = port_of(url)
        ok = exchange(port, request("POST", "/v1/apply", host="api.example.com", body=body,
                                    headers={**auth, "Content-Type": "application/json"}))
        assert ok.status == 200, ok.body
        plain = exchange(port, request("POST", "/v1/apply", host="api.example.com", body=body,
                                       headers={**auth, "Content-Type": "text/plain"}))
        assert plain.status == 415, plain.body


def test_probe_is_clean(tmp_path: Path) -> None:
    tally = f7_csrf.probe(tmp_path)
    assert tally.ok, tally.as_dict()
    assert tally.attempts >= 12
