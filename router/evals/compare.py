"""``complement eval compare RUN1 RUN2``: what changed between two runs of a suite.

Per route: the summary metrics side by side with their change; per task (edit suites):
the tasks whose exact-match outcome flipped, so a regression names its tasks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from router.errors import ConfigError

__all__ = ["compare", "compare_text", "load_run"]


def load_run(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():  # a run directory: its newest JSON report
        found = sorted(p.glob("*.json"), key=lambda f: f.stat().st_mtime)
        if not found:
            raise ConfigError(f"no run JSON in {str(p)!r}")
        p = found[-1]
    try:
        run = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"run {str(p)!r} not found") from None
    except ValueError as exc:
        raise ConfigError(f"run {str(p)!r} is not JSON: {exc}") from exc
    if "summary" not in run or "routes" not in run["summary"]:
        raise ConfigError(f"{str(p)!r} is not a complement eval run (no summary.routes)")
    run["_path"] = str(p)
    return run


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    ra, rb = a["summary"]["routes"], b["summary"]["routes"]
    routes: dict[str, Any] = {}
    for name in list(dict.fromkeys([*ra, *rb])):
        sa, sb = ra.get(name), rb.get(name)
        if sa is None or sb is None:
            routes[name] = {"only_in": "run2" if sa is None else "run1"}
            continue
        row = {}
        for key in sa:
            x, y = _num(sa.get(key)), _num(sb.get(key))
            if x is not None and y is not None:
                row[key] = {"run1": x, "run2": y, "delta": round(y - x, 6)}
            elif sa.get(key) != sb.get(key):
                row[key] = {"run1": sa.get(key), "run2": sb.get(key)}
        routes[name] = row
    return {"run1": a.get("_path"), "run2": b.get("_path"), "routes": routes,
            "flipped": _flipped(a, b)}


def _flipped(a: dict[str, Any], b: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    ea = {(t["route"], t["task"]): t.get("exact") for t in a.get("tasks", [])}
    eb = {(t["route"], t["task"]): t.get("exact") for t in b.get("tasks", [])}
    out: dict[str, dict[str, list[str]]] = {}
    for key in sorted(set(ea) & set(eb)):
        if ea[key] != eb[key]:
            side = "fixed" if eb[key] else "broken"
            out.setdefault(key[0], {"fixed": [], "broken": []})[side].append(key[1])
    return out


def compare_text(diff: dict[str, Any]) -> str:
    lines = [f"run1: {diff['run1']}", f"run2: {diff['run2']}", ""]
    for name, row in diff["routes"].items():
        if "only_in" in row:
            lines.append(f"{name}: only in {row['only_in']}")
            continue
        changed = {k: v for k, v in row.items() if "delta" not in v or v["delta"] != 0}
        if not changed:
            lines.append(f"{name}: no change")
            continue
        lines.append(f"{name}:")
        for key, v in changed.items():
            if "delta" in v:
                lines.append(f"  {key:<22} {v['run1']:>12.6g} → {v['run2']:<12.6g} "
                             f"({v['delta']:+.6g})")
            else:
                lines.append(f"  {key:<22} {v['run1']} → {v['run2']}")
    for route, sides in diff["flipped"].items():
        for side in ("fixed", "broken"):
            if sides[side]:
                lines.append(f"{route}: {len(sides[side])} tasks {side}: "
                             + ", ".join(sides[side][:8]) + (" …" if len(sides[side]) > 8 else ""))
    return "\n".join(lines)
