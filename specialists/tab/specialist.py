"""The Tab specialist: a warm engine answering keystrokes under the 50 ms budget.

Configured by YAML like any specialist::

    specialists:
      tab:
        class: specialists.tab:TabSpecialist
        options: {checkpoint: specialists/tab/checkpoint, threads: 1}

``checkpoint`` holds the LM (``tokenizer.json`` + any ``AutoModelForCausalLM``) and the
policy head (``policy.safetensors`` + ``policy.json``); ``policy`` may point elsewhere.
Without an LM (``use_lm: false``) the policy must have been trained without one.

Two ways in: :meth:`TabSpecialist.answer` decides one request on the caller's thread;
:meth:`TabSpecialist.submit` queues it for the model worker (:mod:`specialists.tab.batcher`),
which decides concurrent requests together — one batched LM call, then the policy per
request — and drops those a newer keystroke of the same ``session`` made stale before
they cost a forward pass. The HTTP endpoint uses ``submit``. Both give the same answers.

A canary (issue 15, :meth:`TabSpecialist.set_canary`) serves a second policy version to a
share of the traffic: each request's arm is a hash of its ``session`` (else its request id)
salted with the canary's version, so an editor keeps to one version for the whole canary.
The LM runs once per batch for both arms; each arm's policy then draws for its own jobs,
so no draw mixes versions, and every answer names the version that drew it.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping

from pydantic import Field, ValidationError

from specialists.base import (OptionsError, Result, Specialist, SpecialistError,
                              SpecialistOptions)
from specialists.tab.types import RecentEdit, TabRequest, parse_diff

__all__ = ["Canary", "TabOptions", "TabSpecialist", "DEFAULT_CHECKPOINT", "in_canary"]

DEFAULT_CHECKPOINT = Path(__file__).parent / "checkpoint"
JUMP_MAX_LINES = 25
"""The jump rule's reach in lines, as tuned on the dev project (attrs) by ``benchmarks/tab.py``
(BENCHMARKS, "Jumps and per-kind figures")."""


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: bytes that were never UTF-8
        return False
    return True


def _clean(value: Any, limit: int = 4000) -> str:
    text = str(value or "")[:limit]
    return text if _utf8(text) else text.encode("utf-8", "replace").decode("utf-8")


@dataclass(frozen=True)
class Canary:
    """A candidate policy served to ``share`` of the traffic beside the deployed one."""

    policy: Any
    share: float

    @property
    def version(self) -> int:
        return int(self.policy.version)


def in_canary(key: str, version: int, share: float) -> bool:
    """Does the editor ``key`` (a session, else a request id) get canary ``version``? A
    hash decides (a microsecond, no lock): stable for the key, independent between canaries
    (salted with the version), and true for ``share`` of keys."""
    digest = hashlib.blake2b(f"{version}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < share * 2.0 ** 64


@dataclass
class _Job:
    """A parsed request waiting for the model."""

    req: TabRequest
    offset: int
    """Where the window ``req.file`` starts in the request's file."""
    open_files: list[str]
    session: str | None
    seq: int | None
    t0: float
    """When it arrived (``perf_counter``): its latency counts the wait for the model."""
    meta: dict[str, Any]
    canary: bool = False
    """Drawn by the canary's policy (if one still runs when the batch is decided)."""
    explain: bool = False
    """The request asked why: the answer's meta carries ``explain`` (:meth:`_explain`)."""
    personal: list[float] | None = None
    """The session's and project's history as the server keeps it
    (:class:`~specialists.tab.personal.Tracker`); None without a session."""
    project: str = ""


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        raise SpecialistError("'recent_edits[].offset' must be an integer") from None


class TabOptions(SpecialistOptions):
    checkpoint: str | None = None
    """LM directory (default: the shipped ``specialists/tab/checkpoint``)."""
    policy: str | None = None
    """Policy directory (default: the checkpoint's)."""
    use_lm: bool = True
    threads: int = Field(1, ge=1, le=256)
    context_tokens: int | None = Field(None, ge=1)
    window_before: int = Field(24_000, ge=0)
    window_after: int = Field(8_000, ge=0)
    max_recent_edits: int = Field(8, ge=0)
    sample: bool = False
    """Sample actions from the policy (on-policy data for the loop) instead of its mode."""
    log_features: bool = False
    """Keep each decision's observation for the event store (the loop trains on it)."""
    lm_cache: int = Field(64, ge=0)
    """LM prompt states kept for reuse between keystrokes (0: none; ~0.4 MB each)."""
    prompt_anchor: int = Field(16, ge=0, le=64)
    """The LM prompt's start moves in steps of this many tokens, so that a keystroke runs
    only its new tokens on the previous prompt's cache (0: a sliding window, no reuse)."""
    int8: bool = False
    """The LM's matrix products in int8 (weights per output column, each activation row on
    its own: an answer does not depend on its batch). ~20% less CPU a keystroke; logits move
    by ~1% of their largest magnitude (BENCHMARKS, "Tab under concurrency"). GPT-2 only."""
    max_batch: int = Field(16, ge=1)
    """Most requests the model worker takes in one turn (``submit``)."""
    max_queue: int = Field(64, ge=1)
    """Most requests waiting for the model worker; past it the stalest is answered 'overloaded'."""
    workers: int = Field(1, ge=1, le=8)
    """Model worker threads (torch releases the GIL: a second one uses a second core)."""
    processes: int = Field(0, ge=0, le=8)
    """Model worker processes, each with its own copy of the model (0: threads in this
    process). Their Python does not share the server's GIL; a session keeps to one."""
    jump_max_lines: int = Field(JUMP_MAX_LINES, ge=0)
    """Where the policy shows nothing, a jump to the next edit's line (kind ``jump``) when
    :class:`~specialists.tab.jump.JumpRule`'s gates hold and the target is at most this many
    lines below (0: no jumps). With ``log_features`` the logged row names the rule
    (``rule: jump``): its outcome is counted for the jump, and the loop credits the
    policy's own choice as showing nothing."""
    rewrite_fallback: bool = True
    """Where the policy shows nothing, a next-edit rewrite starting at the cursor
    (:func:`~specialists.tab.jump.rewrite_at_cursor`) before any jump (logged as
    ``rule: rewrite``)."""
    next_edit: str | None = None
    """A next-edit model's folder (``python -m specialists.tab.next_edit``). Where the policy
    shows nothing and no rewrite at the cursor applies, its change to the editable region
    around the cursor is shown (kind ``next_edit``, logged as ``rule: model``), before any
    jump. Off by default: no next-edit model ships, and its decode runs on the request's
    path (BENCHMARKS, "The next-edit model")."""
    hold_finished: bool = False
    """Withhold the policy's insertion where the latest edit looks finished
    (:func:`~specialists.tab.jump.held`); the fallbacks then decide (logged as ``rule:
    held`` when nothing is shown). Off by default: the replay it was tuned on asks only at
    word boundaries and when a hunk is done, but a live editor asks on every keystroke and
    sends each as an edit, so mid-word the latest edit "looks finished" too and the rule
    would withhold the insertions of a person still typing (the LSP end-to-end test)."""
    session_restart_s: float = Field(0.5, ge=0)
    """A request whose ``seq`` is lower than its session's newest, arriving this long or
    longer after the session's last request, starts the session again (an editor reloaded,
    a document closed and reopened: its version counts from 0 again) instead of being
    dropped as stale. A lower ``seq`` sooner than this is a request overtaken in flight and
    is still dropped. (An answer older than ~150 ms is of no use to an editor, so no request
    overtaken in flight is worth keeping after this long.)"""


#: The largest ``seq`` taken: JavaScript's largest exact integer (an editor's counter).
MAX_SEQ = 2**53 - 1


class TabSpecialist(Specialist):
    kind = "tab"
    Options = TabOptions

    def __init__(self, **options: Any) -> None:
        """``options`` are :class:`TabOptions`' fields, validated here (the options model is
        the constructor's input: each option is written once, in the model)."""
        try:
            opts = TabOptions(**options)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise OptionsError(f"Tab option {'.'.join(map(str, err['loc']))}: {err['msg']}",
                                  param=".".join(map(str, err["loc"]))) from None
        super().__init__(**opts.model_dump())  # ``self.options``: every option, defaults too
        for name in TabOptions.model_fields:
            if name not in ("checkpoint", "policy", "next_edit"):
                setattr(self, name, getattr(opts, name))
        self.checkpoint = Path(opts.checkpoint) if opts.checkpoint else DEFAULT_CHECKPOINT
        self.policy_path = Path(opts.policy) if opts.policy else self.checkpoint
        self.next_edit_path = opts.next_edit
        self.next_edit: Any = None
        # as given, for the model worker processes, which build their own copy from them
        # (one model each, no workers of their own)
        self._options = opts.model_dump(exclude_unset=True,
                                        exclude={"max_batch", "max_queue", "workers", "processes"})
        self._procs: list[Any] = []
        self.lm: Any = None
        self.policy: Any = None
        self.canary: Canary | None = None
        """Replaced whole (never mutated), so a request reads it without a lock."""
        self._lock = threading.Lock()  # the policies: their draws and their swaps
        # session -> (its newest seq, when its last request arrived: time.monotonic())
        self._latest: OrderedDict[str, tuple[int, float]] = OrderedDict()
        self._seq_lock = threading.Lock()
        self._worker: Any = None  # the model worker (one queue), once started
        self._home: OrderedDict[str, int] = OrderedDict()  # session -> its worker
        self._worker_lock = threading.Lock()
        from specialists.tab.personal import Tracker

        self.personal = Tracker()
        """Per session and project: what this server showed and what came of it (issue 35);
        the policy reads it as ``Observation.personal``, and the event store's features log it."""
        # request id -> (session, project, characters shown), until its feedback arrives
        self._shown: OrderedDict[str, tuple[str, str, int]] = OrderedDict()
        self._personal_lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------
    def setup(self) -> None:
        from specialists.tab.features import ObserveConfig
        from specialists.tab.lm import TabLM
        from specialists.tab.policy import TabPolicy

        self.policy = TabPolicy.load(self.policy_path)
        if self.context_tokens is None:
            self.context_tokens = int(self.policy.trained_with.get("context_tokens", 64))
        if self.use_lm:
            self.lm = TabLM(self.checkpoint, context_tokens=self.context_tokens, threads=self.threads,
                            cache=self.lm_cache, anchor=self.prompt_anchor,
                            int8=self.int8).load()
        if (self.lm.hidden_size if self.lm else 0) != self.policy.config.hidden_size:
            raise SpecialistError(f"policy at {self.policy_path} expects LM hidden size "
                                  f"{self.policy.config.hidden_size}; the LM has "
                                  f"{self.lm.hidden_size if self.lm else 0}")
        self.observe_config = ObserveConfig(use_lm=self.lm is not None)
        if self.next_edit_path:
            from specialists.tab.next_edit import NextEditModel

            try:
                self.next_edit = NextEditModel(self.next_edit_path, threads=self.threads)
            except FileNotFoundError as exc:
                raise SpecialistError(f"next_edit: {exc}") from None
        self.answer({"file": "def warm_up(x):\n    return x\n\nwarm_", "cursor": 33, "language": "python"})

    def start_workers(self) -> None:
        """Start the model workers (and processes) :meth:`submit` uses; the first submit
        does it otherwise. A server calls it at startup, so that spawning the processes
        (seconds: each loads torch and the model) is done before it says it is ready;
        in-process users that only call :meth:`answer` (the LSP) never start any."""
        with self._worker_lock:
            if self._worker is not None:
                return
            if self.processes and not self._procs:
                from specialists.tab.procs import ModelProcess

                procs = [ModelProcess(type(self), {**self._options, "policy": str(self.policy_path),
                                                   "context_tokens": self.context_tokens,
                                                   "processes": 0}, name=f"tab-model-{i}")
                         for i in range(self.processes)]  # they load in parallel
                for proc in procs:
                    proc.wait_ready()
                with self._lock:  # the policy served now (swapped since setup?); then swaps reach them
                    canary = self.canary
                    for proc in procs:
                        proc.swap(self.policy.state())
                        if canary is not None:
                            proc.set_canary(canary.policy.state(), canary.share)
                    self._procs = procs
            self._worker = self._start_worker()

    def swap(self, policy: Any) -> int:
        """Serve ``policy`` to everyone from now on; returns the version it replaced. It
        ends any canary: that was measured against the version replaced here.

        The new policy is fully loaded before this is called, and the swap waits for the
        policy lock (and each model process for the batch in its hands), so requests in
        flight finish on the old version and none sees a half-loaded one.
        """
        self._check_fits(policy)
        with self._lock:
            old, self.policy, self.canary = self.policy, policy, None
            if self._procs:
                state = policy.state()
                for proc in self._procs:
                    proc.swap(state)
        return int(old.version) if old is not None else -1

    def set_canary(self, policy: Any | None, share: float = 0.0) -> None:
        """Serve ``policy`` to ``share`` of the editors (0 < share < 1) beside the deployed
        version, replacing any canary; ``None`` ends the canary. Like :meth:`swap`, it
        waits for the batch in hand; requests already assigned to an ended canary are
        decided by the deployed version (their answers say so)."""
        if policy is not None:
            self._check_fits(policy)
            if not 0.0 < share < 1.0:
                raise SpecialistError(f"a canary's share is between 0 and 1 (exclusive), got {share}")
        canary = Canary(policy, float(share)) if policy is not None else None
        with self._lock:
            if self._procs:
                state = policy.state() if policy is not None else None
                for proc in self._procs:
                    proc.set_canary(state, share)
            self.canary = canary

    def _check_fits(self, policy: Any) -> None:
        expected = self.lm.hidden_size if self.lm else 0
        if policy.config.hidden_size != expected:
            raise SpecialistError(f"policy version {policy.version} expects LM hidden size "
                                  f"{policy.config.hidden_size}; the served LM has {expected}")

    @property
    def version(self) -> str:  # type: ignore[override]
        return str(self.policy.version) if self.policy is not None else "0"

    def health(self) -> dict[str, Any]:
        out = {"ok": self.policy is not None, "version": self.version,
               "lm": str(self.checkpoint) if self.lm else None}
        canary = self.canary
        if canary is not None:
            out["canary"] = {"version": str(canary.version), "share": canary.share}
        if self.lm is not None and self.lm_cache:  # with processes, theirs do the serving
            caches = [p.cache for p in self._procs] or [self.lm.cache_stats()]
            out["lm_cache"] = {k: sum(c.get(k, 0) for c in caches) for k in caches[0]}
        if self._worker is not None:
            worker = self._worker.stats()
            if self._procs:  # the deciding is done there
                worker["cpu_s"] = round(sum(p.cpu_s for p in self._procs), 3)
            out["worker"] = worker
        return out

    # -- requests ----------------------------------------------------------------------
    def parse(self, request: Mapping[str, Any]) -> tuple[TabRequest, int]:
        """Validate and window a request; returns it and the window's offset in the file."""
        file = request.get("file")
        if not isinstance(file, str):
            raise SpecialistError("'file' must be the document's text (a string)", param="file")
        cursor = request.get("cursor")
        if isinstance(cursor, bool) or not isinstance(cursor, int):
            raise SpecialistError("'cursor' must be an integer offset into 'file'",
                                  param="cursor")
        if not 0 <= cursor <= len(file):
            raise SpecialistError(f"'cursor' {cursor} is outside the file (0..{len(file)}): "
                                  "send an offset in characters from 0 to len(file)",
                                  param="cursor")
        seq = request.get("seq")
        if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int)
                                or not 0 <= seq <= MAX_SEQ):
            raise SpecialistError(f"'seq' must be an integer from 0 to {MAX_SEQ} (higher = "
                                  "newer, per 'session')", param="seq")
        lo = max(0, cursor - self.window_before)
        hi = min(len(file), cursor + self.window_after)
        edits = []
        for e in list(request.get("recent_edits") or [])[-self.max_recent_edits :]:
            if isinstance(e, str):
                edits.append(parse_diff(_clean(e, 16_000)))
            elif isinstance(e, Mapping):
                edits.append(RecentEdit(old=_clean(e.get("old")), new=_clean(e.get("new")),
                                        offset=_int(e.get("offset"))))
            else:
                raise SpecialistError("'recent_edits' items are {old, new} objects or diff strings")
        since = request.get("seconds_since_last")
        if since is not None and (isinstance(since, bool) or not isinstance(since, (int, float)) or since < 0):
            raise SpecialistError("'seconds_since_last' must be a non-negative number")
        outcome = request.get("last_outcome")
        if outcome not in (None, "accepted", "rejected", "none"):
            raise SpecialistError("'last_outcome' is one of accepted, rejected, none")
        req = TabRequest(file=file[lo:hi], cursor=cursor - lo, language=str(request.get("language") or ""),
                         path=str(request.get("path") or ""), recent_edits=edits,
                         seconds_since_last=float(since) if since is not None else None,
                         last_outcome=outcome, request_id=str(request.get("request_id") or uuid.uuid4().hex))
        return req, lo

    @staticmethod
    def _open_files(request: Mapping[str, Any]) -> list[str]:
        """Other open files, a copy source: at most 8, the first 16,000 characters of each."""
        files = request.get("open_files") or []
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise SpecialistError("'open_files' must be a list of file texts")
        return [_clean(f, 16_000) for f in files[:8]]

    def _note_seq(self, session: str, seq: int) -> None:
        """Remember ``seq`` as ``session``'s newest, unless a higher one is already in: then
        this request was overtaken in flight, or, after a pause of ``session_restart_s``, it
        starts the session again (a reload or a reopened document counts from 0 again; a
        huge ``seq`` sent once cannot silence the session for good)."""
        now = time.monotonic()
        with self._seq_lock:
            last = self._latest.get(session)
            restart = last is not None and seq < last[0] and \
                now - last[1] >= self.session_restart_s
            newest = seq if last is None or restart else max(last[0], seq)
            self._latest[session] = (newest, now)
            self._latest.move_to_end(session)
            while len(self._latest) > 10_000:
                self._latest.popitem(last=False)

    def _stale(self, job: _Job) -> bool:
        """A newer request from the same session has arrived since ``job``."""
        if job.session is None or job.seq is None:
            return False
        with self._seq_lock:
            newest = self._latest.get(job.session)
            return newest is not None and newest[0] > job.seq

    def _prepare(self, request: Mapping[str, Any]) -> _Job | Result:
        """Validate and window a request, note its session's newest seq; a Result when
        it is answered without the model (empty, binary, not UTF-8)."""
        t0 = time.perf_counter()
        req, offset = self.parse(request)
        open_files = self._open_files(request)
        session, seq = request.get("session"), request.get("seq")
        canary = self.canary  # one read: a canary ended meanwhile is handled by _decide_live
        arm = canary is not None and in_canary(str(session) if session is not None
                                               else req.request_id, canary.version, canary.share)
        version = canary.version if arm and canary is not None else self.policy.version
        job = _Job(req, offset, open_files, None if session is None or seq is None else str(session),
                   None if session is None or seq is None else int(seq), t0,
                   {"request_id": req.request_id, "policy_version": version}, canary=arm,
                   explain=bool(request.get("explain")))
        if job.session is not None and job.seq is not None:  # the person typed on: newer wins
            self._note_seq(job.session, job.seq)
        if session is not None:
            job.project = str(request.get("project") or "")
            with self._personal_lock:
                job.personal = self.personal.request(str(session), job.project, time.monotonic(),
                                                     offset + req.cursor)
        if not req.file.strip():
            return self._nothing("empty file", t0, job.meta)
        if "\x00" in req.file:
            return self._nothing("binary content", t0, job.meta)
        if not _utf8(req.file):
            return self._nothing("content is not valid UTF-8", t0, job.meta)
        return job

    def answer(self, request: Mapping[str, Any]) -> Result:
        """A suggestion (``range`` + ``text``) or an explicit nothing, with version and latency."""
        job = self._prepare(request)
        if isinstance(job, Result):
            return job
        out: list[Result] = []
        self._decide([job], lambda _, result: out.append(result))
        self._remember(job, out[0])
        return out[0]

    def _remember(self, job: _Job, result: Any) -> None:
        """Keep a shown suggestion's session, project and length until its feedback comes."""
        if job.session is None or not isinstance(result, Result) or result.output is None:
            return
        with self._personal_lock:
            self._shown[str(result.meta.get("request_id"))] = (job.session, job.project,
                                                               len(result.output.get("text") or ""))
            while len(self._shown) > 20_000:
                self._shown.popitem(last=False)

    def record_outcome(self, request_id: str, outcome: str, chars_accepted: int | None = None) -> bool:
        """The feedback on a suggestion this server showed (``accepted``, ``partial`` or
        ``rejected``; ``chars_accepted``: what was taken, the whole suggestion when not
        given) into its session's and project's history. False: not one of this server's
        shown suggestions with a session, or already recorded."""
        with self._personal_lock:
            shown = self._shown.pop(request_id, None)
            if shown is None:
                return False
            session, project, chars = shown
            accepted = outcome in ("accepted", "partial")
            taken = (chars if chars_accepted is None else int(chars_accepted)) if accepted else 0
            self.personal.outcome(session, project, accepted, chars, taken)
        return True

    def submit(self, request: Mapping[str, Any], done: Callable[[Any], None]) -> None:
        """:meth:`answer` through the model worker, which batches concurrent requests.

        Bad input raises here, at once; otherwise ``done`` receives the Result (or the
        exception that prevented one) on a worker thread — hand it over, do not block.
        """
        job = self._prepare(request)
        if isinstance(job, Result):
            done(job)
            return

        def remembered(result: Any) -> None:
            self._remember(job, result)
            done(result)

        self._started_worker().submit(job, remembered)

    def _started_worker(self) -> Any:
        """The model worker (one queue; with processes, each of its threads serves it with
        its own model process, preferring the sessions that process served last: their
        keystrokes meet their cached work there)."""
        if self._worker is None:
            self.start_workers()
        return self._worker

    def _start_worker(self) -> Any:
        from specialists.tab.batcher import ModelWorker

        if not self._procs:
            return ModelWorker(self._decide, self._overloaded, self._stale,
                               max_queue=self.max_queue, max_batch=self.max_batch,
                               threads=self.workers, name="tab-model")
        deciders = [partial(self._decide_in, i, proc) for i, proc in enumerate(self._procs)]
        return ModelWorker(self._decide, self._overloaded, self._stale, max_queue=self.max_queue,
                           max_batch=self.max_batch, name="tab-model", deciders=deciders,
                           affinity=self._affinity)

    def _affinity(self, job: _Job) -> int | None:
        """The model process that served ``job``'s session last (None: new, or no session)."""
        return self._home.get(job.session) if job.session is not None else None

    def _decide_in(self, index: int, proc: Any, jobs: list[_Job],
                   deliver: Callable[[int, Result], None]) -> None:
        """Decide ``jobs`` in model process ``index``; their sessions now live there."""
        with self._worker_lock:
            for job in jobs:
                if job.session is not None:
                    self._home[job.session] = index
                    self._home.move_to_end(job.session)
            while len(self._home) > 10_000:
                self._home.popitem(last=False)
        self._decide(jobs, deliver, live_decide=proc.decide)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Hold the model workers: requests submitted inside the block queue up and the next
        turn takes them together (a test seam for batching, staleness and the full queue)."""
        self.start_workers()
        with self._worker.paused():
            yield

    def close(self) -> None:
        """Stop the model workers and processes; queued requests are answered 'overloaded'."""
        with self._worker_lock:
            worker, self._worker = self._worker, None
            procs, self._procs = self._procs, []
        if worker is not None:
            worker.close()
        for proc in procs:
            proc.close()

    def _overloaded(self, job: _Job) -> Result:
        return self._nothing("overloaded: too many requests waiting for the model", job.t0,
                             job.meta, overloaded=True)

    def _decide(self, jobs: list[_Job], deliver: Callable[[int, Result], None],
                live_decide: Callable[[list[_Job], Callable[[int, Result], None]], None] | None = None
                ) -> None:
        """Decide for a batch: stale jobs are cancelled before they cost a forward pass; the
        rest go to ``live_decide`` (a model process's) or :meth:`_decide_live`."""
        live = []
        for i, job in enumerate(jobs):
            if self._stale(job):
                deliver(i, self._nothing("cancelled: a newer request from this session arrived",
                                         job.t0, job.meta, cancelled=True))
            else:
                live.append(i)
        if live:
            (live_decide or self._decide_live)([jobs[i] for i in live],
                                               lambda k, result: deliver(live[k], result))

    def _decide_live(self, jobs: list[_Job], deliver: Callable[[int, Result], None]) -> None:
        """One LM call for the batch (``observe_many``) and one pass of the policy head per
        arm (deployed, canary), which then draws per job in order. The LM is safe to share
        between worker threads; the policies are used under the lock, so a swap waits for a
        batch's draws, and no draw mixes versions."""
        from specialists.tab.features import observe_many

        observations = observe_many([job.req for job in jobs], self.lm, self.observe_config,
                                    [job.open_files for job in jobs])
        observations = [o if job.personal is None else o.with_personal(job.personal)
                        for o, job in zip(observations, jobs)]
        actions: list[Any] = [None] * len(jobs)
        with self._lock:
            canary = self.canary
            arms = [[i for i, job in enumerate(jobs) if not (job.canary and canary)],
                    [i for i, job in enumerate(jobs) if job.canary and canary]]
            for policy, arm in zip((self.policy, canary.policy if canary else None), arms):
                if arm:
                    drawn = policy.act_many([observations[i] for i in arm], sample=self.sample)
                    for i, action in zip(arm, drawn):
                        actions[i] = action
        for i, (job, obs, action) in enumerate(zip(jobs, observations, actions)):
            deliver(i, self._result(job, obs, action))

    def _result(self, job: _Job, obs: Any, action: Any) -> Result:
        """The answer: the policy's choice, with the hold, rewrite and jump rules around it
        (:func:`~specialists.tab.jump.apply_rules`); ``meta["rule"]`` names the rule that
        decided, for the event store."""
        from specialists.tab.jump import JumpRule, apply_rules

        meta = {**job.meta, "policy_version": action.version, "logprob": round(action.logprob, 4),
                "prob_show": round(action.prob_show, 4), "action": action.index}
        if self.log_features:
            from specialists.tab.features import features_json

            meta["features"] = features_json(obs)
        s, rule, source = apply_rules(action.suggestion, job.req, obs, JumpRule(self.jump_max_lines),
                                      self.rewrite_fallback, self.hold_finished, self.next_edit)
        if rule is not None:
            meta["rule"] = rule
        if job.explain:
            meta["explain"] = self._explain(obs, action, rule, job.offset)
        if s is None:
            reason = "held back: the edit looks finished" if rule == "held" else "policy chose not to show"
            return self._nothing(reason, job.t0, meta)
        if rule is None:  # the policy's own candidate
            cand = obs.candidates[int(obs.rows[action.index - 1][0])]
            kind, source = ("next_edit" if cand.is_rewrite else "completion"), cand.source
        else:
            kind = "jump" if s.jump else "next_edit"
        # a jump's text is empty (nothing is typed): ``range`` is the next edit's line
        out = {"range": {"start": s.start + job.offset, "end": s.end + job.offset}, "text": s.text,
               "kind": kind, "source": source}
        meta["latency_ms"] = round((time.perf_counter() - job.t0) * 1000, 2)
        # a rule's answer has no probability of its own: the policy's was for another choice
        return Result(output=out, confidence=round(action.prob_show, 4) if rule is None else None,
                      meta=meta)

    def _explain(self, obs: Any, action: Any, rule: str | None, offset: int) -> dict[str, Any]:
        """Why this answer: the candidates the policy weighed, its most likely actions with
        their probabilities, whether it sampled, and which rule (if any) decided instead —
        so "nothing good to say" (every candidate unlikely) reads apart from "the policy is
        off" (a likely candidate not drawn, or no candidate at all)."""
        actions = []
        for index, prob in action.top:
            if index == 0:
                actions.append({"action": 0, "shows": None, "probability": prob})
                continue
            if index > len(obs.rows):  # no such candidate (none at all): it cannot be drawn
                continue
            sug = obs.suggestion(index - 1)
            cand = obs.candidates[int(obs.rows[index - 1][0])]
            actions.append({"action": index, "probability": prob, "source": cand.source,
                            "shows": {"start": sug.start + offset, "end": sug.end + offset,
                                      "text": sug.text}})
        return {"policy_version": action.version, "sampled": bool(self.sample),
                "chosen": action.index, "prob_show": round(action.prob_show, 4),
                "candidates": [{"text": c.text[:200], "source": c.source,
                                "rewrite": bool(c.is_rewrite)} for c in obs.candidates[:16]],
                "n_candidates": len(obs.candidates), "n_actions": 1 + len(obs.rows),
                "top_actions": actions, "rule": rule}

    @staticmethod
    def _nothing(reason: str, t0: float, meta: dict[str, Any], **extra: Any) -> Result:
        meta = {**meta, **extra, "latency_ms": round((time.perf_counter() - t0) * 1000, 2)}
        return Result(output=None, abstained=True, reason=reason, meta=meta)
