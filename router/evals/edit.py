"""The ``edit`` suite: real commits as edit tasks, each run through every compared route.

Instruction = the commit message; the file = ``before``; success = the merged file equals
the real ``after`` (also whitespace-normalised, and the share of changed lines right).
In replay mode the frontier answers with the true change (``router.replay``), so what is
measured is the local stages: the applier, the search/replace matcher, escalation. The
frontier's latency is then *modelled*; the local stages' time is *measured* on this machine.
The eval passes the file inline (no repository), so no retrieval step runs here.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

from router.evals.config import EvalConfig
from router.evals.scoring import score
from router.evals.suites import EditTask, Suite, load_edit_tasks

__all__ = ["run_edit_suite", "summarise_edit", "failure_kind"]

Progress = Callable[[str], None]


def failure_kind(rec: dict[str, Any]) -> str:
    """Where a route failed on a task, for the report's failure plot."""
    if rec["exact"]:
        return "exact"
    if rec["status"] != "applied":
        reason = (rec.get("reason") or "").lower()
        if "abstain" in reason:
            return "abstained (all steps)"
        if "the merge" in reason:
            return "merge check rejected"
        if "does not parse" in reason or "verification" in reason:
            return "verification failed"
        if "search" in reason:
            return "search/replace no match"
        return "failed"
    if rec["exact_ws"]:
        return "whitespace only"
    return "applied, wrong result"


async def _run_task(pipeline: Any, task: EditTask, strategy: str) -> Any:
    from router.edit import EditRequest

    req = EditRequest(task.message, texts={task.path: task.before}, strategy=strategy,
                      replay_task=task.id)
    return await pipeline.run(req)


def _record(task: EditTask, route: str, result: Any, feats: dict[str, float],
            mode: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    merged = result.files.get(task.path) if result.status == "applied" else None
    frontier_s = sum(s.latency_s for s in result.trace if s.stage == "frontier")
    rec = {"task": task.id, "route": route, "project": task.project, "path": task.path,
           "language": task.language, "lines": task.lines, "mode": mode,
           "status": result.status, **score(task.before, task.after, merged),
           "format": result.format, "output_tokens": result.output_tokens,
           "prompt_tokens": result.prompt_tokens, "cost_usd": round(result.cost_usd, 8),
           "latency_s": round(result.latency_s, 6), "frontier_latency_s": round(frontier_s, 6),
           "local_latency_s": round(result.latency_s - frontier_s, 6),
           "escalations": sum(1 for s in result.trace if s.stage == "frontier") - 1,
           "reason": result.reason, "features": feats,
           "trace": [_step_dict(s) for s in result.trace], **(extra or {})}
    rec["failure"] = failure_kind(rec)
    return rec


def _step_dict(step: Any) -> dict[str, Any]:
    from dataclasses import asdict

    d = asdict(step)
    return {k: v for k, v in d.items() if v not in (None, {}, 0, 0.0) or k in ("stage", "outcome")}


async def run_edit_suite(suite: Suite, cfg: EvalConfig, routes: list[str],
                         progress: Progress | None = None) -> dict[str, Any]:
    from router.frontier import FrontierClient
    from router.learned import RouteClassifier, features
    from router.edit import EditPipeline
    from router.registry import specialist_from_config
    from router.replay import ReplayStore, ReplayTask, install

    tasks = load_edit_tasks(suite)
    store = ReplayStore(sketch_k=cfg.sketch_k)
    for t in tasks:
        store.add(ReplayTask(t.id, t.path, t.before, t.after, t.language))
    install(store)
    main = cfg.main_config()
    frontier = FrontierClient(main.models, main.frontier, main.env_refs)
    applier = specialist_from_config(main.specialists, "apply")
    latency = cfg.latency_models()
    pipelines = {name: EditPipeline(frontier, r.targets, route=name, latency=latency,
                                    applier=applier, model_applier=_factory(r.model_applier))
                 for name, r in cfg.routes.items() if r.policy != "learned"}
    classifiers = {name: RouteClassifier.load(r.classifier or "")
                   for name, r in cfg.routes.items() if r.policy == "learned" and name in routes}
    records: list[dict[str, Any]] = []
    started = time.perf_counter()
    for i, task in enumerate(tasks, 1):
        feats = features(task.message, task.before, task.language)
        for route in routes:
            rcfg = cfg.routes[route]
            extra: dict[str, Any] = {}
            chosen = route
            if rcfg.policy == "learned":
                clf = classifiers[route]
                thr = rcfg.threshold if rcfg.threshold is not None else clf.threshold
                p = clf.predict(feats)
                chosen = (rcfg.cheap if p >= thr else rcfg.strong) or ""
                extra = {"learned": {"p_cheap": round(p, 4), "threshold": thr, "chose": chosen}}
            result = await _run_task(pipelines[chosen], task, cfg.routes[chosen].strategy)
            records.append(_record(task, route, result, feats, cfg.mode_of(route), extra))
        if progress and (i % 10 == 0 or i == len(tasks)):
            progress(f"edit: {i}/{len(tasks)} tasks × {len(routes)} routes "
                     f"({time.perf_counter() - started:.0f}s)")
    return {"kind": "edit", "suite": suite.name, "routes": routes,
            "projects": sorted({t.project for t in tasks}), "n_tasks": len(tasks),
            "sketch_k": cfg.sketch_k,
            "latency_models": {n: m.latency.model_dump() for n, m in cfg.models.items()},
            "summary": summarise_edit(records, routes, cfg, suite.baseline),
            "tasks": records}


def _factory(spec: str | None) -> Any:
    if not spec:
        return None
    import importlib

    from router.errors import ConfigError

    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"model_applier: cannot import {spec!r}: {exc}") from exc
    return factory()


def _p(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def _route_summary(recs: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    n = max(1, len(recs))
    lat = [r["latency_s"] for r in recs]
    return {
        "n": len(recs),
        "exact": round(sum(r["exact"] for r in recs) / n, 4),
        "exact_ws": round(sum(r["exact_ws"] for r in recs) / n, 4),
        "changed_lines_right": round(sum(r["changed_lines_right"] for r in recs) / n, 4),
        "applied": round(sum(r["status"] == "applied" for r in recs) / n, 4),
        "output_tokens": round(sum(r["output_tokens"] for r in recs) / n, 1),
        "prompt_tokens": round(sum(r["prompt_tokens"] for r in recs) / n, 1),
        "cost_usd": round(sum(r["cost_usd"] for r in recs) / n, 6),
        "cost_usd_total": round(sum(r["cost_usd"] for r in recs), 6),
        "latency_p50_s": round(statistics.median(lat), 4) if lat else None,
        "latency_p90_s": round(_p(lat, 0.9), 4) if lat else None,
        "local_latency_p50_s": round(statistics.median([r["local_latency_s"] for r in recs]), 6)
        if recs else None,
        "escalated": round(sum(r["escalations"] > 0 for r in recs) / n, 4),
        "mode": mode,
        "latency": "modelled frontier + measured local" if mode == "replay" else "measured",
    }


def summarise_edit(records: list[dict[str, Any]], routes: list[str], cfg: EvalConfig | None,
                   baseline: str | None) -> dict[str, Any]:
    def mode(route: str) -> str:
        if cfg is not None and route in cfg.routes:
            return cfg.mode_of(route)
        return next((r["mode"] for r in records if r["route"] == route), "unknown")

    per = {r: _route_summary([x for x in records if x["route"] == r], mode(r)) for r in routes}
    large = {r: _route_summary([x for x in records if x["route"] == r and x["lines"] > 300],
                               mode(r)) for r in routes}
    out: dict[str, Any] = {"routes": per, "files_over_300_lines": large}
    base = baseline if baseline in per else None
    if base:
        out["baseline"] = base
        out["vs_baseline"] = {r: _ratios(per[r], per[base], large[r], large[base])
                              for r in routes if r != base}
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 4) if a is not None and b else None


def _ratios(r: dict[str, Any], b: dict[str, Any], rl: dict[str, Any],
            bl: dict[str, Any]) -> dict[str, Any]:
    return {"exact_points": round(100 * (r["exact"] - b["exact"]), 2),
            "output_tokens_ratio": _ratio(r["output_tokens"], b["output_tokens"]),
            "cost_ratio": _ratio(r["cost_usd"], b["cost_usd"]),
            "latency_p50_ratio": _ratio(r["latency_p50_s"], b["latency_p50_s"]),
            "latency_p50_ratio_over_300_lines": _ratio(rl["latency_p50_s"], bl["latency_p50_s"]),
            "n_over_300_lines": rl["n"]}
