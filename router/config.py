"""Config: YAML, ``${VAR}`` / ``${VAR:-default}`` interpolation, validated by pydantic.

A section is a registry key and its keys are constructor arguments. A typo fails at load
with the key path and the offending value, never later at request time.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from router.errors import ConfigError
from router.keys import AREAS

__all__ = [
    "BudgetConfig",
    "CircuitConfig",
    "Config",
    "EndpointConfig",
    "EventsConfig",
    "EngineConfig",
    "EventsPoolConfig",
    "FrontierConfig",
    "ModelConfig",
    "RayConfig",
    "RayDeploymentConfig",
    "RetryConfig",
    "RouteConfig",
    "ServerConfig",
    "SpecialistConfig",
    "VerifierConfig",
    "VerifyConfig",
    "WorkspaceConfig",
    "default_config_path",
    "interpolate",
    "load_config",
    "read_yaml",
]

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ServerConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    api_keys: list[str] = Field(default_factory=list)
    """Inference keys: accepted bearer tokens for every endpoint but the admin ones. With
    no keys at all (these and ``admin_keys``) there is no auth, on loopback only."""
    admin_keys: list[str] = Field(default_factory=list)
    """Admin keys (``COMPLEMENT_ADMIN_KEY``): the only keys for deploy, rollback, canary and
    key management (``/key/*``), and the ones that issue virtual keys (issue 37)."""
    key_cache_s: float = Field(1.0, ge=0)
    """How long a server process trusts its cached copy of a virtual key (its limits,
    spend, revocation) made by another process; its own changes apply at once."""
    max_body_bytes: int = Field(4 * 1024 * 1024, gt=0)
    body_timeout_s: float = Field(30.0, gt=0)
    """How long a request body may stall (no bytes at all) before the answer is 408: a
    client that stops sending mid-body would otherwise hold its connection forever."""
    body_deadline_s: float = Field(60.0, gt=0)
    """How long the whole request body may take, counted from its headers, however it
    trickles in (a byte every second never stalls): past it the answer is 408."""
    header_timeout_s: float = Field(10.0, gt=0)
    """How long a connection may take to send a request's headers (from its start, or from
    its last response); past it the connection is closed (``router.serving``)."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """Host names, besides loopback ones and ``host``, that a server without API keys
    answers to (the ``Host`` header), e.g. a name in /etc/hosts for 127.0.0.1. With API
    keys the key is the check and any host name is answered."""
    max_files_per_request: int = Field(200, ge=1)
    """Files one ``POST /v1/apply`` (``files``) or ``POST /v1/edit`` (``texts``, ``files``)
    may carry; more is a 413 naming this key."""
    max_text_bytes_per_request: int = Field(2 * 1024 * 1024, ge=1)
    """UTF-8 bytes of file text (originals and sketches, inline ``texts``) one
    ``POST /v1/apply`` or ``POST /v1/edit`` may carry; more is a 413 naming this key."""

    @model_validator(mode="after")
    def _keys_off_loopback(self) -> "ServerConfig":
        keys = [k for k in self.api_keys if k]
        self.api_keys = keys
        self.admin_keys = [k for k in self.admin_keys if k]
        if set(self.admin_keys) & set(keys):
            raise ValueError(
                "server.admin_keys and server.api_keys share a key: the admin key deploys and "
                "manages keys, so it must differ from every inference key; make a new one "
                "(python -c 'import secrets; print(secrets.token_urlsafe(32))')")
        if not self.host.strip():
            raise ValueError(
                "server.host is empty, which binds every interface (issue 41, F2): name the "
                "interface: 127.0.0.1 for this machine only, or 0.0.0.0 for every interface "
                "with API keys (COMPLEMENT_API_KEY or server.api_keys)")
        if not keys and not self.admin_keys and not is_loopback(self.host):
            raise ValueError(
                f"server.api_keys is empty (so is server.admin_keys) but server.host is "
                f"{self.host!r}: off loopback every endpoint but /healthz and /readyz needs "
                "an API key, and the admin endpoints (deploy, canary, /key/*) the admin key. Set "
                "COMPLEMENT_API_KEY and COMPLEMENT_ADMIN_KEY (the default config reads them) "
                "or list keys under server.api_keys / server.admin_keys, or bind 127.0.0.1"
            )
        return self


class RetryConfig(_Strict):
    attempts: int = Field(3, ge=1, le=20)
    """Tries per model, the first included."""
    backoff_initial_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(8.0, ge=0)
    retry_after_max_s: float = Field(30.0, ge=0)
    """A provider's Retry-After above this is not waited for: the next fallback is tried."""


class CircuitConfig(_Strict):
    failure_threshold: int = Field(5, ge=1)
    """Consecutive failed calls that open a model's circuit."""
    reset_after_s: float = Field(30.0, ge=0)
    """How long an open circuit refuses calls before one probe is let through."""


class FrontierConfig(_Strict):
    retry: RetryConfig = Field(default_factory=RetryConfig)
    circuit: CircuitConfig = Field(default_factory=CircuitConfig)
    allowed_params: list[str] = Field(default_factory=list)
    """Request fields passed on to providers besides the standard model parameters
    (``router.provider_params.MODEL_PARAMS``). Fields that name a connection, credentials,
    headers, callbacks or prices can never be listed."""

    @field_validator("allowed_params")
    @classmethod
    def _no_connection_params(cls, names: list[str]) -> list[str]:
        from router.provider_params import CONNECTION_PARAMS

        bad = sorted(set(names) & CONNECTION_PARAMS)
        if bad:
            raise ValueError(f"{', '.join(bad)} may never come from a request: they say where "
                             "or with which credentials a provider is called; set them under "
                             "models.<name> instead")
        return names


class ModelConfig(_Strict):
    """One frontier deployment: through litellm, or straight over HTTP when it speaks
    OpenAI's API (``transport``)."""

    model: str
    """litellm model string, e.g. ``openai/gpt-4o-mini`` or ``anthropic/claude-sonnet-4-5``."""
    api_key: str | None = None
    api_base: str | None = None
    requires_key: bool = True
    """False for local servers (Ollama, vLLM) that take no key."""
    timeout_s: float = Field(60.0, gt=0)
    input_cost_per_token: float | None = Field(None, ge=0)
    output_cost_per_token: float | None = Field(None, ge=0)
    params: dict[str, Any] = Field(default_factory=dict)
    """Extra request parameters (temperature, ...); ``extra_headers`` become HTTP headers."""
    transport: Literal["auto", "litellm", "http"] = "auto"
    """How calls go out: ``litellm`` (any provider), ``http`` (straight to an
    OpenAI-compatible server, see ``router.transport``), or ``auto``: ``http`` for an
    ``openai/...`` model with its own ``api_base``, litellm for the rest."""

    def speaks_http(self) -> bool:
        """Whether calls go straight over HTTP rather than through litellm."""
        if self.transport != "auto":
            return self.transport == "http"
        return self.model.startswith("openai/") and bool(self.api_base)


class VerifierConfig(_Strict):
    kind: Literal["nonempty", "json", "regex", "python"]
    pattern: str | None = None

    @model_validator(mode="after")
    def _pattern(self) -> "VerifierConfig":
        if self.kind == "regex":
            if not self.pattern:
                raise ValueError("a regex verifier needs 'pattern'")
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"pattern {self.pattern!r} is not a valid regex: {exc}") from exc
        return self


class BudgetConfig(_Strict):
    max_cost_usd: float | None = Field(None, gt=0)
    """Upper bound on one request's spend, counted across retries and fallbacks."""
    latency_s: float | None = Field(None, gt=0)
    """Wall-clock budget for one request; the remaining part caps each call's timeout."""


class RouteConfig(_Strict):
    policy: Literal["fixed", "cascade", "learned"] = "fixed"
    targets: list[str] = Field(min_length=1)
    """fixed: first target, the rest are fallbacks. cascade: cheapest first, escalate.
    learned: a classifier decides between the cascade and the last target alone."""
    classifier: str | None = None
    """learned: the classifier file written by ``complement router train``."""
    threshold: float | None = Field(None, ge=0, le=1)
    """learned: P(cheap succeeds) at or above which the cascade runs; default: calibrated."""
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    verify: list[VerifierConfig] = Field(default_factory=list)
    description: str = ""


class SpecialistConfig(_Strict):
    class_: str = Field(alias="class")
    """``package.module:Class`` or an entry point name in ``complement.specialists``."""
    options: dict[str, Any] = Field(default_factory=dict)
    enabled: bool = True


class EndpointConfig(_Strict):
    """An endpoint group served beside the built-in ones (``docs/adding-a-specialist.md``)."""

    router: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    """``package.module:name`` of a FastAPI ``APIRouter``; its paths (each under ``/v1/``)
    belong to the area this block is named by: the ``x-complement-route`` header, the
    metrics' route label, what a virtual key's ``allowed_routes`` names."""


Argv = list[str]
VERIFY_HIDE = ("~/.ssh", "~/.aws", "~/.azure", "~/.gnupg", "~/.config", "~/.docker",
               "~/.kube", "~/.netrc", "~/.pypirc", "~/.git-credentials")
"""Hidden from verification commands by default (the usual places credentials live)."""


class VerifyConfig(_Strict):
    """Commands that check an edit, run in a scratch copy of the repository (never the
    user's tree), as argv lists without a shell, in a sandbox (``router.edit.sandbox``).
    Requests cannot name commands."""

    timeout_s: float = Field(300.0, gt=0, le=24 * 3600)
    """Wall-clock limit for each command; the whole process group is killed past it (and
    the CPU time is limited to as many seconds)."""
    sandbox: Literal["bwrap", "none"] = "bwrap"
    """``bwrap``: each command runs under bubblewrap (read-only file system but the scratch
    copy, no network, a clean environment); if bwrap is missing, verification fails and
    nothing runs. ``none``: commands run unconfined with the server's rights (dangerous:
    they run model-written code)."""
    memory_mb: int = Field(4096, ge=0)
    """Address-space limit (RLIMIT_AS) of each command, in MiB; 0: none."""
    pass_env: list[str] = Field(default_factory=list)
    """Names of server environment variables a command may see (it sees PATH, LANG and
    LC_ALL, with HOME and TMPDIR at /tmp, and nothing else: no provider keys)."""
    hide: list[str] = Field(default_factory=lambda: list(VERIFY_HIDE))
    """Paths replaced by empty ones inside the sandbox (the usual credential folders)."""
    routes: dict[str, list[Argv]] = Field(default_factory=dict)
    """Per route: the commands that verify its edits, in order."""
    repos: dict[str, list[Argv]] = Field(default_factory=dict)
    """Per repository directory (under ``allowed_roots``): overrides the route's commands."""

    @field_validator("routes", "repos")
    @classmethod
    def _argv(cls, table: dict[str, list[Argv]]) -> dict[str, list[Argv]]:
        for key, commands in table.items():
            for i, argv in enumerate(commands):
                if not argv or not all(isinstance(a, str) and a for a in argv):
                    raise ValueError(f"{key}.{i}: a command is a non-empty list of non-empty "
                                     "strings (argv, no shell), e.g. [python, -m, pytest, -q]")
        return table


class WorkspaceConfig(_Strict):
    """Which repositories requests may touch, and how edits to them are verified."""

    allowed_roots: list[str] = Field(default_factory=list)
    """Directories a request's ``repo`` must lie under (``/v1/edit``); empty: no repository
    may be named (inline ``texts`` still work). ``/``, the home directory and any folder
    holding it are refused: their dot-folders hold keys and credentials."""
    verify: VerifyConfig = Field(default_factory=VerifyConfig)

    @field_validator("allowed_roots")
    @classmethod
    def _safe_roots(cls, roots: list[str]) -> list[str]:
        from specialists.paths import unsafe_root

        for i, root in enumerate(roots):
            reason = unsafe_root(root) if root else None
            if reason:
                raise ValueError(f"{i}: {reason}. Set it (COMPLEMENT_REPOS in the default "
                                 "config) to the folder your repositories live under, e.g. "
                                 "~/code")
        return roots

    def roots(self) -> list[Path]:
        return [Path(os.path.expanduser(r)) for r in self.allowed_roots if r]


class EventsPoolConfig(_Strict):
    """Connection pool of each server process to a PostgreSQL event store (SQLite: unused).
    The database sees up to workers x (size + max_overflow) connections."""

    size: int = Field(10, ge=1)
    max_overflow: int = Field(20, ge=0)
    timeout_s: float = Field(30.0, gt=0)
    """How long a request waits for a free connection."""
    recycle_s: float = Field(1800.0, gt=0)
    """Replace connections older than this (servers and proxies close idle ones)."""
    pre_ping: bool = True
    """Check each connection as it leaves the pool (a restarted database costs no error)."""


class EventsConfig(_Strict):
    url: str = ""
    """SQLAlchemy URL (``postgresql+psycopg://...``); empty: SQLite under ``data_dir``.
    Either is migrated to the newest schema when it is opened."""
    feedback_timeout_s: float = Field(30.0, gt=0)
    """A shown suggestion with no feedback after this long counts as rejected."""
    pool: EventsPoolConfig = Field(default_factory=EventsPoolConfig)

    def store_options(self) -> dict[str, Any]:
        """``EventStore``'s keyword arguments for this block."""
        from specialists.tab.events import PoolOptions

        return {"feedback_timeout_s": self.feedback_timeout_s,
                "pool": PoolOptions(**self.pool.model_dump())}


class LoopConfig(_Strict):
    """What the online loop learns from and gates with (issue 35)."""

    reward: Literal["kept", "accept"] = "kept"
    """``kept``: the reward of what was kept (``rewards.KeptReward``: characters still present
    by the editor's final report, the cost of a dismissal, of an undone accept and of Tab
    switched off); ``accept``: the accept key's old +0.75 / -0.25. The trainer, the gate
    and the canary all score events by it."""
    population: str | None = None
    """A population file (``configs/users/*.yaml``): the people the deployment serves. The
    simulated loop's users are its people and its gate replays held-out edits with them
    (``complement loop --simulate``; ``--population`` wins); None: oracles."""


class RayActorOptions(_Strict):
    """What one replica asks of the cluster (Ray's ``ray_actor_options``)."""

    num_cpus: float | None = Field(None, ge=0)
    num_gpus: float | None = Field(None, ge=0)
    memory: int | None = Field(None, ge=0)
    """Bytes of memory the scheduler reserves for the replica."""
    resources: dict[str, float] = Field(default_factory=dict)
    """Custom resources (``{"tab_node": 1}``) that pin replicas to nodes offering them."""

    def options(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True, exclude_defaults=True)


class RayAutoscalingConfig(_Strict):
    """Bounds for Ray Serve's autoscaler; replaces a fixed ``num_replicas``."""

    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(1, ge=1)
    target_ongoing_requests: float = Field(2.0, gt=0)
    """Requests in flight per replica the autoscaler aims at."""

    @model_validator(mode="after")
    def _bounds(self) -> "RayAutoscalingConfig":
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) is above max_replicas "
                             f"({self.max_replicas})")
        return self


class RayDeploymentConfig(_Strict):
    """One Ray Serve deployment: a specialist's replicas, or the HTTP ingress's."""

    num_replicas: int | None = Field(None, ge=1)
    """Fixed replica count (default 1); leave unset when ``autoscaling_config`` is given."""
    max_ongoing_requests: int | None = Field(None, ge=1)
    """Requests one replica takes at once (default: 64 for tab and the ingress, 16 else)."""
    ray_actor_options: RayActorOptions = Field(default_factory=RayActorOptions)
    autoscaling_config: RayAutoscalingConfig | None = None

    @model_validator(mode="after")
    def _replicas_or_autoscaling(self) -> "RayDeploymentConfig":
        if self.num_replicas is not None and self.autoscaling_config is not None:
            raise ValueError("give num_replicas or autoscaling_config, not both")
        return self


class RayConfig(_Strict):
    """``complement serve --engine ray``: each specialist a Ray Serve deployment, the router
    the HTTP ingress. Without ``address`` a local cluster is started and stopped with it."""

    address: str | None = None
    """An existing cluster's head (``host:6379``); else ``RAY_ADDRESS``, else a local
    cluster."""
    num_cpus: int | None = Field(None, ge=1)
    """CPUs the local cluster offers (default: the machine's); unused with ``address``."""
    object_store_mb: int = Field(200, ge=80)
    """The local cluster's object store (requests and answers are small)."""
    ingress: RayDeploymentConfig = Field(default_factory=RayDeploymentConfig)
    deployments: dict[str, RayDeploymentConfig] = Field(default_factory=dict)
    """Per specialist (by its name under ``specialists:``); unnamed ones get one replica."""
    app_name: str = Field("complement", pattern=r"^[A-Za-z0-9_-]+$")

    def init_options(self, *, local: bool) -> dict[str, Any]:
        """``ray.init``'s keyword arguments for what listens where: never a dashboard (it
        takes job submissions and shows every actor's logs, with no authentication), and a
        ``local`` cluster (started by ``complement serve --engine ray``, this machine's
        alone) with its node address, and so its processes' ports, on 127.0.0.1. A cluster
        that is attached to keeps its own addresses."""
        options: dict[str, Any] = {"include_dashboard": False}
        if local:
            options.update(dashboard_host="127.0.0.1", _node_ip_address="127.0.0.1")
        return options

    @staticmethod
    def local_environment() -> dict[str, str]:
        """Environment for a local cluster, set before ``ray`` is imported (Ray reads it
        then, and its processes inherit it). Ray takes a node address of 127.0.0.1 for the
        machine's reachable one, and its GCS, raylet, agents and workers listen on all
        interfaces, unless clusters are off: Ray's single-machine mode (the default on
        macOS and Windows), where every one of them listens on 127.0.0.1."""
        return {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


class EngineConfig(_Strict):
    kind: Literal["single", "ray"] = "single"
    """What ``complement serve`` runs unless ``--engine`` says otherwise."""
    ray: RayConfig = Field(default_factory=RayConfig)


class Config(_Strict):
    server: ServerConfig = Field(default_factory=ServerConfig)
    data_dir: str = "~/.complement"
    events: EventsConfig = Field(default_factory=EventsConfig)
    loop: LoopConfig = Field(default_factory=LoopConfig)
    frontier: FrontierConfig = Field(default_factory=FrontierConfig)
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    routes: dict[str, RouteConfig] = Field(default_factory=dict)
    specialists: dict[str, SpecialistConfig] = Field(default_factory=dict)
    endpoints: dict[str, EndpointConfig] = Field(default_factory=dict)
    """More endpoint groups, by area name: a specialist kind's own endpoint."""
    workspace: WorkspaceConfig = Field(default_factory=WorkspaceConfig)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    env_refs: dict[str, list[str]] = Field(default_factory=dict, exclude=True)
    """Which environment variables each key path was read from (for messages)."""

    @field_validator("routes")
    @classmethod
    def _route_names(cls, routes: dict[str, RouteConfig]) -> dict[str, RouteConfig]:
        for name in routes:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:/-]*", name):
                raise ValueError(f"route name {name!r} may hold only letters, digits and ._:/-")
        return routes

    @field_validator("endpoints")
    @classmethod
    def _area_names(cls, endpoints: dict[str, EndpointConfig]) -> dict[str, EndpointConfig]:
        for area in endpoints:
            if area in AREAS:
                raise ValueError(f"{area!r} is a built-in area; name the endpoint group "
                                 "after its specialist kind")
            if not re.fullmatch(r"[a-z][a-z0-9_-]*", area):
                raise ValueError(f"{area!r}: an area name is lower-case letters, digits, "
                                 "'_' and '-', starting with a letter")
        return endpoints

    @model_validator(mode="after")
    def _targets_exist(self) -> "Config":
        for name, route in self.routes.items():
            for i, target in enumerate(route.targets):
                if target not in self.models and target not in self.specialists:
                    known = sorted(self.models) + sorted(self.specialists)
                    raise ValueError(
                        f"routes.{name}.targets.{i}: {target!r} is neither a model under "
                        f"'models:' nor a specialist under 'specialists:' (known: {known})"
                    )
        for name in self.workspace.verify.routes:
            if name not in self.routes:
                raise ValueError(f"workspace.verify.routes.{name}: no route {name!r} under "
                                 f"'routes:' (known: {sorted(self.routes)})")
        from specialists.paths import unsafe_root

        for name, block in self.specialists.items():  # the retriever's own root, at load
            root = block.options.get("allowed_root")
            reason = unsafe_root(root) if isinstance(root, str) and root else None
            if reason:
                raise ValueError(f"specialists.{name}.options.allowed_root: {reason}. Set it "
                                 "(COMPLEMENT_REPOS in the default config) to the folder "
                                 "your repositories live under, e.g. ~/code")
        enabled = sorted(n for n, block in self.specialists.items() if block.enabled)
        for name in self.engine.ray.deployments:
            if name not in enabled:
                raise ValueError(f"engine.ray.deployments.{name}: no enabled specialist "
                                 f"{name!r} under 'specialists:' (known: {enabled})")
        return self

    def data_path(self) -> Path:
        return Path(os.path.expanduser(self.data_dir))

    def events_url(self) -> str:
        if self.events.url:
            return self.events.url
        from specialists.tab.events import sqlite_url

        return sqlite_url(self.data_path())


def is_loopback(host: str) -> bool:
    """Does binding ``host`` listen on loopback only? An empty host, ``0.0.0.0``, ``::`` or
    any name but ``localhost`` is not: uvicorn binds every interface for an empty host, and
    a name may resolve anywhere (issue 41, F2)."""
    if not isinstance(host, str):
        return False
    if host.strip().lower() == "localhost" and host == host.strip():
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def default_config_path() -> Path:
    """``./configs/default.yaml`` if present, else the one beside this package's checkout."""
    local = Path("configs/default.yaml")
    if local.is_file():
        return local
    return Path(__file__).resolve().parent.parent / "configs" / "default.yaml"


def _interpolate(node: Any, path: str, env: dict[str, str], refs: dict[str, list[str]]) -> Any:
    if isinstance(node, dict):
        return {k: _interpolate(v, f"{path}.{k}" if path else str(k), env, refs)
                for k, v in node.items()}
    if isinstance(node, list):
        return [_interpolate(v, f"{path}.{i}", env, refs) for i, v in enumerate(node)]
    if not isinstance(node, str) or "$" not in node:
        return node

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        var, default = m.group(1), m.group(2)
        refs.setdefault(path, []).append(var)
        if env.get(var):  # as in the shell, ${VAR:-x} is x when VAR is unset *or empty*
            return env[var]
        if var in env and default is None:
            return env[var]
        if default is not None:
            return default
        raise ConfigError(f"{path}: environment variable {var} is not set; set it or "
                          f"write ${{{var}:-default}}")

    return _VAR.sub(sub, node)


def _known_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys the config allows where ``loc``'s last key stands (for an unknown key)."""
    from router.errors import field_names_at

    return field_names_at(Config, loc[:-1])


def _format_validation(exc: ValidationError, source: str) -> str:
    import difflib

    lines = [f"invalid config {source}:"]
    for err in exc.errors():
        msg = err["msg"].removeprefix("Value error, ")
        if err.get("type") == "extra_forbidden" and err["loc"]:
            known = _known_keys(tuple(err["loc"]))
            near = difflib.get_close_matches(str(err["loc"][-1]), known, n=1)
            msg = "unknown key"
            if near:
                msg += f"; did you mean {near[0]!r}?"
            if known:
                msg += " (known here: " + ", ".join(known) + ")"
            lines.append(f"  {'.'.join(str(p) for p in err['loc'])}: {msg}")
            continue
        loc = ".".join(str(p) for p in err["loc"])
        value = err.get("input")
        shown = "" if isinstance(value, (dict, list)) else f" (got {value!r})"
        lines.append(f"  {loc}: {msg}{shown}" if loc else f"  {msg}")
    return "\n".join(lines)


def parse_config(data: Any, *, source: str = "<config>",
                 env: dict[str, str] | None = None) -> Config:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"invalid config {source}: the top level must be a mapping, "
                          f"got {type(data).__name__}")
    refs: dict[str, list[str]] = {}
    resolved = _interpolate(data, "", dict(os.environ) if env is None else env, refs)
    try:
        config = Config.model_validate(resolved)
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc, source)) from None
    config.env_refs = refs
    return config


def read_yaml(p: Path, what: str, hint: str = "") -> Any:
    """A YAML file's data, or a ``ConfigError`` naming ``what`` it is and where."""
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} {str(p)!r} not found{hint}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {what} {str(p)!r}: {exc}") from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {str(p)!r} is not valid YAML: {exc}") from exc


def interpolate(data: Any, env: dict[str, str] | None = None) -> Any:
    """``${VAR}`` / ``${VAR:-default}`` resolved throughout ``data`` (from ``os.environ``)."""
    return _interpolate(data, "", dict(os.environ) if env is None else env, {})


def load_config(path: str | Path | None = None, *, env: dict[str, str] | None = None,
                hint: str = "; pass --config FILE") -> Config:
    """Read, interpolate and validate a YAML config; ``ConfigError`` says what and where
    (``hint``: what to do when the file is not there, for the command that asked)."""
    p = Path(path) if path is not None else default_config_path()
    data = read_yaml(p, "config file", hint)
    return parse_config(data, source=repr(str(p)), env=env)
