"""Issue 35: the history the personal features read is kept per session *and per project*,
and the project comes with the request (``project`` on ``POST /v1/tab``; the LSP sends its
workspace root). Over real HTTP: a dismissal in one editor of a project is what another
editor of the same project starts from, and another project starts from nothing."""

from __future__ import annotations

import httpx

from specialists.tab.personal import PERSONAL_FEATURES
from tests.loop.test_loop import served  # noqa: F401  (the real app over HTTP, tiny checkpoint)

FILE = "def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n\n\ndef vol"


def _shown(url: str, session: str, project: str) -> str:
    """Ask until the (sampling) policy shows something; its request id."""
    for seq in range(1, 400):
        body = {"file": FILE, "cursor": len(FILE) - seq % 7, "language": "python", "path": "m.py",
                "session": session, "project": project, "seq": seq}
        answer = httpx.post(f"{url}/v1/tab", json=body).json()
        if answer.get("suggestion"):
            return str(answer["request_id"])
    raise AssertionError("the tiny policy showed nothing in 400 requests")


def test_a_projects_history_is_shared_by_its_editors_and_kept_apart_from_others(served) -> None:  # noqa: F811
    url, app, _, _ = served
    tracker = app.state.registry.find("tab").personal
    request_id = _shown(url, "ed-1", "proj-a")
    got = httpx.post(f"{url}/v1/feedback", json={"request_id": request_id, "outcome": "rejected"})
    assert got.status_code == 200, got.text
    a = tracker.projects["proj-a"]
    assert a.shown == 1.0 and a.accepted == 0.0 and a.last == "dismissed"
    # another editor of the same project reads that history; one of another project does not
    now = tracker.sessions["ed-1"].last_time
    i = PERSONAL_FEATURES.index("p_log_shown")
    assert tracker.features("ed-2", "proj-a", now)[i] > 0.0
    assert tracker.features("ed-2", "proj-b", now)[i] == 0.0
    assert tracker.sessions["ed-1"].streak == 1 and "ed-2" not in tracker.sessions


def test_project_is_validated_like_the_other_fields(served) -> None:  # noqa: F811
    url, *_ = served
    got = httpx.post(f"{url}/v1/tab", json={"file": "x", "cursor": 0, "project": 7})
    assert got.status_code == 400 and "project" in got.text, got.text
    got = httpx.post(f"{url}/v1/tab", json={"file": "x", "cursor": 0, "project": "p" * 201})
    assert got.status_code == 400 and "project" in got.text, got.text


def test_a_rejected_completion_typed_anyway_is_counted_right(served) -> None:  # noqa: F811
    """Over real HTTP: the server keeps a shown completion's place and text; after its
    rejection, the editor's next request carries the file with that text typed where it would
    have gone, and the session's history counts it right but not taken
    (``s_short_right_taken`` / ``s_long_right_taken``); typing something else counts nothing."""
    url, app, _, _ = served
    tracker = app.state.registry.find("tab").personal

    def reject_then_type(session: str, typed_anyway: bool) -> tuple[str, dict]:
        for seq in range(1, 400):
            cursor = len(FILE) - seq % 7
            body = {"file": FILE, "cursor": cursor, "language": "python", "path": "m.py",
                    "session": session, "project": "proj-t", "seq": 2 * seq}
            answer = httpx.post(f"{url}/v1/tab", json=body).json()
            sug = answer.get("suggestion")
            if sug and sug.get("kind") == "completion" and sug["text"] \
                    and sug["range"]["start"] == sug["range"]["end"] == cursor:
                break
        else:
            raise AssertionError("the tiny policy showed no completion in 400 requests")
        got = httpx.post(f"{url}/v1/feedback", json={"request_id": answer["request_id"], "outcome": "rejected"})
        assert got.status_code == 200, got.text
        text = sug["text"] if typed_anyway else "".join("Y" if c == "Z" else "Z" for c in sug["text"])
        typed = FILE[:cursor] + text + FILE[cursor:]
        body = {"file": typed, "cursor": cursor + len(text), "language": "python", "path": "m.py",
                "session": session, "project": "proj-t", "seq": 2 * seq + 1}
        assert httpx.post(f"{url}/v1/tab", json=body).status_code == 200
        return sug["text"], tracker.snapshot(session)

    text, right = reject_then_type("ed-typed", True)
    long_ = len(text) > tracker.long_chars
    assert (right["right_long"] if long_ else right["right_short"]) == 1.0
    assert right["right_short_taken"] == right["right_long_taken"] == 0.0 and right["pending"] == []
    _, other = reject_then_type("ed-other", False)
    assert other["right_short"] == other["right_long"] == 0.0 and other["pending"] == []
