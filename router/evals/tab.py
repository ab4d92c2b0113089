"""The ``tab`` suite: the Tab specialist against a frontier model used as the completion engine.

Both replay the same held-out edits through the Tab harness's simulated user
(``specialists.tab.replay.Session``), request by request:

- ``tab-specialist``: ``TabSpecialist.answer`` on this machine; latency *measured* per
  request; cost = measured CPU seconds × ``cpu_usd_per_hour`` (an on-demand core-hour
  price; the API cost is zero).
- ``tab-frontier``: a frontier model asked at every request, in replay: it answers the rest
  of the line the user is about to type (an oracle, so its accept rate is an upper bound);
  prompt = the file window around the cursor, priced by litellm's cost map for ``model``;
  latency *modelled* as ttft + output tokens / tokens per second.

Cost per 1,000 keystrokes = the route's cost over the characters the user would type
unaided (``Session.total_chars``), × 1000.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any, Callable

from router.evals.suites import Suite

__all__ = ["run_tab_suite"]

DEFAULTS = {"model": "gpt-5-mini", "ttft_s": 0.5, "tokens_per_s": 120.0,
            "window_before_chars": 6000, "window_after_chars": 2000,
            "cpu_usd_per_hour": 0.05, "use_lm": True, "checkpoint": None}


def _pairs(suite: Suite) -> list[Any]:
    from specialists.tab import SPLIT, load_split

    projects = suite.projects or list(SPLIT["test"])
    out = []
    for name in projects:
        out += load_split(suite.data_path(), name, limit_per_project=suite.per_project,
                          seed=suite.seed)
    return out


def _decider(opts: dict[str, Any]) -> tuple[Callable[[Any], Any], str]:
    """The served specialist, or (no trained policy yet) the harness's copy baseline."""
    from specialists.base import SpecialistError
    from specialists.tab import Suggestion, TabSpecialist

    spec = TabSpecialist(checkpoint=opts["checkpoint"], use_lm=bool(opts["use_lm"]))
    try:
        spec.setup()
    except (OSError, ValueError, RuntimeError, SpecialistError) as exc:
        from specialists.tab import ObserveConfig, copy_min_match, observe

        decide, config = copy_min_match(8), ObserveConfig(use_lm=False)
        why = f"harness baseline copy_min_match(8), no LM: the specialist did not load ({exc})"
        return (lambda req: decide(req, observe(req, None, config))), why

    def ask(req: Any) -> Any:
        res = spec.answer(req.to_json())
        return None if res.abstained else Suggestion.from_output(res.output)

    return ask, f"TabSpecialist policy version {spec.version}"


def _specialist_route(pairs: list[Any], opts: dict[str, Any]) -> tuple[dict[str, Any], str]:
    from specialists.tab import Session

    ask, served = _decider(opts)
    lat, cpu = [], 0.0
    shown = accepted = saved = total = requests = 0
    for pair in pairs:
        session = Session(pair)
        while (req := session.next_request()) is not None:
            c0, t0 = time.thread_time(), time.perf_counter()
            sug = ask(req)
            lat.append((time.perf_counter() - t0) * 1000)
            cpu += time.thread_time() - c0
            out = session.respond(sug)
            requests += 1
            shown += out.shown
            accepted += out.accepted
            saved += out.chars_saved
        total += session.total_chars
    cost = cpu * float(opts["cpu_usd_per_hour"]) / 3600
    return _summary(requests, shown, accepted, saved, total, lat, cost, "measured",
                    {"cpu_seconds": round(cpu, 3)}), served


def _frontier_route(pairs: list[Any], opts: dict[str, Any]) -> tuple[dict[str, Any], str]:
    from router.frontier import litellm_module
    from router.replay import count_tokens
    from specialists.tab import Session, Suggestion

    litellm = litellm_module()
    info = litellm.model_cost.get(opts["model"]) or {}
    p_in = float(info.get("input_cost_per_token") or 0.0)
    p_out = float(info.get("output_cost_per_token") or 0.0)
    lat, cost = [], 0.0
    shown = accepted = saved = total = requests = 0
    for pair in pairs:
        session = Session(pair)
        while (req := session.next_request()) is not None:
            rest = session.remaining()
            line = rest.split("\n", 1)[0] + ("\n" if "\n" in rest and not rest.split("\n", 1)[0] else "")
            window = req.file[max(0, req.cursor - int(opts["window_before_chars"])):
                              req.cursor + int(opts["window_after_chars"])]
            t_in, t_out = count_tokens(window) + 40, max(1, count_tokens(line))
            cost += t_in * p_in + t_out * p_out
            lat.append(1000 * (float(opts["ttft_s"]) + t_out / float(opts["tokens_per_s"])))
            sug = Suggestion(req.cursor, req.cursor, line) if line.strip() else None
            out = session.respond(sug)
            requests += 1
            shown += out.shown
            accepted += out.accepted
            saved += out.chars_saved
        total += session.total_chars
    return _summary(requests, shown, accepted, saved, total, lat, cost, "replay", {}), (
        f"{opts['model']} at ${p_in * 1e6:g}/M input, ${p_out * 1e6:g}/M output tokens")


def _summary(requests: int, shown: int, accepted: int, saved: int, total: int,
             lat: list[float], cost: float, mode: str, extra: dict[str, Any]) -> dict[str, Any]:
    lat_sorted = sorted(lat) or [float("nan")]
    return {"requests": requests, "show_rate": round(shown / max(1, requests), 4),
            "accept_rate": round(accepted / max(1, shown), 4),
            "chars_saved_share": round(saved / max(1, total), 4),
            "p50_ms": round(statistics.median(lat_sorted), 3),
            "p99_ms": round(lat_sorted[min(len(lat_sorted) - 1, int(0.99 * len(lat_sorted)))], 3),
            "cost_usd": round(cost, 8), "keystrokes": total,
            "cost_per_1000_keystrokes_usd": round(1000 * cost / max(1, total), 8),
            "mode": mode, "latency": "measured" if mode == "measured" else "modelled", **extra}


def run_tab_suite(suite: Suite, routes: list[str] | None,
                  progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    opts = {**DEFAULTS, **suite.options}
    pairs = _pairs(suite)
    names = routes or ["tab-specialist", "tab-frontier"]
    runners = {"tab-specialist": _specialist_route, "tab-frontier": _frontier_route}
    unknown = [r for r in names if r not in runners]
    if unknown:
        from router.errors import ConfigError

        raise ConfigError(f"tab suite routes are {sorted(runners)}; got {unknown}")
    summary: dict[str, Any] = {}
    served: list[str] = []
    for name in names:
        started = time.perf_counter()
        summary[name], what = runners[name](pairs, opts)
        served.append(f"{name}: {what}")
        if progress:
            progress(f"tab: {name} done in {time.perf_counter() - started:.0f}s")
    out: dict[str, Any] = {"routes": summary}
    if "tab-specialist" in summary and "tab-frontier" in summary:
        s, f = summary["tab-specialist"], summary["tab-frontier"]
        out["frontier_over_specialist"] = {
            "cost_per_1000_keystrokes": round(f["cost_per_1000_keystrokes_usd"]
                                              / max(1e-12, s["cost_per_1000_keystrokes_usd"]), 1),
            "p99_latency": round(f["p99_ms"] / max(1e-9, s["p99_ms"]), 1)}
    return {"kind": "tab", "suite": suite.name, "routes": names, "n_tasks": len(pairs),
            "projects": sorted({p.repo for p in pairs}), "summary": out,
            "notes": [*served, f"tab-frontier is an oracle in replay mode (it answers the line the user "
                      f"types next): accept rate is its upper bound; its latency is MODELLED "
                      f"({opts['ttft_s']}s to first token, {opts['tokens_per_s']} tokens/s) and "
                      f"its cost from litellm's cost map for {opts['model']}.",
                      f"tab-specialist latency is measured on this machine ({Path.cwd().name}); "
                      f"its cost is CPU time at ${opts['cpu_usd_per_hour']}/core-hour."]}
