"""The Tab service: the one owner of the online loop's state in a server process.

It holds the Tab specialist, the policy store (``<data_dir>/tab``: versions, the deployed
pointer, the canary) and the event store, and it is the only code in the router that
changes which policy is served (a test checks that nothing else calls ``swap``,
``set_canary`` or ``set_deployed``). Its callers:

* the HTTP endpoints (``router.api.tab``): :meth:`TabService.deploy` (and rollback),
  :meth:`~TabService.start_canary`, :meth:`~TabService.promote`, :meth:`~TabService.abort`,
  :meth:`~TabService.versions`;
* the app (``router.app``) at start: :meth:`~TabService.sync_at_start`, then with
  ``complement serve --workers N`` the follower each worker process runs,
  :meth:`~TabService.follow_store`;
* the LSP server (``router.lsp``): :meth:`~TabService.sync_at_start` and
  :meth:`~TabService.log_action`;
* the Ray engine (``router.ray_serve``): each replica's :meth:`~TabService.sync_at_start`
  and, for what the deploy published on the policy board, :meth:`~TabService.swap_to`
  (the board's follower);
* the CLI (``complement tab rollback`` with no server running):
  :meth:`~TabService.deploy_at_next_start`.

The loop runner and the live loop (``specialists.tab.loop``) reach it over HTTP
(``POST /v1/tab/deploy``, ``/v1/tab/canary``), through the endpoints above.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from typing import Any

from router.errors import Conflict
from specialists.base import Canaries, HoldsPolicy, ReportsSwaps, Swappable, capabilities
from specialists.tab.loop.versions import PolicyStore, publish_policy

__all__ = ["TabService", "action_record", "log_action"]

log = logging.getLogger(__name__)


class TabService:
    """Tab's policy and event state for one specialist (``spec``) and one data directory.

    ``events`` is the event store (None: decisions and deploys are not recorded, as in a Ray
    replica, whose ingress records them). Deploys, canaries and the follower take one lock
    (:attr:`lock`), so none sees another half done: a swap and the move of the store's
    pointer happen together."""

    def __init__(self, spec: Any, data_dir: str | Path, events: Any = None) -> None:
        self.spec = spec
        """The Tab specialist; None where none is configured (the versions' record stays)."""
        self.root = Path(data_dir).expanduser() / "tab"
        self.events = events
        self._store: PolicyStore | None = None
        self._lock: asyncio.Lock | None = None

    @property
    def store(self) -> PolicyStore:
        """The policy store under ``<data_dir>/tab``, made on first use (a server whose data
        directory cannot be written still starts, and says so)."""
        if self._store is None:
            self._store = PolicyStore(self.root)
        return self._store

    @property
    def lock(self) -> asyncio.Lock:
        """Held while a deploy swaps and moves the store's pointer, and while a worker
        follows the pointer (:meth:`follow_store`)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def _caps(self) -> frozenset[type]:
        return capabilities(self.spec) if self.spec is not None else frozenset()

    # -- the one place a policy is swapped ----------------------------------------------
    def swap_to(self, policy: Any) -> int:
        """Serve ``policy`` from now on (the specialist's hot swap); the version replaced."""
        self._can_swap()
        return int(self.spec.swap(policy))

    def _can_swap(self) -> None:
        """A 409 if the configured specialist cannot hot-swap a policy."""
        if Swappable not in self._caps():
            raise Conflict(f"the configured tab specialist ({type(self.spec).__name__}) "
                           "cannot hot-swap a policy")

    def _can_canary(self) -> None:
        """A 409 saying why, if the configured specialist cannot serve a canary."""
        can = self._caps()
        if Canaries not in can:
            # --engine ray: the replicas follow one policy board carrying one version; a
            # canary there would need the board to carry two and every replica to split
            raise Conflict(f"the configured tab specialist ({type(self.spec).__name__}"
                           f"{' under --engine ray' if ReportsSwaps in can else ''}) "
                           "cannot serve a canary beside the deployed version; deploy "
                           "directly (`complement loop --canary-share 0`)")

    def _set_canary(self, policy: Any | None, share: float = 0.0) -> None:
        self._can_canary()
        self.spec.set_canary(policy, share)

    def _load(self, version: int) -> Any:
        from specialists.tab.policy import TabPolicy

        return TabPolicy.load(self.store.path(version))

    # -- at start ----------------------------------------------------------------------
    def sync_at_start(self, canary: bool = False) -> int | None:
        """Make a starting server and its policy store agree.

        The first start publishes the policy the Tab specialist loaded as the store's first
        version and deploys it, so the loop has something to train; later starts serve the
        version the store says is deployed (the loop's last swap, or a rollback made while
        the server was down). With ``canary``, a canary the store records is served too
        (:meth:`sync_canary`). Returns the deployed version (``None`` for a specialist that
        holds no swappable policy in this process)."""
        if not {Swappable, HoldsPolicy} <= self._caps() or self.spec.policy is None:
            return None
        policy = self.spec.policy
        deployed = self.store.deployed()
        if deployed is None:
            version = int(policy.version)
            source = self.spec.policy_path
            publish_policy(self.store, source, version,
                           {"parent": None, "source": str(source), "events_used": 0})
            self.store.set_deployed(version)
            return version
        if deployed != int(policy.version):
            self.swap_to(self._load(deployed))
        if canary:
            self.sync_canary()
        return deployed

    def sync_canary(self) -> bool:
        """Serve the store's canary beside the deployed version, or none if it records
        none; True if that changed what the specialist serves. A specialist that cannot
        serve a canary is left alone."""
        if Canaries not in self._caps():
            return False
        want = self.store.canary()
        have = self.spec.canary
        if want is None or want["version"] == self.store.deployed():
            if have is None:
                return False
            self._set_canary(None)
            return True
        if have is not None and (int(have.version), have.share) == (want["version"], want["share"]):
            return False
        self._set_canary(self._load(want["version"]), want["share"])
        return True

    # -- on a running server -----------------------------------------------------------
    async def deploy(self, version: int, event: str = "deploy") -> dict[str, Any]:
        """Hot-swap ``version`` in (``event``: ``deploy`` or ``rollback``). It is loaded
        completely, then swapped in and the store pointed at it under :attr:`lock`:
        requests in flight finish on the old version, none sees a half-loaded one, nothing
        restarts. Logged in the event store."""
        self.store.lineage(version)  # 404 naming the known versions if it does not exist
        previous = await self._deploy_version(version)
        # with replicas (--engine ray): which switched when, for the deploy log
        detail = self.spec.swap_report() if ReportsSwaps in self._caps() else {}
        await self.record(str(version), event, previous=previous, **detail)
        return {"deployed": version, "previous": previous, "event": event, **detail}

    async def _deploy_version(self, version: int) -> int:
        self._can_swap()  # the 409, before anything is loaded
        policy = await asyncio.to_thread(self._load, version)
        async with self.lock:
            previous = await asyncio.to_thread(self.swap_to, policy)
            self.store.clear_canary()  # the swap ended any canary (measured against `previous`)
            self.store.set_deployed(version)
        return previous

    async def start_canary(self, version: int, share: float) -> dict[str, Any]:
        """Serve ``version`` to ``share`` of the editors beside the deployed version
        (replacing any canary); the store records it, so other workers follow it and a
        restart resumes it."""
        self._can_canary()
        self.store.lineage(version)  # 404 naming the known versions if it does not exist
        if version == self.store.deployed():
            raise Conflict(f"version {version} is the deployed version; a canary is another one")
        policy = await asyncio.to_thread(self._load, version)
        async with self.lock:
            await asyncio.to_thread(self._set_canary, policy, share)
            record = self.store.set_canary(version, share)
        await self.record(str(version), "canary_start", share=share,
                          deployed=self.store.deployed(), started_at=record["started_at"])
        return {"canary": record, "deployed": self.store.deployed()}

    async def promote(self) -> dict[str, Any]:
        """Deploy the canary's version to everyone (the canary ends)."""
        running = self.store.canary()
        if running is None:
            raise Conflict("no canary is running; start one with POST /v1/tab/canary")
        previous = await self._deploy_version(running["version"])
        await self.record(str(running["version"]), "canary_promoted", previous=previous,
                          share=running["share"], started_at=running["started_at"])
        return {"deployed": running["version"], "previous": previous, "event": "canary_promoted"}

    async def abort(self) -> dict[str, Any]:
        """End the canary: everyone is served the deployed version again. Idempotent."""
        running = self.store.canary()
        async with self.lock:
            if Canaries in self._caps():
                await asyncio.to_thread(self._set_canary, None)
            self.store.clear_canary()
        if running is not None:
            await self.record(str(running["version"]), "canary_aborted",
                              deployed=self.store.deployed(), share=running["share"],
                              started_at=running["started_at"])
        return {"aborted": running["version"] if running else None,
                "deployed": self.store.deployed()}

    def versions(self) -> dict[str, Any]:
        """Every policy version with its lineage, the deployed one, the canary, and the
        last deploys."""
        return {"deployed": self.store.deployed(), "canary": self.store.canary(),
                "versions": self.store.versions(),
                "deploys": self.events.deploy_log(20) if self.events is not None else []}

    def deploy_at_next_start(self, version: int) -> None:
        """Point the store at ``version`` while no server runs: the next start serves it
        (:meth:`sync_at_start`)."""
        self.store.set_deployed(version)

    async def record(self, version: str, event: str, **detail: Any) -> None:
        if self.events is not None:
            await asyncio.to_thread(self.events.record_deploy, version, event, **detail)

    # -- the follower of ``complement serve --workers N`` --------------------------------
    async def follow_store(self, every_s: float) -> None:
        """Serve whatever policy version the store says is deployed, checking every
        ``every_s``.

        With ``complement serve --workers N`` a ``POST /v1/tab/deploy`` (or a rollback)
        reaches one worker process, which swaps and moves the store's pointer; every other
        worker sees the pointer move here and swaps too, so all serve the new version within
        ``every_s``. A canary is followed the same way; each worker assigns an editor to the
        same arm (a hash of its session). Each switch is logged with the worker's process
        id. (The Ray engine's replicas follow the policy board instead: ``router.ray_serve``
        calls :meth:`swap_to`.)"""
        if not {Swappable, HoldsPolicy} <= self._caps() or self.spec.policy is None:
            return
        stuck: int | None = None  # a version whose files name another: not loaded again
        while True:
            await asyncio.sleep(every_s)
            try:
                async with self.lock:  # not between a deploy's swap and its pointer
                    deployed = await asyncio.to_thread(self.store.deployed)
                    if deployed is None or deployed == stuck or \
                            str(deployed) == str(self.spec.policy.version):
                        if deployed is not None and await asyncio.to_thread(self.sync_canary):
                            log.warning("tab: worker %d now serves canary %s (the store's)",
                                        os.getpid(), self.store.canary())
                        continue
                    policy = await asyncio.to_thread(self._load, deployed)
                    previous = await asyncio.to_thread(self.swap_to, policy)
                    await asyncio.to_thread(self.sync_canary)
                log.warning("tab: worker %d switched from policy version %s to %s (the store's "
                            "deployed version) at %.3f", os.getpid(), previous, deployed,
                            time.time())
                stuck = deployed if str(self.spec.policy.version) != str(deployed) else None
            except Exception as exc:  # the next check tries again; serving goes on meanwhile
                log.warning("tab: worker %d could not follow the deployed policy: %s",
                            os.getpid(), exc)

    # -- the decisions the loop trains on ---------------------------------------------
    def log_action(self, result: Any) -> None:
        """Record the policy's decision in the event store (:func:`log_action`)."""
        log_action(self.events, result)


def log_action(events: Any, result: Any) -> None:
    """Record the policy's decision in ``events`` (when there is a store and the specialist
    logs features): the loop trains on exactly these events."""
    record = action_record(result) if events is not None else None
    if record is not None:
        events.record_action(record)
        result.meta.pop("features")


def action_record(result: Any) -> Any:
    """The event-store row for a Tab result, or None when it decided nothing to log
    (cancelled, overloaded, or a specialist that does not log features)."""
    meta = result.meta
    if "features" not in meta or meta.get("cancelled"):
        return None
    from specialists.tab.events import ActionRecord

    shown = result.output is not None
    # meta["rule"]: a rule decided what the user saw (a jump or a rewrite in the policy's
    # place, or its insertion held back); the trainer credits the policy's action as nothing
    return ActionRecord(
        request_id=str(meta["request_id"]), policy_version=str(meta["policy_version"]),
        action=str(meta.get("action", 0)), logprob=float(meta.get("logprob", 0.0)),
        shown=shown, features=meta["features"],
        suggestion=result.output["text"] if shown else None,
        latency_ms=float(meta.get("latency_ms") or 0.0),
        kind=result.output.get("kind") if shown else None, rule=meta.get("rule"))
