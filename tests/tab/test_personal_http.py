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
