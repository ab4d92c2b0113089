"""Reports of an eval run: a terminal table, the JSON file, and an HTML page with plots.

The HTML embeds its plots as base64 PNGs (matplotlib, Agg backend) so the one file opens in
any browser with nothing beside it. Every table states the mode (replay or real) of each
route's numbers, and in replay mode that frontier latencies are modelled.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["html_report", "table", "write_json", "write_run"]

REPLAY_NOTE = ("replay mode: the frontier answers with the true change; its cost comes from "
               "litellm's cost map for the named model and its latency is MODELLED "
               "(time to first token + output tokens / tokens per second, from the eval "
               "config); local stages (apply, verify) are measured on this machine.")

_EDIT_COLS = [("exact", "exact", "{:.1%}"), ("exact_ws", "exact(ws)", "{:.1%}"),
              ("changed_lines_right", "lines ok", "{:.1%}"), ("output_tokens", "out tok", "{:.0f}"),
              ("cost_usd", "$/task", "{:.5f}"), ("latency_p50_s", "p50 s", "{:.2f}"),
              ("latency_p90_s", "p90 s", "{:.2f}"), ("escalated", "escal.", "{:.0%}"),
              ("mode", "mode", "{}")]


def _fmt(spec: str, value: Any) -> str:
    if value is None:
        return "-"
    try:
        return spec.format(value)
    except (ValueError, TypeError):
        return str(value)


def _grid(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def table(run: dict[str, Any]) -> str:
    """The terminal summary of one run."""
    kind = run.get("kind")
    head = f"suite {run.get('suite')} ({kind}), {run.get('n_tasks', '?')} tasks"
    if kind == "edit":
        return "\n".join([head, _edit_table(run), "", _edit_ratios(run), "", _notes(run)])
    if kind == "tab":
        return "\n".join([head, _rows_table(run["summary"]["routes"]), "", _notes(run)])
    return "\n".join([head, _rows_table(run["summary"]["routes"]), "", _notes(run)])


def _edit_table(run: dict[str, Any]) -> str:
    routes = run["summary"]["routes"]
    header = ["route"] + [c[1] for c in _EDIT_COLS]
    rows = [[name] + [_fmt(spec, s.get(key)) for key, _, spec in _EDIT_COLS]
            for name, s in routes.items()]
    large = run["summary"].get("files_over_300_lines", {})
    if large:
        first: dict[str, Any] = next(iter(large.values()), {})
        n = first.get("n", 0)
        rows2 = [[name] + [_fmt(spec, s.get(key)) for key, _, spec in _EDIT_COLS]
                 for name, s in large.items()]
        return _grid(header, rows) + f"\n\nfiles over 300 lines ({n} tasks)\n" + _grid(header, rows2)
    return _grid(header, rows)


def _edit_ratios(run: dict[str, Any]) -> str:
    vs = run["summary"].get("vs_baseline")
    if not vs:
        return ""
    base = run["summary"]["baseline"]
    header = ["route", "Δexact pts", "out tok ×", "cost ×", "p50 ×", "p50 × (>300 lines)"]
    rows = [[r, _fmt("{:+.1f}", v["exact_points"]), _fmt("{:.3f}", v["output_tokens_ratio"]),
             _fmt("{:.3f}", v["cost_ratio"]), _fmt("{:.3f}", v["latency_p50_ratio"]),
             _fmt("{:.3f}", v["latency_p50_ratio_over_300_lines"])] for r, v in vs.items()]
    return f"against {base} (ratios in the same run)\n" + _grid(header, rows)


def _rows_table(routes: dict[str, dict[str, Any]]) -> str:
    keys: list[str] = []
    for s in routes.values():
        keys += [k for k in s if k not in keys and not isinstance(s[k], (dict, list))]
    rows = [[name] + [_fmt("{:.4g}" if isinstance(s.get(k), float) else "{}", s.get(k))
                      for k in keys] for name, s in routes.items()]
    return _grid(["route"] + keys, rows)


def _notes(run: dict[str, Any]) -> str:
    notes = list(run.get("notes", []))
    modes = {s.get("mode") for s in run["summary"]["routes"].values()}
    if "replay" in modes and run.get("kind") == "edit":
        notes.insert(0, REPLAY_NOTE)
    return "\n".join(f"note: {n}" for n in notes)


def write_json(run: dict[str, Any], path: Path) -> None:
    """Atomically: a report half-written by a crash would poison `eval compare`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(run, fh, indent=1, default=str)
    os.chmod(tmp, 0o644)  # mkstemp makes it private; a report is for reading
    os.replace(tmp, path)


def write_run(run: dict[str, Any], out_dir: Path, stem: str) -> dict[str, Path]:
    paths = {"json": out_dir / f"{stem}.json", "html": out_dir / f"{stem}.html"}
    write_json(run, paths["json"])
    paths["html"].write_text(html_report(run), encoding="utf-8")
    return paths


# -- HTML -----------------------------------------------------------------------------------
def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _plots_edit(run: dict[str, Any]) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    routes = run["summary"]["routes"]
    recs = run["tasks"]
    out = []
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, (name, s) in enumerate(routes.items()):
        ax.scatter(s["cost_usd"] * 1000, 100 * s["exact"], s=60)
        # staggered labels: routes with the same point (learned = cascade) stay readable
        ax.annotate(name, (s["cost_usd"] * 1000, 100 * s["exact"]), textcoords="offset points",
                    xytext=(5, 4 - 11 * (i % 3)), fontsize=8)
    ax.set_xlabel("mean cost per task (USD × 1000)")
    ax.set_ylabel("exact match (%)")
    ax.set_title("quality against cost per route")
    ax.grid(alpha=0.3)
    out.append(("Quality against cost", _png(fig)))

    fig, ax = plt.subplots(figsize=(7, 4))
    data = [[r["latency_s"] for r in recs if r["route"] == name] or [0.0] for name in routes]
    ax.boxplot(data, showfliers=True)
    ax.set_xticks(range(1, len(routes) + 1), list(routes), rotation=20, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("latency per task (s, log)")
    ax.set_title("latency distribution per route")
    out.append(("Latency distribution", _png(fig)))

    kinds = sorted({r["failure"] for r in recs if r["failure"] != "exact"})
    fig, ax = plt.subplots(figsize=(7, 4))
    bottom = [0.0] * len(routes)
    for kind in kinds:
        vals = [sum(1 for r in recs if r["route"] == name and r["failure"] == kind)
                for name in routes]
        ax.bar(list(routes), vals, bottom=bottom, label=kind)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("tasks not exact")
    ax.set_title("where each route fails")
    ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    if kinds:
        ax.legend(fontsize=8)
    out.append(("Where each route fails", _png(fig)))

    fig, ax = plt.subplots(figsize=(6, 4))
    for name in routes:
        pts = sorted((r["lines"], r["latency_s"]) for r in recs if r["route"] == name)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], ".", label=name, alpha=0.6)
    ax.set_xlabel("file lines")
    ax.set_ylabel("latency (s)")
    ax.set_title("latency by file size")
    ax.legend(fontsize=8)
    out.append(("Latency by file size", _png(fig)))
    return out


_BAR_METRICS = {"tab": [("p99_ms", "p99 latency (ms, log)", True),
                        ("cost_per_1000_keystrokes_usd", "USD per 1,000 keystrokes (log)", True),
                        ("accept_rate", "accept rate", False)],
                "retrieval": [("acc@1", "acc@1", False), ("acc@10", "acc@10", False),
                              ("query_p50_ms", "query p50 (ms)", False)]}


def _plots_bars(run: dict[str, Any]) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    routes = run["summary"]["routes"]
    out = []
    for key, label, log in _BAR_METRICS.get(str(run.get("kind")), []):
        fig, ax = plt.subplots(figsize=(5, 3))
        values = [float(s.get(key) or 0.0) for s in routes.values()]
        ax.bar(list(routes), [max(v, 1e-12) for v in values] if log else values)
        if log:
            ax.set_yscale("log")
        ax.set_ylabel(label)
        ax.set_title(f"{label} per route")
        out.append((label, _png(fig)))
    return out


def _html_table(routes: dict[str, dict[str, Any]]) -> str:
    keys: list[str] = []
    for s in routes.values():
        keys += [k for k in s if k not in keys and not isinstance(s[k], (dict, list))]
    head = "".join(f"<th>{html.escape(k)}</th>" for k in ["route", *keys])
    body = "".join("<tr>" + f"<td>{html.escape(n)}</td>" + "".join(
        f"<td>{html.escape(_fmt('{:.4g}' if isinstance(s.get(k), float) else '{}', s.get(k)))}</td>"
        for k in keys) + "</tr>" for n, s in routes.items())
    return f"<table><tr>{head}</tr>{body}</table>"


def html_report(run: dict[str, Any]) -> str:
    title = f"complement eval: {run.get('suite')} ({run.get('kind')})"
    parts = [f"<h1>{html.escape(title)}</h1>",
             f"<p>{run.get('n_tasks', '?')} tasks; created {html.escape(str(run.get('created', '')))}"
             f"; command: <code>{html.escape(str(run.get('command', '')))}</code></p>"]
    modes = {s.get("mode") for s in run["summary"]["routes"].values()}
    if "replay" in modes and run.get("kind") == "edit":
        parts.append(f"<p class=note><b>{html.escape(REPLAY_NOTE)}</b></p>")
    for n in run.get("notes", []):
        parts.append(f"<p class=note>{html.escape(n)}</p>")
    parts.append("<h2>Summary</h2>" + _html_table(run["summary"]["routes"]))
    if run.get("kind") == "edit":
        if run["summary"].get("files_over_300_lines"):
            parts.append("<h2>Files over 300 lines</h2>"
                         + _html_table(run["summary"]["files_over_300_lines"]))
        if run["summary"].get("vs_baseline"):
            parts.append(f"<h2>Against {html.escape(run['summary']['baseline'])}</h2>"
                         + _html_table(run["summary"]["vs_baseline"]))
        for caption, src in _plots_edit(run):
            parts.append(f"<h2>{html.escape(caption)}</h2><img alt='{html.escape(caption)}' "
                         f"src='{src}'>")
    else:
        for caption, src in _plots_bars(run):
            parts.append(f"<h2>{html.escape(caption)}</h2><img alt='{html.escape(caption)}' "
                         f"src='{src}'>")
    style = ("body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:"
             "collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
             ".note{background:#fff8dc;padding:.5em}")
    return (f"<!doctype html><html><head><meta charset=utf-8><title>{html.escape(title)}"
            f"</title><style>{style}</style></head><body>{''.join(parts)}</body></html>")
