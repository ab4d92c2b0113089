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

With ``deciders`` (one ``decide`` per model process) every thread serves the one queue
with its own process: a request waits for the first free model, not for the one its
session was given (one queue for several servers, not one queue each: the tail is what
it is there for). ``affinity(job)`` names the thread whose model last served the job's
session (its keystrokes reuse that model's cached work); a thread leaves such jobs to
their thread while that one is free and takes them when it is busy.

Callbacks run on the worker thread: they hand the result over (``call_soon_threadsafe``,
a queue) and return; a callback that blocks stalls every request behind it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
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
                 name: str = "model-worker",
                 deciders: Sequence[Callable[[list[Any], Callable[[int, Any], None]], None]] | None = None,
                 affinity: Callable[[Any], int | None] | None = None) -> None:
        if max_queue < 1 or max_batch < 1 or threads < 1 or deciders == []:
            raise ValueError("max_queue, max_batch and threads must be at least 1")
        self.decide, self.shed, self.stale = decide, shed, stale
        self.deciders = deciders
        self.affinity = affinity
        threads = len(deciders) if deciders else threads
        self._busy = [False] * threads
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
        self._threads = [threading.Thread(target=self._run, args=(i,), name=f"{name}-{i}",
                                          daemon=True)
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
            self._cv.notify_all() if self.affinity is not None else self._cv.notify()
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

    def _take(self, thread: int) -> list[tuple[Any, Done]] | None:
        with self._cv:
            while True:
                if self._closed:
                    return None
                if self._queue and not self._paused:
                    batch = self._pick(thread)
                    if batch:
                        self._busy[thread] = True
                        return batch
                self._cv.wait()

    def _pick(self, thread: int) -> list[tuple[Any, Done]]:
        """Up to ``max_batch`` queued jobs for ``thread``, oldest first: with ``affinity``,
        none that another free thread's model served last."""
        if self.affinity is None:
            return [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
        batch: list[tuple[Any, Done]] = []
        left: deque[tuple[Any, Done]] = deque()
        for item in self._queue:
            if len(batch) < self.max_batch and self._mine(thread, self.affinity(item[0])):
                batch.append(item)
            else:
                left.append(item)
        self._queue = left
        return batch

    def _mine(self, thread: int, home: int | None) -> bool:
        """Whether ``thread`` may take a job whose session's model is ``home``: its own, no
        home, or a home that is busy (or gone)."""
        return home is None or home == thread or not 0 <= home < len(self._busy) or self._busy[home]

    def _run(self, thread: int = 0) -> None:
        decide = self.deciders[thread] if self.deciders else self.decide
        while (batch := self._take(thread)) is not None:
            t0, cpu0 = time.perf_counter(), time.thread_time()
            try:
                self._turn(batch, decide)
            finally:
                with self._cv:
                    self._busy[thread] = False
                    self.batches += 1
                    self.jobs += len(batch)
                    self.busy_s += time.perf_counter() - t0
                    self.cpu_s += time.thread_time() - cpu0
                    if self._queue:  # jobs left for this thread's model may go elsewhere now
                        self._cv.notify_all()

    def stats(self) -> dict[str, Any]:
        """Counters since start: turns, jobs, mean batch, shed, busy seconds, queued now."""
        return {"batches": self.batches, "jobs": self.jobs, "shed": self.shed_count,
                "mean_batch": round(self.jobs / self.batches, 2) if self.batches else 0.0,
                "busy_s": round(self.busy_s, 3), "cpu_s": round(self.cpu_s, 3),
                "queued": len(self._queue)}

    def _turn(self, batch: list[tuple[Any, Done]],
              decide: Callable[[list[Any], Callable[[int, Any], None]], None]) -> None:
        delivered = [False] * len(batch)

        def deliver(i: int, result: Any) -> None:
            delivered[i] = True
            _call(batch[i][1], result)

        try:
            decide([job for job, _ in batch], deliver)
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
