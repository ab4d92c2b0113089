"""The Tab model's own worker thread(s): concurrent requests share forward passes (issue 17).

``submit`` (from any thread) queues a job; a worker thread takes everything queued, up to
``max_batch``, each turn and hands the batch to ``decide``, which drops what a newer
keystroke made stale, runs one batched LM call for the rest and then the policy per job,
delivering each result as soon as it is ready. Nobody waits on torch but these threads.
With ``threads=2`` a second thread takes the next batch while the first is in torch (which
releases the GIL), so both cores do model work.

The queue is bounded. When it is full the stalest waiting job is answered at once with
``shed`` (an explicit *overloaded* nothing) to make room: one a newer keystroke already made
stale first, else the oldest — by the time it ran, its person would have typed on.

Callbacks run on the worker thread: they hand the result over (``call_soon_threadsafe``,
a queue) and return; a callback that blocks stalls every request behind it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Done", "ModelWorker"]

log = logging.getLogger(__name__)

#: Receives a job's result, or the exception that prevented one.
Done = Callable[[Any], None]


class ModelWorker:
    """A bounded queue in front of one thread that runs ``decide`` on batches of jobs.

    ``decide(jobs, deliver)`` calls ``deliver(i, result)`` once per job, in any order;
    ``shed(job)`` is the result for a job dropped from a full queue; ``stale(job)`` says
    whether a job has been superseded (such jobs are shed first).
    """

    def __init__(self, decide: Callable[[list[Any], Callable[[int, Any], None]], None],
                 shed: Callable[[Any], Any], stale: Callable[[Any], bool], *,
                 max_queue: int = 64, max_batch: int = 16, threads: int = 1,
                 name: str = "model-worker") -> None:
        if max_queue < 1 or max_batch < 1 or threads < 1:
            raise ValueError("max_queue, max_batch and threads must be at least 1")
        self.decide, self.shed, self.stale = decide, shed, stale
        self.max_queue, self.max_batch = max_queue, max_batch
        self._queue: deque[tuple[Any, Done]] = deque()
        self._cv = threading.Condition()
        self._closed = False
        self._paused = 0
        self.batches = 0
        self.jobs = 0
        self.shed_count = 0
        self.busy_s = 0.0
        self.cpu_s = 0.0
        """Turns taken, jobs decided, jobs shed, and the seconds spent deciding (wall and the
        threads' CPU: the difference is time spent waiting for a core or the GIL)."""
        self._threads = [threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True)
                         for i in range(threads)]
        for thread in self._threads:
            thread.start()

    def submit(self, job: Any, done: Done) -> None:
        """Queue ``job``; ``done`` receives its result on the worker thread."""
        shed: list[tuple[Any, Done]] = []
        with self._cv:
            if self._closed:
                raise RuntimeError("the model worker is closed")
            if len(self._queue) >= self.max_queue:
                shed.append(self._evict())
                self.shed_count += 1
            self._queue.append((job, done))
            self._cv.notify()
        for old, old_done in shed:  # outside the lock: a callback never holds up submit
            _call(old_done, self.shed(old))

    def _evict(self) -> tuple[Any, Done]:
        for i, (job, done) in enumerate(self._queue):
            if self.stale(job):
                del self._queue[i]
                return job, done
        return self._queue.popleft()

    def close(self, timeout: float = 5.0) -> None:
        """Stop after the batch in hand; jobs still queued are shed."""
        with self._cv:
            self._closed = True
            left = list(self._queue)
            self._queue.clear()
            self._cv.notify_all()
        for job, done in left:
            _call(done, self.shed(job))
        for thread in self._threads:
            thread.join(timeout)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No new batch starts inside this block (jobs queue up; one in hand finishes):
        for tests, and for a caller that wants the next turn to see everything at once."""
        with self._cv:
            self._paused += 1
        try:
            yield
        finally:
            with self._cv:
                self._paused -= 1
                self._cv.notify_all()

    def _take(self) -> list[tuple[Any, Done]] | None:
        with self._cv:
            while (not self._queue or self._paused) and not self._closed:
                self._cv.wait()
            if self._closed:
                return None
            n = min(self.max_batch, len(self._queue))
            return [self._queue.popleft() for _ in range(n)]

    def _run(self) -> None:
        while (batch := self._take()) is not None:
            t0, cpu0 = time.perf_counter(), time.thread_time()
            self._turn(batch)
            with self._cv:
                self.batches += 1
                self.jobs += len(batch)
                self.busy_s += time.perf_counter() - t0
                self.cpu_s += time.thread_time() - cpu0

    def stats(self) -> dict[str, Any]:
        """Counters since start: turns, jobs, mean batch, shed, busy seconds, queued now."""
        return {"batches": self.batches, "jobs": self.jobs, "shed": self.shed_count,
                "mean_batch": round(self.jobs / self.batches, 2) if self.batches else 0.0,
                "busy_s": round(self.busy_s, 3), "cpu_s": round(self.cpu_s, 3),
                "queued": len(self._queue)}

    def _turn(self, batch: list[tuple[Any, Done]]) -> None:
        delivered = [False] * len(batch)

        def deliver(i: int, result: Any) -> None:
            delivered[i] = True
            _call(batch[i][1], result)

        try:
            self.decide([job for job, _ in batch], deliver)
        except Exception as exc:  # every caller hears of it; the thread lives on
            log.exception("tab: the model worker's batch failed")
            for i, (_, done) in enumerate(batch):
                if not delivered[i]:
                    _call(done, exc)


def _call(done: Done, result: Any) -> None:
    try:
        done(result)
    except Exception:  # a broken callback must not kill the worker
        log.exception("tab: a result callback failed")
