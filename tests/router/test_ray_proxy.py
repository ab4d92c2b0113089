"""The ingress's stand-ins for remote specialists (``router.ray_serve.RemoteSpecialist``),
against a fake deployment handle: no cluster, so these run in a second."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray.serve")

from ray.exceptions import ActorDiedError  # noqa: E402

from router.ray_serve import RemoteSpecialist, remote_specialist  # noqa: E402
from specialists.apply.specialist import ApplySpecialist  # noqa: E402
from specialists.base import ConflictError, Result, SpecialistError  # noqa: E402
from specialists.tab import TabSpecialist  # noqa: E402


class _Response:
    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome

    def result(self, timeout_s: float | None = None) -> Any:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome

    def __await__(self) -> Any:
        return asyncio.sleep(0, self.result()).__await__()


class _Method:
    def __init__(self, outcomes: list[Any]) -> None:
        self.outcomes = outcomes
        self.calls: list[tuple[Any, ...]] = []

    def remote(self, *args: Any) -> _Response:
        self.calls.append(args)
        return _Response(self.outcomes.pop(0))


class FakeHandle:
    """What a DeploymentHandle offers the stand-in: ``call`` and ``health``, each answering
    from a script of outcomes (a value, or an exception to raise)."""

    def __init__(self, *outcomes: Any, health: dict[str, Any] | None = None) -> None:
        self.call = _Method(list(outcomes))
        self.health = _Method([health or {"ok": True, "version": "1"}] * 10)


def test_named_like_the_real_class_with_its_kind() -> None:
    spec = remote_specialist("apply", ApplySpecialist, FakeHandle(), "app")
    assert type(spec).__name__ == "ApplySpecialist" and spec.kind == "apply"
    assert isinstance(spec, RemoteSpecialist) and not hasattr(spec, "swap")
    tab = remote_specialist("tab", TabSpecialist, FakeHandle(), "app")
    assert type(tab).__name__ == "TabSpecialist" and callable(tab.swap)


def test_answers_and_raises_the_specialists_own_error_type() -> None:
    handle = FakeHandle(("ok", Result(output="merged", confidence=0.9)),
                        ("error", "specialists.base", "ConflictError", "used before", "id"),
                        ("error", "no.such.module", "Gone", "still a 400", None))
    spec = remote_specialist("apply", ApplySpecialist, handle, "app")
    assert spec.answer({"original": "a", "sketch": "b"}).output == "merged"
    with pytest.raises(ConflictError) as info:
        spec.answer({})
    assert info.value.message == "used before" and info.value.param == "id"
    with pytest.raises(SpecialistError, match="still a 400"):
        spec.answer({})
    assert handle.call.calls[0] == ("answer", ({"original": "a", "sketch": "b"},), {})


def test_a_call_that_meets_a_dead_replica_is_sent_again() -> None:
    handle = FakeHandle(ActorDiedError(), ActorDiedError(), ("ok", Result(output="x")))
    spec = remote_specialist("apply", ApplySpecialist, handle, "app")
    assert spec.answer({}).output == "x"
    assert spec.retried == 2 and spec.health()["calls_retried"] == 2
    gone = FakeHandle(*[ActorDiedError()] * 4)
    with pytest.raises(ActorDiedError):  # not forever: the fourth failure surfaces
        remote_specialist("apply", ApplySpecialist, gone, "app").answer({})


def test_answer_async_retries_too() -> None:
    handle = FakeHandle(ActorDiedError(), ("ok", Result(output="t", meta={"policy_version": 7})))
    spec = remote_specialist("tab", TabSpecialist, handle, "app")
    assert asyncio.run(spec.answer_async({"file": "x", "cursor": 0})).output == "t"
    assert spec.retried == 1 and spec.version == "7"  # the header reads the served version


def test_a_blocking_call_from_a_coroutine_waits_on_a_helper_thread() -> None:
    """The edit pipeline calls the applier synchronously inside a coroutine; Serve refuses
    a blocking wait on an event loop, so the stand-in must not make one there."""

    class LoopShy(FakeHandle):
        def __init__(self) -> None:
            super().__init__(("ok", Result(output="m")))
            outer = self.call

            class Guard(_Method):
                def remote(self, *args: Any) -> _Response:
                    try:
                        asyncio.get_running_loop()
                    except RuntimeError:
                        return outer.remote(*args)
                    raise RuntimeError("Sync methods should not be called from within an "
                                       "`asyncio` event loop")

            self.call = Guard([])

    spec = remote_specialist("apply", ApplySpecialist, LoopShy(), "app")

    async def from_a_coroutine() -> Any:
        return spec.answer({})

    assert asyncio.run(from_a_coroutine()).output == "m"
    spec.close()


def test_forwards_public_methods_only() -> None:
    from retrieval.specialist import RetrievalSpecialist

    handle = FakeHandle(("ok", {"results": []}))
    spec = remote_specialist("retrieval", RetrievalSpecialist, handle, "app")
    assert spec.retrieve("q", 5, None, None, "bm25") == {"results": []}
    assert handle.call.calls[0] == ("retrieve", ("q", 5, None, None, "bm25"), {})
    for local in ("submit", "paused", "_private", "no_such_method"):
        assert getattr(spec, local, None) is None, local
    assert getattr(remote_specialist("tab", TabSpecialist, FakeHandle(), "app"),
                   "submit", None) is None  # /v1/tab must take answer_async, not submit


def test_health_is_the_last_report_and_says_when_none_came() -> None:
    class Down(FakeHandle):
        def __init__(self) -> None:
            super().__init__()
            self.health = _Method([TimeoutError("no replica")])

    spec = remote_specialist("apply", ApplySpecialist, Down(), "app")
    spec._poll_health()
    assert spec.health()["ok"] is False and "no replica" in spec.health()["error"]
    ok = remote_specialist("apply", ApplySpecialist, FakeHandle(health={"ok": True,
                                                                        "version": "5"}), "app")
    ok._poll_health()
    assert ok.health()["ok"] is True and ok.version == "5"


def test_a_replica_that_failed_to_load_marks_the_specialist_failed_in_the_registry() -> None:
    from router.errors import Unavailable
    from router.registry import Registry

    broken = {"ok": False, "error": "OSError: no model", "load_error": "OSError: no model"}
    spec = remote_specialist("apply", ApplySpecialist, FakeHandle(health=broken), "app")
    registry = Registry({"apply": spec})
    spec.report_to(registry.errors)
    spec._poll_health()
    assert registry.errors == {"apply": "OSError: no model"}
    with pytest.raises(Unavailable, match="failed to load: OSError: no model"):
        registry.get("apply")
    spec.handle.health = _Method([{"ok": True, "version": "1"}])  # a healthy replica now
    spec._poll_health()
    assert registry.errors == {} and registry.get("apply") is spec


def test_a_canary_is_refused_under_ray_with_the_reason(tmp_path: Path) -> None:
    """The replicas follow one policy board carrying one version: the stand-in does not
    forward ``set_canary`` (it would reach one replica), and the Tab service says why,
    before it reads the policy store."""
    from router.errors import Conflict
    from router.service.tab import TabService

    tab = remote_specialist("tab", TabSpecialist, FakeHandle(), "app")
    assert callable(getattr(TabSpecialist, "set_canary", None))
    assert not hasattr(tab, "set_canary")
    service = TabService(tab, tmp_path)
    with pytest.raises(Conflict, match="under --engine ray.*cannot serve a canary"):
        asyncio.run(service.start_canary(1, 0.5))
    assert not (tmp_path / "tab").exists()
