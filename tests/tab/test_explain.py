"""``explain``: a request can ask why it got what it got (issue 34)."""

from __future__ import annotations

import pytest

FILE = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    ret"


@pytest.fixture(scope="module")
def spec(tiny_checkpoint):
    from specialists.tab import TabSpecialist

    s = TabSpecialist(checkpoint=str(tiny_checkpoint), context_tokens=48, sample=True,
                      log_features=True)
    s.setup()
    return s


def test_explain_only_when_asked(spec) -> None:
    plain = spec.answer({"file": FILE, "cursor": len(FILE)})
    assert "explain" not in plain.meta
    asked = spec.answer({"file": FILE, "cursor": len(FILE), "explain": True})
    why = asked.meta["explain"]
    assert why["policy_version"] == asked.meta["policy_version"]
    assert why["sampled"] is True
    assert why["n_candidates"] == len(why["candidates"]) >= 1
    assert {c["source"] for c in why["candidates"]} <= {"file", "edit", "open_file", "lm",
                                                        "next_edit"}
    probs = [t["probability"] for t in why["top_actions"]]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1.0001
    nothing = [t["probability"] for t in why["top_actions"] if t["action"] == 0]
    if nothing:  # action 0 (show nothing) among the most likely: prob_show is the rest
        assert why["prob_show"] == pytest.approx(1 - nothing[0], abs=1e-3)
    by_action = {t["action"]: t for t in why["top_actions"]}
    if asked.output is not None and why["rule"] is None and why["chosen"] in by_action:
        assert by_action[why["chosen"]]["shows"]["text"] == asked.output["text"]


def test_explain_reaches_the_http_answer_and_not_the_event_store(spec) -> None:
    from fastapi.testclient import TestClient

    from router.api.tab import create_app, tab_response
    from router.service.tab import action_record

    client = TestClient(create_app(spec))
    r = client.post("/v1/tab", json={"file": FILE, "cursor": len(FILE), "explain": True})
    assert r.status_code == 200, r.text
    assert r.json()["explain"]["top_actions"]
    assert "explain" not in client.post("/v1/tab", json={"file": FILE,
                                                         "cursor": len(FILE)}).json()
    result = spec.answer({"file": FILE, "cursor": len(FILE), "explain": True})
    record = action_record(result)
    assert record is not None and "explain" not in record.features
    assert "explain" in tab_response(result)
