"""``complement serve --engine ray``: the same API on Ray Serve (issue 18).

Imported only when that engine is asked for (``ray`` is the optional extra ``[ray]``)::

    HTTP ─► Serve's proxy ─► ingress deployment: create_app(config), the app the single
                              process serves, with a registry of RemoteSpecialists
                                 │ DeploymentHandle, retried when a replica dies
                                 ▼
                             one deployment per specialist (SpecialistReplica × N):
                             builds the real specialist from its config block
    PolicyBoard (an actor): the Tab policy the Tab service's deploy published (through
    RemoteTab.swap); every Tab replica's watcher hands it to the replica's own Tab service
    (router.service.tab), which swaps it in, and reports when

The ingress runs the very app ``complement serve`` runs, so routes, headers, errors,
metrics and the event store's writes are the same code. A specialist's errors cross the
process boundary as a tagged tuple and are raised again as the same class, so the one
error table still maps them. Tab replicas batch concurrent requests with the specialist's
own model worker (``submit``), as in one process.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import os
import signal
import threading
import time
from functools import partial
from typing import Any, Callable, Mapping

import ray
from ray import serve

from router.app import create_app
from router.config import Config, RayDeploymentConfig, SpecialistConfig
from router.errors import ConfigError, Unavailable
from router.registry import Registry, build, check_block
from specialists.base import (Batched, Closable, HasWorkers, Result, Specialist,
                              SpecialistError, Swappable, capabilities)

__all__ = ["Ingress", "PolicyBoard", "RemoteSpecialist", "SpecialistReplica", "build_app",
           "ray_workers", "replica_pids", "serve_ray"]

log = logging.getLogger("complement.ray")


def _public_methods(obj: Any) -> dict[str, Any]:
    """The public methods of a class (its functions), or of an instance (bound): what a
    remote stand-in forwards, found once at load. Read from the class, so no property of an
    instance runs."""
    klass = obj if isinstance(obj, type) else type(obj)
    names = [name for name, _ in inspect.getmembers(klass, callable) if not name.startswith("_")]
    return {name: (getattr(klass, name) if obj is klass else getattr(obj, name))
            for name in names}


NAMESPACE = "complement"
#: Methods a remote specialist never forwards: its lifecycle is its replica's. A canary
#: (``set_canary``) is not served under Ray: forwarded, it would reach one replica only,
#: and the policy board carries one version; ``POST /v1/tab/canary`` answers 409 instead.
_LOCAL_ONLY = frozenset({"setup", "close", "health", "submit", "swap", "paused", "parse",
                         "start_workers", "set_canary"})
#: How often a Tab replica asks the board for a new policy (and says it is alive).
POLL_S = 0.2
#: A replica silent for longer than this is gone (killed, or scaled down).
ALIVE_S = 2.0
#: Tries of one call when the replica it went to dies under it.
TRIES = 4


def _board_name(app_name: str) -> str:
    return f"{app_name}-tab-policy-board"


# -- the Tab policy board ------------------------------------------------------------------
@ray.remote(num_cpus=0, max_restarts=0)
class PolicyBoard:
    """The Tab policy to serve, published by the deploy endpoint; replicas poll it (a
    replica started later, after a crash or by the autoscaler, reads it first thing) and
    report when they switched."""

    def __init__(self) -> None:
        self.seq = 0
        self.version: int | None = None
        self.state: dict[str, Any] | None = None
        self.seen: dict[str, float] = {}
        self.switched: dict[int, dict[str, dict[str, Any]]] = {}

    def publish(self, version: int, state: dict[str, Any]) -> tuple[int, int | None,
                                                                   dict[str, Any] | None]:
        """A new policy; returns its sequence number and what it replaced."""
        previous = (self.version, self.state)
        self.seq += 1
        self.version, self.state = version, state
        self.switched[self.seq] = {}
        return self.seq, previous[0], previous[1]

    def poll(self, replica: str, have: int) -> tuple[int, int, dict[str, Any]] | None:
        self.seen[replica] = time.time()
        if self.seq > have and self.state is not None and self.version is not None:
            return self.seq, self.version, self.state
        return None

    def report(self, replica: str, seq: int, version: int, at: float,
               error: str | None = None) -> None:
        self.switched.setdefault(seq, {})[replica] = {"replica": replica, "version": version,
                                                      "switched_at": at, "error": error}

    def status(self, seq: int) -> dict[str, Any]:
        now = time.time()
        alive = sorted(r for r, t in self.seen.items() if now - t < ALIVE_S)
        return {"alive": alive, "switched": dict(self.switched.get(seq, {}))}


def _board(app_name: str) -> Any:
    return ray.get_actor(_board_name(app_name), namespace=NAMESPACE)


class _PolicyWatcher:
    """A Tab replica's thread: serve what the board says, report each switch."""

    def __init__(self, service: Any, replica: str, app_name: str) -> None:
        self.service, self.replica, self.app_name = service, replica, app_name
        self.seq = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="tab-policy-watch", daemon=True)

    def start(self) -> "_PolicyWatcher":
        self.poll_once()  # a new replica serves the published policy before its first answer
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self.poll_once()
            except Exception:  # the board may be restarting; the next poll tries again
                log.exception("tab replica %s: policy board poll failed", self.replica)

    def poll_once(self) -> None:
        board = _board(self.app_name)
        news = ray.get(board.poll.remote(self.replica, self.seq), timeout=10)
        if news is None:
            return
        seq, version, state = news
        from specialists.tab.policy import TabPolicy

        error = None
        try:
            self.service.swap_to(TabPolicy.from_state(state))
        except Exception as exc:  # reported to the deploy that asked for it
            error = f"{type(exc).__name__}: {exc}"
        at = time.time()
        self.seq = seq
        board.report.remote(self.replica, seq, version, at, error)
        if error is None:
            log.warning("tab replica %s switched to policy version %s at %s", self.replica,
                        version, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at))
                        + f".{int(at % 1 * 1000):03d}Z")
        else:
            log.error("tab replica %s could not switch to version %s: %s", self.replica,
                      version, error)


# -- one specialist's replica ------------------------------------------------------------
class SpecialistReplica:
    """A Serve replica holding one specialist built from its config block; ``call`` answers
    with ``("ok", value)`` or ``("error", module, class, message, param)``."""

    def __init__(self, name: str, block: dict[str, Any], data_dir: str, app_name: str) -> None:
        self.name = name
        klass, options = check_block(name, SpecialistConfig.model_validate(block))
        self.spec: Any = build(name, klass, options)
        self.replica = serve.get_replica_context().replica_tag
        self.error: str | None = None
        self.watcher: _PolicyWatcher | None = None
        self.methods: dict[str, Any] = {}
        try:
            self.spec.setup()
        except Exception as exc:  # like one process: not ready, not fatal
            log.exception("specialist %s failed to load", name)
            self.error = f"{type(exc).__name__}: {exc}"
            return
        can = capabilities(self.spec)
        if HasWorkers in can:  # a model's workers up before the replica says ready
            self.spec.start_workers()
        # what a request may call on it: its public methods, found once, here
        self.methods = _public_methods(self.spec)
        if Swappable in can:
            from router.service.tab import TabService

            service = TabService(self.spec, data_dir)  # the ingress's records the deploys
            self._sync_store(service, data_dir)
            self.watcher = _PolicyWatcher(service, self.replica, app_name).start()

    @staticmethod
    def _sync_store(service: Any, data_dir: str) -> None:
        """As the single process does at start: serve the store's deployed version (and
        publish the shipped policy as the first one on a first start)."""
        try:
            service.sync_at_start()
        except (OSError, ValueError, SpecialistError) as exc:
            log.warning("tab: could not sync the policy store under %s: %s", data_dir, exc)

    async def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple:
        if self.error is not None:
            return ("error", "specialists.base", "UnavailableError",
                    f"specialist {self.name!r} failed to load: {self.error}", None)
        if method.startswith("_") or method in _LOCAL_ONLY:
            raise AttributeError(f"{method!r} is not a request method of {self.name!r}")
        try:
            if method == "answer" and Batched in capabilities(self.spec):
                value = await self._submit(args[0])
            elif method in self.methods:
                value = await asyncio.to_thread(self.methods[method], *args, **kwargs)
            else:
                raise AttributeError(f"{method!r} is not a method of {self.name!r}")
        except SpecialistError as exc:
            return ("error", type(exc).__module__, type(exc).__qualname__, exc.message,
                    exc.param)
        return ("ok", value)

    async def _submit(self, request: Mapping[str, Any]) -> Any:
        """Through the specialist's model worker, which batches what arrives together."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def settle(result: Any) -> None:
            if future.done():
                return
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)

        self.spec.submit(request, lambda result: loop.call_soon_threadsafe(settle, result))
        return await future

    def health(self) -> dict[str, Any]:
        if self.error is not None:
            return {"ok": False, "error": self.error, "load_error": self.error,
                    "replica": self.replica}
        return {**self.spec.health(), "replica": self.replica}

    def __del__(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
        spec = self.__dict__.get("spec")  # None when building it failed
        if spec is not None and Closable in capabilities(spec):
            spec.close()


# -- the ingress's stand-ins for the specialists -----------------------------------------
_RETRYABLE: tuple[type[BaseException], ...] = (ray.exceptions.RayActorError,)


def _raise_remote(module: str, qualname: str, message: str, param: str | None) -> None:
    klass: Any = SpecialistError
    try:
        found = getattr(importlib.import_module(module), qualname)
        if isinstance(found, type) and issubclass(found, SpecialistError):
            klass = found
    except (ImportError, AttributeError):
        pass
    raise klass(message, param=param)


class RemoteSpecialist(Specialist):
    """A specialist that lives in its own deployment: the same interface, forwarded.

    The registry and the endpoints cannot tell it from the real one: ``answer`` (and any
    other public method of the class, e.g. a retriever's ``retrieve``) goes to a replica and
    comes back, or raises the specialist's own error type; a call that meets a dead replica
    is sent again (Serve routes it to a live one, or waits for the replacement).
    ``health`` is the last one a replica reported (polled each second, so ``/readyz`` never
    waits on the cluster).
    """

    def __init__(self, name: str, klass: type[Specialist], handle: Any) -> None:
        super().__init__()
        self.name, self.klass, self.handle = name, klass, handle
        self._methods = set(_public_methods(klass)) - _LOCAL_ONLY
        self._health: dict[str, Any] = {"ok": False, "loading": True,
                                        "detail": "waiting for its deployment's first report"}
        self._version = "0"
        self.retried = 0
        """Calls sent again because the replica they went to died under them."""
        self._helper: Any = None
        self._errors: dict[str, str] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # lifecycle -----------------------------------------------------------------------
    def report_to(self, errors: dict[str, str]) -> None:
        """Keep ``errors`` (the registry's) saying whether the replicas failed to load, as
        the single process's registry says of its own: routes count the specialist as down
        and calls answer 503 naming the failure."""
        self._errors = errors

    def setup(self) -> None:
        self._poll_health()
        self._thread = threading.Thread(target=self._health_loop, daemon=True,
                                        name=f"health-{self.name}")
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._helper is not None:
            self._helper.shutdown(wait=False)

    def _health_loop(self) -> None:
        while not self._stop.wait(1.0):
            self._poll_health()

    def _poll_health(self) -> None:
        try:
            health = self.handle.health.remote().result(timeout_s=10)
        except Exception as exc:  # the deployment is between replicas: say so
            self._health = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            return
        self._health = health
        self._version = str(health.get("version", self._version))
        if self._errors is not None:
            if health.get("load_error"):
                self._errors[self.name] = str(health["load_error"])
            else:
                self._errors.pop(self.name, None)

    def health(self) -> dict[str, Any]:
        return {**self._health, "calls_retried": self.retried}

    @property
    def version(self) -> str:  # type: ignore[override]
        return self._version

    # requests ------------------------------------------------------------------------
    def answer(self, request: Mapping[str, Any]) -> Result:
        return self._call("answer", request)  # type: ignore[no-any-return]

    async def answer_async(self, request: Mapping[str, Any]) -> Result:
        """``answer`` without a thread: awaited on the event loop (``/v1/tab``)."""
        for attempt in range(TRIES):
            try:
                reply = await self.handle.call.remote("answer", (dict(request),), {})
                break
            except _RETRYABLE:
                if attempt == TRIES - 1:
                    raise
                self.retried += 1
                await asyncio.sleep(0.05 * 2 ** attempt)
        return self._unwrap(reply)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_") or name not in self.__dict__.get("_methods", ()):
            raise AttributeError(name)
        return partial(self._call, name)

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """A blocking call, as a local specialist's is: from a worker thread (the endpoints'
        and the router's thread pool), or from a coroutine that calls the specialist
        directly (the edit pipeline's applier). Serve refuses blocking waits on an event
        loop, so that case waits on a helper thread instead — blocking the loop as long as
        the local call would."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._call_blocking(method, *args, **kwargs)
        if self._helper is None:
            from concurrent.futures import ThreadPoolExecutor

            self._helper = ThreadPoolExecutor(4, thread_name_prefix=f"call-{self.name}")
        return self._helper.submit(self._call_blocking, method, *args, **kwargs).result()

    def _call_blocking(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if method == "answer":
            args = (dict(args[0]),)
        for attempt in range(TRIES):
            try:
                reply = self.handle.call.remote(method, args, kwargs).result()
                break
            except _RETRYABLE:
                if attempt == TRIES - 1:
                    raise
                self.retried += 1
                time.sleep(0.05 * 2 ** attempt)
        return self._unwrap(reply)

    def _unwrap(self, reply: tuple) -> Any:
        if reply[0] == "error":
            _raise_remote(*reply[1:])
        value = reply[1]
        if isinstance(value, Result) and value.meta.get("policy_version") is not None:
            self._version = str(value.meta["policy_version"])
        return value


class RemoteTab(RemoteSpecialist):
    """A remote Tab specialist: ``swap`` publishes the policy to every replica and waits
    until each live one has switched; ``swap_report`` says when each did."""

    def __init__(self, name: str, klass: type[Specialist], handle: Any, app_name: str,
                 swap_timeout_s: float = 60.0) -> None:
        super().__init__(name, klass, handle)
        self.app_name = app_name
        self.swap_timeout_s = swap_timeout_s
        self._report: list[dict[str, Any]] = []

    def swap(self, policy: Any) -> int:
        board = _board(self.app_name)
        # what serves now, read before the publish: the health poll may see the new version
        # while the replicas switch (the board's own first publish has no previous one)
        serving = self._version
        seq, previous, previous_state = ray.get(
            board.publish.remote(int(policy.version), policy.state()))
        status = self._wait_switched(board, seq)
        errors = [r for r in status["switched"].values() if r["error"]]
        if errors:
            if previous_state is not None:  # put back what served before, everywhere
                ray.get(board.publish.remote(previous, previous_state))
            raise SpecialistError(f"tab replica {errors[0]['replica']} refused the policy: "
                                  f"{errors[0]['error']}")
        self._report = sorted(status["switched"].values(), key=lambda r: r["switched_at"])
        for row in self._report:
            log.warning("tab replica %s switched to policy version %s at %.3f",
                        row["replica"], row["version"], row["switched_at"])
        self._version = str(policy.version)
        return int(previous) if previous is not None else int(serving)

    def _wait_switched(self, board: Any, seq: int) -> dict[str, Any]:
        deadline = time.monotonic() + self.swap_timeout_s
        while True:
            status = ray.get(board.status.remote(seq))
            alive, switched = set(status["alive"]), set(status["switched"])
            if switched and alive <= switched:
                return status  # type: ignore[no-any-return]
            if time.monotonic() > deadline:
                raise Unavailable(f"tab replicas {sorted(alive - switched)} did not switch "
                                  f"within {self.swap_timeout_s:g}s")
            time.sleep(0.05)

    def swap_report(self) -> dict[str, Any]:
        """For the deploy log: each replica and when it switched (epoch seconds)."""
        return {"replicas": [{k: r[k] for k in ("replica", "switched_at")}
                             for r in self._report]}


def remote_specialist(name: str, klass: type[Specialist], handle: Any,
                      app_name: str) -> RemoteSpecialist:
    """A stand-in named like the real class (the ``x-complement-model`` header says
    ``TabSpecialist@3`` on either engine)."""
    base: type[RemoteSpecialist] = RemoteTab if issubclass(klass, Swappable) \
        else RemoteSpecialist
    proxy_class = type(klass.__name__, (base,), {"kind": klass.kind, "__module__": __name__})
    if base is RemoteTab:
        return proxy_class(name, klass, handle, app_name)  # type: ignore[call-arg]
    return proxy_class(name, klass, handle)


# -- the ingress -------------------------------------------------------------------------
class Ingress:
    """The router as Serve's HTTP ingress: the single-process app, remote specialists."""

    def __init__(self, config: dict[str, Any], env_refs: dict[str, list[str]],
                 handles: dict[str, Any]) -> None:
        self.config = Config.model_validate(config)
        self.config.env_refs = env_refs
        self.handles = handles

    def __serve_build_asgi_app__(self) -> Any:
        app_name = self.config.engine.ray.app_name
        specialists: dict[str, Specialist] = {}
        for name, handle in self.handles.items():
            klass, _ = check_block(name, self.config.specialists[name])
            specialists[name] = remote_specialist(name, klass, handle, app_name)
        registry = Registry(specialists)
        for spec in specialists.values():
            spec.report_to(registry.errors)  # type: ignore[attr-defined]
        return create_app(self.config, registry=registry)


# -- building and running the application -------------------------------------------------
def _deployment_options(name: str, cfg: RayDeploymentConfig, *, default_cpus: float,
                        default_ongoing: int, log_level: str) -> dict[str, Any]:
    from ray.serve.schema import LoggingConfig

    actor = {"num_cpus": default_cpus, **cfg.ray_actor_options.options()}
    options: dict[str, Any] = {
        "name": name, "ray_actor_options": actor,
        "max_ongoing_requests": cfg.max_ongoing_requests or default_ongoing,
        "logging_config": LoggingConfig(log_level=log_level.upper(),
                                        enable_access_log=log_level == "debug"),
        # Tab replicas load a model: give them time before health checks count
        "health_check_period_s": 2, "health_check_timeout_s": 30,
        "graceful_shutdown_timeout_s": 5}
    if cfg.autoscaling_config is not None:
        options["autoscaling_config"] = cfg.autoscaling_config.model_dump()
    else:
        options["num_replicas"] = cfg.num_replicas or 1
    return options


def _deployment(cls: type) -> Any:
    return serve.deployment(cls)  # typed as a decorator factory; with a class it is one


def build_app(config: Config, log_level: str = "warning") -> Any:
    """The Serve application for ``config``: one deployment per enabled specialist, bound
    into the ingress."""
    ray_cfg = config.engine.ray
    handles = {}
    for name, block in config.specialists.items():
        if not block.enabled:
            continue
        klass, _ = check_block(name, block)  # a bad block fails here, before any deploy
        cfg = ray_cfg.deployments.get(name, RayDeploymentConfig())
        is_tab = klass.kind == "tab"
        options = _deployment_options(f"specialist-{name}", cfg,
                                      default_cpus=1.0 if is_tab else 0.0,
                                      default_ongoing=64 if is_tab else 16,
                                      log_level=log_level)
        deployment = _deployment(SpecialistReplica).options(**options)
        handles[name] = deployment.bind(name, block.model_dump(by_alias=True),
                                        str(config.data_path()), ray_cfg.app_name)
    ingress_class = serve.ingress()(Ingress)
    ingress = _deployment(ingress_class).options(**_deployment_options(
        "ingress", ray_cfg.ingress, default_cpus=0.0, default_ongoing=256, log_level=log_level))
    return ingress.bind(config.model_dump(by_alias=True), config.env_refs, handles)


def _logical_cpus(config: Config) -> int:
    """CPUs the local cluster offers: the machine's, or what the replicas reserve if more
    (a reservation is Ray's bookkeeping; the processes share the real cores)."""
    need = 0.0
    for name, block in config.specialists.items():
        if block.enabled:
            cfg = config.engine.ray.deployments.get(name, RayDeploymentConfig())
            count = (cfg.autoscaling_config.max_replicas if cfg.autoscaling_config
                     else cfg.num_replicas or 1)
            need += count * (cfg.ray_actor_options.num_cpus
                             if cfg.ray_actor_options.num_cpus is not None else 1.0)
    return max(os.cpu_count() or 1, int(need + 0.999))


def _start_ray(config: Config, address: str | None) -> bool:
    """Attach to ``address`` (flag, config, ``RAY_ADDRESS``) or start a local cluster;
    True when the cluster is ours to stop."""
    cfg = config.engine.ray
    address = address or cfg.address or os.environ.get("RAY_ADDRESS") or None
    # nothing leaves the machine at run time: Ray's usage statistics are reported to its
    # makers unless turned off (a user may still turn them on with the variable set to 1)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    common = dict(namespace=NAMESPACE, log_to_driver=False, logging_level=logging.WARNING)
    if address:
        try:
            ray.init(address=address, **common,  # type: ignore[arg-type]
                     **cfg.init_options(local=False))
        except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(
                f"cannot attach to the Ray cluster at {address!r}: {first}. A cluster with "
                "token authentication (Ray's local clusters have it) needs RAY_AUTH_MODE=token "
                "and its token in ~/.ray/auth_token or RAY_AUTH_TOKEN") from None
        return False
    os.environ.pop("RAY_ADDRESS", None)
    _single_machine(cfg)
    # a local cluster is this machine's alone: no dashboard, its ports on 127.0.0.1
    ray.init(address="local", num_cpus=cfg.num_cpus or _logical_cpus(config),
             object_store_memory=cfg.object_store_mb * 1024 * 1024,
             **common, **cfg.init_options(local=True))  # type: ignore[arg-type]
    return True


def _single_machine(cfg: Any) -> None:
    """Ray's single-machine mode for a local cluster (``RayConfig.local_environment``):
    ``complement serve`` sets it before Ray is imported; a caller that imported Ray first
    gets it here, for this process and the cluster's (they inherit the environment)."""
    os.environ.update(cfg.local_environment())
    try:
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False  # what the variable sets, read at import
    except (ImportError, AttributeError):  # another Ray: the variable alone
        log.warning("ray: could not keep the local cluster on 127.0.0.1 in this process")


def serve_ray(config: Config, *, address: str | None = None, log_level: str = "info") -> int:
    """Deploy ``config`` on Ray Serve and serve until SIGINT or SIGTERM; then take the
    application down (and the cluster, when this command started it)."""
    app = build_app(config, log_level)  # config errors before any process starts
    _wait_for_port(config.server.host, config.server.port)
    ours = _start_ray(config, address)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):  # after ray.init, which sets its own
        signal.signal(sig, lambda *_: stop.set())
    app_name = config.engine.ray.app_name
    board = None
    try:
        try:
            board = PolicyBoard.options(name=_board_name(app_name),  # type: ignore[attr-defined]
                                        namespace=NAMESPACE, get_if_exists=True).remote()
            serve.start(http_options={"host": config.server.host, "port": config.server.port})
            serve.run(app, name=app_name, route_prefix="/")
        except RuntimeError as exc:
            raise ConfigError(f"the Ray Serve application did not start: {exc}") from exc
        where = ray.get_runtime_context().gcs_address
        print(f"complement: ray engine ready on http://{config.server.host}:"
              f"{config.server.port} (cluster {where}, {'local' if ours else 'existing'}; "
              f"replica logs under the session's logs/serve)", flush=True)
        workers = ray_workers() if ours else {}
        while not stop.wait(0.5):
            if ours and int(time.monotonic()) % 5 == 0:
                workers.update(ray_workers())
    finally:
        _take_down(app_name, board, ours)
    if ours:
        _reap(workers)
    return 0


def _wait_for_port(host: str, port: int, timeout_s: float = 15.0) -> None:
    """Serve's proxy binds the port later, in an actor, and retries forever if it cannot:
    say so now. A few seconds' grace: after a crash the old cluster's workers take that
    long to notice and let go of it."""
    import socket

    deadline = time.monotonic() + timeout_s
    while True:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
                return
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise ConfigError(f"cannot serve on {host}:{port}: {exc.strerror}; "
                                      "is another server running there?") from None
        time.sleep(0.5)


def ray_workers(root: int | None = None) -> dict[int, str]:
    """The Ray worker processes (named ``ray::``) among ``root``'s descendants (default:
    this command's, i.e. its local cluster's), with their command lines."""
    from pathlib import Path

    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                names[int(entry.name)] = (entry / "cmdline").read_text(errors="replace")
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    top = os.getpid() if root is None else root

    def under(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == top:
                return True
        return False

    return {pid: cmd for pid, cmd in names.items() if cmd.startswith("ray::") and under(pid)}


def replica_pids(root: int, deployment: str, app: str = "complement") -> list[int]:
    """The processes of a Serve deployment's replicas in the local cluster that
    ``complement serve --engine ray`` (process ``root``) started: for tests and benchmarks
    that kill one."""
    wanted = f"ServeReplica:{app}:{deployment}"
    return sorted(pid for pid, cmd in ray_workers(root).items() if wanted in cmd)


def _reap(workers: dict[int, str]) -> None:
    """Workers of the local cluster that outlived it (a signal to the whole process group
    stops the raylet first, and its workers lose their parent): stopped, so none keeps the
    port. Each is checked to be the same process first (its command line)."""
    from pathlib import Path

    for pid, cmd in workers.items():
        try:
            if (Path(f"/proc/{pid}/cmdline").read_text(errors="replace") == cmd):
                os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue


def _take_down(app_name: str, board: Any, ours: bool, timeout_s: float = 15.0) -> None:
    """Delete the application (stop Serve and the cluster when they are ours). Bounded: a
    signal sent to the whole process group (Ctrl-C, ``kill -- -PID``) has stopped the
    local cluster's own processes already, and Serve's shutdown would wait for them."""

    def down() -> None:
        if ours:
            serve.shutdown()
        else:
            serve.delete(app_name)
            if board is not None:
                ray.kill(board)

    worker = threading.Thread(target=down, daemon=True, name="serve-shutdown")
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        log.warning("Ray Serve did not shut down within %gs; leaving it", timeout_s)
    ray.shutdown()
