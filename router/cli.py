"""The ``complement`` command: serve, check config, diagnose, and each area's commands."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from router.errors import ConfigError
from specialists.base import SpecialistError

if TYPE_CHECKING:
    from router.config import Config

__all__ = ["build_parser", "main"]

#: Areas that add subcommands through ``register(subparsers)``.
AREA_CLIS = ("router.commands.apply", "router.commands.tab", "router.commands.retrieval",
             "router.commands.loop", "router.commands.edit", "router.commands.lsp",
             "router.commands.demo", "router.commands.audit", "router.commands.keys")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _config_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", metavar="FILE",
                        help="YAML config (default: configs/default.yaml)")


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from router.app import create_app
    from router.config import default_config_path, load_config

    config = load_config(args.config)
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    if overrides:
        from pydantic import ValidationError

        from router.config import ServerConfig

        try:
            config.server = ServerConfig.model_validate({**config.server.model_dump(),
                                                         **overrides})
        except ValidationError as exc:
            msg = exc.errors()[0]["msg"].removeprefix("Value error, ")
            raise ConfigError(f"--host/--port: {msg}") from None
    if (args.engine or config.engine.kind) == "ray":
        return _serve_ray(args, config)
    print(f"complement: serving on http://{config.server.host}:{config.server.port} "
          f"(routes: {', '.join(config.routes) or 'none'}; specialists: "
          f"{', '.join(config.specialists) or 'none'}; workers: {args.workers})", flush=True)
    from router.serving import uvicorn_options

    # the header deadline, keep-alive and protocol options every test and benchmark serves with
    common = dict(host=config.server.host, port=config.server.port, log_level=args.log_level,
                  access_log=args.log_level == "debug", **uvicorn_options(config))
    if args.workers > 1:  # each worker process re-reads the (validated) config file
        os.environ["COMPLEMENT_CONFIG"] = str(Path(args.config or default_config_path())
                                              .resolve())
        uvicorn.run("router.app:app_from_env", factory=True, workers=args.workers, **common)
    else:
        uvicorn.run(create_app(config), **common)
    return 0


def _serve_ray(args: argparse.Namespace, config: "Config") -> int:
    if args.workers > 1:
        raise ConfigError("--workers is for the single-process engine; with --engine ray set "
                          "replicas under engine.ray.deployments (and engine.ray.ingress)")
    if not (args.ray_address or config.engine.ray.address or os.environ.get("RAY_ADDRESS")):
        # a local cluster, this machine's alone: its ports on 127.0.0.1 (read at import)
        os.environ.update(config.engine.ray.local_environment())
    try:
        from router.ray_serve import serve_ray
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "ray":
            raise ConfigError("--engine ray needs Ray Serve: pip install -e '.[ray]'") from None
        raise
    print(f"complement: starting Ray Serve for http://{config.server.host}:"
          f"{config.server.port} (specialists: {', '.join(config.specialists) or 'none'}, "
          "one deployment each)", flush=True)
    return serve_ray(config, address=args.ray_address, log_level=args.log_level)


def cmd_config_check(args: argparse.Namespace) -> int:
    from router.config import load_config
    from router.registry import check_block

    config = load_config(args.file, hint="; give the path of a YAML config")
    problems = []
    for name, block in config.specialists.items():
        try:
            check_block(name, block)  # the class loads and its options fit its model
        except ConfigError as exc:
            problems.append(f"  {exc}")
    if problems:
        raise ConfigError(f"invalid config {args.file!r}:\n" + "\n".join(problems))
    print(f"{args.file}: ok — {len(config.routes)} routes, {len(config.models)} models, "
          f"{len(config.specialists)} specialists")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from router.config import load_config
    from router.frontier import FrontierClient
    from router.registry import Registry
    from router.routing import Router

    from router.api.system import readiness

    config = load_config(args.config)
    registry = Registry.from_config(config.specialists)
    if not args.skip_load:
        registry.setup_all()
        deadline = time.monotonic() + args.wait
        while readiness(registry)[0] == "loading" and time.monotonic() < deadline:
            time.sleep(0.5)
    router = Router(config.routes, FrontierClient(config.models, config.frontier,
                                                  config.env_refs), registry)
    overall, health = readiness(registry)
    print(f"specialists: {'not loaded (--skip-load)' if args.skip_load else overall}")
    for name, spec in registry:
        info = health[name]
        error = registry.errors.get(name) or info.get("error")
        if args.skip_load and not error and not info.get("ok", False):
            status = f"not loaded (--skip-load; kind {spec.kind}): its block is valid"
        elif name in registry.errors or not info.get("ok", False):
            status = f"FAILED: {error or 'not ready, and it gave no reason'}"
        elif info.get("loading"):
            status = (f"LOADING for {info.get('loading_for_s') or 0:g}s (kind {spec.kind}); "
                      "it answers 503 until done (doctor --wait S waits)")
        else:
            status = f"ok (kind {spec.kind}, version {spec.version})"
        print(f"  {name:<14} {status}")
    print("routes:")
    live = 0
    for name, route in config.routes.items():
        reasons = router.live_reasons(name)
        live += not reasons
        state = "live" if not reasons else "NOT LIVE — " + "; ".join(reasons)
        print(f"  {name:<14} {route.policy:<8} {' → '.join(route.targets)}: {state}")
    print(f"{live} of {len(config.routes)} routes live")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="complement",
        description="Route coding-tool work between frontier models and small specialists.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = sub.add_parser("serve", help="start the OpenAI-compatible API server")
    _config_arg(serve)
    serve.add_argument("--host", help="bind address (default: server.host, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default: server.port, 8000)")
    serve.add_argument("--workers", type=_positive_int, default=1,
                       help="worker processes (default 1; each loads its own specialists)")
    serve.add_argument("--engine", choices=["single", "ray"],
                       help="single: one uvicorn process (--workers N); ray: each specialist "
                            "a Ray Serve deployment (engine.ray in the config; needs the "
                            "[ray] extra). Default: engine.kind, single")
    serve.add_argument("--ray-address", metavar="ADDRESS",
                       help="with --engine ray: an existing cluster (default: "
                            "engine.ray.address, then RAY_ADDRESS, else a local cluster "
                            "started and stopped with the command)")
    serve.add_argument("--log-level", default="info",
                       choices=["critical", "error", "warning", "info", "debug"])
    serve.set_defaults(func=cmd_serve)

    config = sub.add_parser("config", help="work with config files")
    config_sub = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    check = config_sub.add_parser("check", help="validate a config file without starting")
    check.add_argument("file", help="YAML config to validate")
    check.set_defaults(func=cmd_config_check)

    doctor = sub.add_parser("doctor", help="say which routes and specialists are live, and why not")
    _config_arg(doctor)
    doctor.add_argument("--skip-load", action="store_true",
                        help="do not load specialist models (faster; load errors not shown)")
    doctor.add_argument("--wait", type=float, default=5.0, metavar="S",
                        help="wait up to S seconds for specialists that load in the "
                             "background, then report the rest as loading (default 5)")
    doctor.set_defaults(func=cmd_doctor)

    for module_name in AREA_CLIS:
        register = _area_register(module_name)
        if register is not None:
            register(sub)
    return parser


def _area_register(module_name: str) -> Callable[[argparse._SubParsersAction], None] | None:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            return None
        raise
    return getattr(module, "register", None)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"complement: {exc}", file=sys.stderr)
        return 2
    except SpecialistError as exc:  # the user's input, e.g. a path that cannot be used
        print(f"complement: {exc.message}", file=sys.stderr)
        return 2
    except OSError as exc:  # the machine's answer to a path or a file: say it, no traceback
        print(f"complement: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
