"""Tab model worker processes (issue 17): the model's Python never shares a GIL with the server.

A model thread in the server process competes for the GIL with the event loop and the
event-store writes; on the 2-core machine that cost it ~30% of its time at 16 editors
(its wall time per batch against its CPU time), and it can use one core at most. A
:class:`ModelProcess` is a child process (``spawn``) holding its own copy of the
specialist — LM, policy, caches — that decides the batches a :class:`ModelWorker` thread in
the server hands it over a pipe, sending each result back as soon as it is ready.

The server side keeps everything that must see every request: parsing, the session/seq
bookkeeping that cancels stale requests before they are sent, the bounded queue. A session
keeps to one process, so its keystrokes find their own prompt states in that process's
caches. A policy swap reaches every process between two batches.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["ModelProcess"]


class ModelProcess:
    """One child process deciding batches for a specialist ``factory(**options)`` builds
    there (``TabSpecialist``: a class travels to the child by name).

    ``decide`` is called by one thread at a time (its ModelWorker's); ``swap`` waits for the
    batch in hand. ``cpu_s`` adds up the child's CPU seconds spent deciding.
    """

    def __init__(self, factory: Callable[..., Any], options: dict[str, Any],
                 name: str = "tab-model") -> None:
        ctx = multiprocessing.get_context("spawn")  # a forked torch can deadlock
        self._conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(factory, options, child), name=name,
                                   daemon=True)
        self.process.start()
        child.close()
        self._lock = threading.Lock()
        self.cpu_s = 0.0
        self.cache: dict[str, int] = {}

    def wait_ready(self, timeout: float = 300.0) -> None:
        """Wait until the child has loaded its model; raises if it could not."""
        if not self._conn.poll(timeout):
            self.close()
            raise RuntimeError(f"the Tab model process was not ready within {timeout:g} s")
        kind, detail = self._conn.recv()
        if kind != "ready":
            self.close()
            raise RuntimeError(f"the Tab model process failed to start: {detail}")

    def decide(self, jobs: list[Any], deliver: Callable[[int, Any], None]) -> None:
        with self._lock:
            self._conn.send(("decide", jobs))
            while True:
                kind, *rest = self._conn.recv()
                if kind == "result":
                    deliver(rest[0], rest[1])
                elif kind == "done":
                    self.cpu_s += rest[0]
                    self.cache = rest[1]
                    return
                else:
                    raise RuntimeError(f"the Tab model process failed: {rest[0]}")

    def swap(self, state: dict[str, Any]) -> None:
        """Serve the policy of ``state`` (:meth:`TabPolicy.state`) from the next batch on."""
        with self._lock:
            self._conn.send(("swap", state))
            kind, *rest = self._conn.recv()
            if kind != "swapped":
                raise RuntimeError(f"the Tab model process could not swap: {rest[0]}")

    def set_canary(self, state: dict[str, Any] | None, share: float) -> None:
        """Serve the canary policy of ``state`` (None: no canary) from the next batch on;
        which jobs it draws for was decided in the server (each job says)."""
        with self._lock:
            self._conn.send(("canary", state, share))
            kind, *rest = self._conn.recv()
            if kind != "swapped":
                raise RuntimeError(f"the Tab model process could not set the canary: {rest[0]}")

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            try:
                self._conn.send(("stop",))
            except (OSError, ValueError):
                pass  # already gone
            self.process.join(timeout)
            if self.process.is_alive():
                self.process.terminate()
            self._conn.close()


def _serve(factory: Callable[..., Any], options: dict[str, Any], conn: Any) -> None:
    """The child: build the specialist, then decide batches until told to stop."""
    try:
        from specialists.tab.policy import TabPolicy

        spec = factory(**options)
        spec.setup()
    except Exception as exc:  # the parent raises it, named
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None))
    while True:
        try:
            message = conn.recv()
        except EOFError:  # the server went away
            return
        kind = message[0]
        if kind == "stop":
            return
        try:
            if kind == "swap":
                spec.swap(TabPolicy.from_state(message[1]))
                conn.send(("swapped",))
                continue
            if kind == "canary":
                spec.set_canary(TabPolicy.from_state(message[1]) if message[1] else None,
                                message[2])
                conn.send(("swapped",))
                continue
            cpu0 = time.thread_time()
            spec._decide_live(message[1], lambda i, result: conn.send(("result", i, result)))
            conn.send(("done", time.thread_time() - cpu0,
                       spec.lm.cache_stats() if spec.lm is not None else {}))
        except Exception as exc:  # this batch fails; the process serves the next one
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
