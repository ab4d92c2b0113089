"""The Tab model worker (issue 17): batched answers equal one-at-a-time answers, stale
requests are dropped before they cost a forward pass, a full queue answers 'overloaded'."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from specialists.tab.batcher import ModelWorker

FILE = "def area(w, h):\n    return w * h\n\n\ndef volume(w, h, d):\n    return w * h"


def keystrokes(session: str = "") -> list[dict[str, Any]]:
    """A person typing a line a character at a time, then requests elsewhere in the file."""
    line = "\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n"
    out = []
    for k in range(1, len(line) + 1, 2):
        text = FILE + line[:k]
        out.append({"file": text, "cursor": len(text), "language": "python",
                    "recent_edits": [{"old": "", "new": line[:k], "offset": len(FILE)}]})
    out += [{"file": FILE, "cursor": c, "language": "python"} for c in (0, 5, 17, 40, len(FILE))]
    for i, body in enumerate(out):
        body["request_id"] = f"{session}r{i}"
    return out


def spec_for(checkpoint, **options: Any):
    from specialists.tab import TabSpecialist

    spec = TabSpecialist(checkpoint=str(checkpoint), context_tokens=48, **options)
    spec.setup()
    return spec


def answers_through_worker(spec, bodies: list[dict[str, Any]]) -> list[Any]:
    """Submit every body while the model is busy, so the worker takes them as one batch."""
    results: list[Any] = [None] * len(bodies)
    done = threading.Event()

    def collect(i: int):
        def put(result: Any) -> None:
            results[i] = result
            if all(r is not None for r in results):
                done.set()
        return put

    with spec.paused():  # everything queues up: one turn takes it all
        for i, body in enumerate(bodies):
            spec.submit(body, collect(i))
    assert done.wait(60)
    return results


def same(a: Any, b: Any) -> None:
    assert a.output == b.output
    assert a.reason == b.reason
    for key in ("policy_version", "action", "request_id"):
        assert a.meta.get(key) == b.meta.get(key)
    for key in ("logprob", "prob_show"):  # batched matrix products may round differently
        assert a.meta.get(key) == pytest.approx(b.meta.get(key), abs=1e-3)


@pytest.mark.parametrize("sample,workers", [(False, 1), (True, 1), (False, 2)])
def test_batched_answers_equal_single_answers(tiny_checkpoint, sample: bool, workers: int) -> None:
    """Sampled answers match too: the batch draws in order from the same generator (with
    two workers the order between batches is not fixed, so only greedy is compared)."""
    bodies = keystrokes()
    single = spec_for(tiny_checkpoint, sample=sample, lm_cache=0)
    expected = [single.answer(dict(b)) for b in bodies]
    batched = spec_for(tiny_checkpoint, sample=sample, lm_cache=0, workers=workers, max_batch=8)
    got = answers_through_worker(batched, [dict(b) for b in bodies])
    assert batched.health()["worker"]["mean_batch"] > 1  # they did share forward passes
    for a, b in zip(got, expected):
        same(a, b)
    batched.close()


def test_reused_lm_work_equals_fresh_work(tiny_checkpoint) -> None:
    """The LM caches reuse exact computations: answers do not change, and they do hit."""
    bodies = keystrokes()
    fresh = spec_for(tiny_checkpoint, lm_cache=0)
    cached = spec_for(tiny_checkpoint, lm_cache=64)
    for body in bodies + bodies:
        same(cached.answer(dict(body)), fresh.answer(dict(body)))
    stats = cached.lm.cache_stats()
    assert stats["prompts_hits"] >= len(bodies) and stats["scores_hits"] > 0


def test_stale_requests_are_cancelled_before_the_model(tiny_checkpoint) -> None:
    spec = spec_for(tiny_checkpoint)
    forwards: list[int] = []
    analyze = spec.lm.analyze_many
    spec.lm.analyze_many = lambda items: (forwards.append(len(items)), analyze(items))[1]
    bodies = [{**b, "session": "doc", "seq": i} for i, b in enumerate(keystrokes()[:4])]
    results = answers_through_worker(spec, bodies)
    assert [bool(r.meta.get("cancelled")) for r in results] == [True, True, True, False]
    assert all("newer" in r.reason for r in results[:3])
    assert forwards == [1]  # only the newest reached the LM
    spec.close()


def test_full_queue_answers_the_oldest_overloaded(tiny_checkpoint) -> None:
    spec = spec_for(tiny_checkpoint, max_queue=2)
    bodies = keystrokes()[:3]
    results: dict[int, Any] = {}
    arrived = threading.Semaphore(0)

    def keep(i: int):
        def put(result: Any) -> None:
            results[i] = result
            arrived.release()
        return put

    with spec.paused():
        for i, body in enumerate(bodies):
            spec.submit(body, keep(i))
        assert list(results) == [0]  # the queue holds two: the oldest made room at once
    for _ in range(3):
        assert arrived.acquire(timeout=30)
    overloaded = results[0]
    assert overloaded.output is None and "overloaded" in overloaded.reason
    assert overloaded.meta["overloaded"] and overloaded.meta["request_id"] == "r0"
    assert all("overloaded" not in (results[i].reason or "") for i in (1, 2))
    assert spec.health()["worker"]["shed"] == 1
    spec.close()


def test_bad_input_raises_at_submit(tiny_checkpoint) -> None:
    from specialists.base import SpecialistError

    spec = spec_for(tiny_checkpoint)
    with pytest.raises(SpecialistError):
        spec.submit({"file": FILE, "cursor": len(FILE) + 1}, lambda r: None)
    got: list[Any] = []
    spec.submit({"file": "", "cursor": 0}, got.append)  # answered without the model
    assert got and "empty" in got[0].reason


# -- the worker alone, with fakes ---------------------------------------------------------
def test_worker_sheds_a_stale_job_before_the_oldest() -> None:
    gate = threading.Event()
    results: dict[str, Any] = {}

    def decide(jobs: list[str], deliver: Any) -> None:
        gate.wait(10)
        for i, job in enumerate(jobs):
            deliver(i, f"done {job}")

    worker = ModelWorker(decide, shed=lambda job: f"shed {job}", stale=lambda job: job == "b",
                         max_queue=2)
    worker.submit("first", lambda r: results.setdefault("first", r))
    while worker.stats()["queued"]:
        time.sleep(0.005)
    for job in ("a", "b", "c"):
        worker.submit(job, lambda r, job=job: results.setdefault(job, r))
    assert results == {"b": "shed b"}  # stale, so shed before the older 'a'
    gate.set()
    deadline = time.monotonic() + 10
    while len(results) < 4 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert results["a"] == "done a" and results["c"] == "done c"
    worker.close()


def test_worker_hands_a_failed_batch_to_every_caller_and_lives_on() -> None:
    gate = threading.Event()

    def decide(jobs: list[str], deliver: Any) -> None:
        if jobs == ["hold"]:
            gate.wait(10)
        if "boom" in jobs:
            deliver(0, "early")
            raise RuntimeError("model failed")
        for i, job in enumerate(jobs):
            deliver(i, job.upper())

    worker = ModelWorker(decide, shed=lambda job: None, stale=lambda job: False)
    got: dict[str, Any] = {}
    arrived = threading.Semaphore(0)

    def keep(job: str):
        def put(result: Any) -> None:
            got[job] = result
            arrived.release()
        return put

    worker.submit("hold", keep("hold"))
    while worker.stats()["queued"]:
        time.sleep(0.005)
    worker.submit("boom", keep("boom"))  # these two go together, after 'hold'
    worker.submit("z", keep("z"))
    gate.set()
    for _ in range(3):
        assert arrived.acquire(timeout=10)
    assert got["boom"] == "early" and isinstance(got["z"], RuntimeError)
    worker.submit("y", keep("y"))  # the thread survived the failure
    assert arrived.acquire(timeout=10) and got["y"] == "Y"
    worker.close()


def test_concurrent_http_requests_share_the_worker(tiny_checkpoint) -> None:
    """Through HTTP: concurrent requests are answered (as one at a time would be) by the
    model worker, and the event loop stays free while they wait."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    from router.api.tab import create_app
    from tests.conftest import running

    bodies = keystrokes("http-")
    single = spec_for(tiny_checkpoint, lm_cache=0)
    expected = [single.answer(dict(b)) for b in bodies]
    spec = spec_for(tiny_checkpoint)
    with running(create_app(spec)) as url, httpx.Client(base_url=url, timeout=60) as http:
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda b: http.post("/v1/tab", json=b), bodies))
        assert http.get("/openapi.json").status_code == 200  # the loop still answers
    for r, want in zip(got, expected):
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["request_id"] == want.meta["request_id"]
        assert body["suggestion"] == want.output and body["reason"] == want.reason
    assert spec.health()["worker"]["jobs"] == len(bodies)
    spec.close()


def test_model_process_answers_as_this_process_and_takes_swaps(tiny_checkpoint) -> None:
    """processes=1: a child process decides; the answers are the in-process ones, a stale
    request is still cancelled before it is sent, and a policy swap reaches the child."""
    from specialists.tab.policy import TabPolicy

    bodies = keystrokes("proc-")[:12]
    single = spec_for(tiny_checkpoint, lm_cache=0)
    expected = [single.answer(dict(b)) for b in bodies]
    spec = spec_for(tiny_checkpoint, processes=1)
    try:
        for got, want in zip(answers_through_worker(spec, [dict(b) for b in bodies]), expected):
            same(got, want)
        stale = [{**b, "session": "doc", "seq": i} for i, b in enumerate(bodies[:2])]
        first, second = answers_through_worker(spec, stale)
        assert first.meta["cancelled"] and not second.meta.get("cancelled")
        bumped = TabPolicy.from_state({**spec.policy.state(), "version": 999})
        assert spec.swap(bumped) == expected[0].meta["policy_version"]
        after = answers_through_worker(spec, [dict(bodies[0])])[0]
        assert after.meta["policy_version"] == 999  # decided in the child, by the new version
        assert spec.health()["worker"]["cpu_s"] > 0
    finally:
        spec.close()


def test_one_queue_for_several_models_prefers_home_and_steals_from_a_busy_one() -> None:
    """With a decider per model process, a session's request goes to the model that served
    it last while that one is free, and to any free model while it is busy: nobody waits
    behind one model while another idles."""
    held = threading.Event()
    release = threading.Event()
    took: dict[str, int] = {}

    def decider(index: int):
        def decide(jobs: list[dict[str, Any]], deliver) -> None:
            for job in jobs:
                took[job["id"]] = index
            if any(job.get("hold") for job in jobs):
                held.set()
                assert release.wait(30)
            for i in range(len(jobs)):
                deliver(i, index)
        return decide

    homes = {"a": 0, "b": 1}
    worker = ModelWorker(lambda jobs, deliver: None, lambda job: None, lambda job: False,
                         deciders=[decider(0), decider(1)],
                         affinity=lambda job: homes.get(job["session"]))
    got: dict[str, Any] = {}
    finished = threading.Event()

    def submit(job: dict[str, Any], expect: int) -> None:
        def done(result: Any) -> None:
            got[job["id"]] = result
            if len(got) == expect:
                finished.set()
        worker.submit(job, done)

    # both free: each session's requests go to its own model
    for i in range(6):
        submit({"id": f"a{i}", "session": "a"}, 6)
    assert finished.wait(30)
    assert {took[f"a{i}"] for i in range(6)} == {0}
    got.clear()
    finished.clear()
    for i in range(6):
        submit({"id": f"b{i}", "session": "b"}, 6)
    assert finished.wait(30)
    assert {took[f"b{i}"] for i in range(6)} == {1}

    # model 0 busy: session a's next requests are taken by model 1 instead of waiting
    got.clear()
    finished.clear()
    submit({"id": "hold", "session": "a", "hold": True}, 4)
    assert held.wait(30) and took["hold"] == 0
    for i in range(3):
        submit({"id": f"late{i}", "session": "a"}, 4)
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert {took[f"late{i}"] for i in range(3)} == {1} and len(got) == 3
    release.set()
    assert finished.wait(30)
    worker.close()


@pytest.mark.parametrize("processes", [0, 1])
def test_a_canary_draws_for_its_sessions_in_a_mixed_batch(tiny_checkpoint, processes: int) -> None:
    """With a canary, one batch holds both arms: each job is decided by its session's
    version alone (in this process or in a model process), exactly as a specialist serving
    only that version decides it; an ended canary sends everyone back to the deployed one."""
    import torch

    from specialists.tab.policy import TabPolicy
    from specialists.tab.specialist import in_canary

    bodies = [{**b, "session": f"editor-{i}"} for i, b in enumerate(keystrokes("mix-"))]
    deployed = spec_for(tiny_checkpoint, lm_cache=0)
    never = TabPolicy.from_state({**deployed.policy.state(), "version": 1000})
    with torch.no_grad():
        never.net.none.bias.fill_(50.0)  # shows nothing: its answers cannot pass for the other's
    expected = [deployed.answer(dict(b)) for b in bodies]
    spec = spec_for(tiny_checkpoint, processes=processes)
    try:
        spec.set_canary(never, 0.5)
        arms = [in_canary(b["session"], 1000, 0.5) for b in bodies]
        assert 0 < sum(arms) < len(arms), "the batch must hold both arms"
        for got, want, arm in zip(answers_through_worker(spec, [dict(b) for b in bodies]),
                                  expected, arms):
            if arm:
                assert got.meta["policy_version"] == 1000 and got.output is None
                assert got.reason == "policy chose not to show"
            else:
                same(got, want)
        assert spec.health()["canary"] == {"version": "1000", "share": 0.5}
        spec.set_canary(None)
        after = answers_through_worker(spec, [dict(b) for b in bodies])
        assert {a.meta["policy_version"] for a in after} == {expected[0].meta["policy_version"]}
        with pytest.raises(Exception, match="between 0 and 1"):
            spec.set_canary(never, 1.0)
    finally:
        spec.close()
