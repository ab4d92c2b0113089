"""Run one suite file against the routes of an eval config."""

from __future__ import annotations

import asyncio
import datetime as dt
import platform
from pathlib import Path
from typing import Any, Callable

from router.errors import ConfigError

__all__ = ["run_suite"]


def _machine() -> str:
    import os

    return f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} CPUs".strip()


def run_suite(suite_path: str | Path, routes: list[str] | None = None,
              config_path: str | Path | None = None, *,
              limit: int | None = None,
              progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run a suite; ``routes`` default to every route of the eval config (edit suites)."""
    from router.evals.config import load_eval_config
    from router.evals.suites import load_suite

    suite = load_suite(suite_path)
    if limit is not None:
        suite.per_project = min(suite.per_project, limit)
    if suite.kind == "edit":
        from router.evals.edit import run_edit_suite

        cfg = load_eval_config(config_path)
        names = routes or [r for r, rc in cfg.routes.items()
                           if rc.policy != "learned" or Path(rc.classifier or "").is_file()]
        unknown = [r for r in names if r not in cfg.routes]
        if unknown:
            raise ConfigError(f"routes {unknown} are not in {cfg.source} "
                              f"(known: {sorted(cfg.routes)})")
        run = asyncio.run(run_edit_suite(suite, cfg, names, progress))
        run["config"] = cfg.source
    elif suite.kind == "tab":
        from router.evals.tab import run_tab_suite

        run = run_tab_suite(suite, routes, progress)
    else:
        from router.evals.retrieval import run_retrieval_suite

        run = run_retrieval_suite(suite, routes, progress)
    run.update(suite_file=str(suite_path), machine=_machine(),
               created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    return run
