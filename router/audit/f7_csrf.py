"""F7: a web page drives a server without API keys (cross-site requests, DNS rebinding).

Reproduced by hand: a ``text/plain`` body with ``Origin: http://evil.example`` recorded
feedback; a body-less form POST to ``/v1/tab/canary/promote`` promoted a canary; a
``Host: evil.example:PORT`` (a name the page's site resolves to 127.0.0.1) was answered.
Each is sent here as a browser would send it, over raw HTTP, to the real server (Tab,
whose canary and feedback are the state at stake); what counts as got through is a state
change (a feedback row, the deployed version) or an answer to a rebinding read. The
server's own page (same origin) and a JSON client must keep working.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from router.audit.common import Tally, serve
from router.audit.raw import Answer, exchange, port_of, request

__all__ = ["Target", "attacks", "probe", "target"]

EVIL = "http://evil.example"


@dataclass
class Target:
    url: str
    port: int
    data: Path
    tmp: Path

    def events(self) -> Any:
        from specialists.tab.events import EventStore, sqlite_url

        return EventStore(sqlite_url(self.data))

    def policies(self) -> Any:
        from specialists.tab.loop.versions import PolicyStore

        return PolicyStore(self.data / "tab")

    def outcomes(self) -> int:
        store = self.events()
        try:
            return int(store.counts()["outcomes"])
        finally:
            store.close()

    def shown_request(self, name: str) -> str:
        """A decision the Tab route showed, as the event store holds it: feedback for it is
        a new outcome row."""
        from specialists.tab.events import ActionRecord

        store = self.events()
        try:
            request_id = f"{name}-{time.monotonic_ns()}"
            deployed = str(self.policies().deployed())
            store.record_action(ActionRecord(request_id, deployed, "0", -0.1, True, features={}))
            return request_id
        finally:
            store.close()

    def start_canary(self) -> int:
        """A canary running (a copy of the deployed policy under the next number)."""
        from specialists.tab.policy import TabPolicy

        store = self.policies()
        deployed = int(store.deployed())
        version = max(store.versions()) + 1
        policy = TabPolicy.load(store.path(deployed))
        policy.version = version
        policy.save(self.tmp / f"v{version}")
        store.publish(self.tmp / f"v{version}", version, {"parent": deployed, "source": "probe"})
        answer = exchange(self.port, request(
            "POST", "/v1/tab/canary", body=json.dumps({"version": version, "share": 0.5}).encode(),
            headers={"Content-Type": "application/json"}), timeout=60)
        if answer.status != 200:
            raise RuntimeError(f"could not start a canary: {answer.status} {answer.body[:300]!r}")
        return version

    def own_origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def target(tmp: Path) -> Iterator[Target]:
    """The real server for Tab alone (the shipped checkpoint on a thread), no API keys."""
    data = tmp / "data"
    config = {"data_dir": str(data), "server": {"host": "127.0.0.1"},
              "specialists": {"tab": {"class": "specialists.tab:TabSpecialist",
                                      "options": {"processes": 0, "sample": True,
                                                  "log_features": False}}}}
    with serve(config) as url:
        yield Target(url, port_of(url), data, tmp)


def _feedback(request_id: str) -> bytes:
    return json.dumps({"request_id": request_id, "outcome": "accepted"}).encode()


def attacks(t: Target) -> list[tuple[str, bytes, str]]:
    """(name, raw request, what it would change: ``feedback``, ``promote`` or ``read``)."""
    evil_host = f"evil.example:{t.port}"
    return [
        ("text/plain feedback from evil.example", request(
            "POST", "/v1/feedback", body=_feedback(t.shown_request("plain")),
            headers={"Content-Type": "text/plain;charset=UTF-8", "Origin": EVIL}), "feedback"),
        ("text/plain feedback, no Origin", request(
            "POST", "/v1/feedback", body=_feedback(t.shown_request("plain-no-origin")),
            headers={"Content-Type": "text/plain"}), "feedback"),
        ("form-encoded feedback from evil.example", request(
            "POST", "/v1/feedback", body=_feedback(t.shown_request("form")),
            headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": EVIL}),
         "feedback"),
        ("multipart feedback from evil.example", request(
            "POST", "/v1/feedback", body=_feedback(t.shown_request("multipart")),
            headers={"Content-Type": "multipart/form-data; boundary=x", "Origin": EVIL}),
         "feedback"),
        ("JSON feedback from evil.example", request(
            "POST", "/v1/feedback", body=_feedback(t.shown_request("json-evil")),
            headers={"Content-Type": "application/json", "Origin": EVIL}), "feedback"),
        ("JSON feedback from the null origin", request(
            "POST", "/v1/feedback", body=_feedback(t.shown_request("null")),
            headers={"Content-Type": "application/json", "Origin": "null"}), "feedback"),
        ("body-less form POST promoting the canary", request(
            "POST", "/v1/tab/canary/promote", body=b"",
            headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": EVIL}),
         "promote"),
        ("body-less POST promoting the canary, no content type", request(
            "POST", "/v1/tab/canary/promote", body=b""), "promote"),
        ("rebinding: JSON feedback to Host evil.example", request(
            "POST", "/v1/feedback", host=evil_host, body=_feedback(t.shown_request("rebind")),
            headers={"Content-Type": "application/json", "Origin": f"http://{evil_host}"}),
         "feedback"),
        ("rebinding: promote with Host evil.example", request(
            "POST", "/v1/tab/canary/promote", host=evil_host, body=b"{}",
            headers={"Content-Type": "application/json", "Origin": f"http://{evil_host}"}),
         "promote"),
        ("rebinding: read /v1/tab/versions with Host evil.example", request(
            "GET", "/v1/tab/versions", host=evil_host), "read"),
        ("rebinding: read /readyz with Host evil.example", request(
            "GET", "/readyz", host=evil_host), "read"),
    ]


def refused(answer: Answer) -> bool:
    """A clear 4xx in the API's error shape, naming what to fix."""
    return 400 <= answer.status < 500 and bool(answer.error_message())


def probe(tmp: Path) -> Tally:
    tally = Tally("f7_csrf")
    with target(tmp) as t:
        canary = t.start_canary()
        deployed = t.policies().deployed()
        for name, raw, effect in attacks(t):
            before = t.outcomes()
            tally.attempts += 1
            answer = exchange(t.port, raw, timeout=30)
            tally.expect(refused(answer), f"{name}: answered {answer.status} "
                                          f"{answer.body[:160]!r}, not a 4xx error")
            if effect == "feedback":
                tally.expect(t.outcomes() == before, f"{name}: a feedback row was recorded")
            elif effect == "promote":
                tally.expect(t.policies().deployed() == deployed,
                             f"{name}: the canary was promoted")
            else:
                tally.expect(b"deployed" not in answer.body and b"specialists" not in answer.body,
                             f"{name}: the page read the answer")
        # the server's own page and JSON clients still work (not attacks)
        before = t.outcomes()
        own = exchange(t.port, request(
            "POST", "/v1/feedback", host=f"127.0.0.1:{t.port}",
            body=_feedback(t.shown_request("own")),
            headers={"Content-Type": "application/json", "Origin": t.own_origin()}))
        tally.expect(own.status == 200 and t.outcomes() == before + 1,
                     f"the server's own page could not send feedback: {own.status} "
                     f"{own.body[:160]!r}")
        page = exchange(t.port, request("GET", "/", host=f"localhost:{t.port}"))
        tally.expect(page.status == 200, f"the playground page answered {page.status}")
        promoted = exchange(t.port, request(
            "POST", "/v1/tab/canary/promote", body=b"",
            headers={"Content-Type": "application/json"}), timeout=60)
        tally.expect(promoted.status == 200 and t.policies().deployed() == canary,
                     f"a JSON client could not promote the canary: {promoted.status} "
                     f"{promoted.body[:160]!r}")
    return tally
