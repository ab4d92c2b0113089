"""The API's contract under a fuzzer with every phase (issue 38).

    python benchmarks/api_contract.py [--max-examples 200] [--stateful-examples 1500]
                                      [--max-time 600] [--tab-processes 0] [--seed 38]

Serves the real app over HTTP on loopback for the default config (every specialist it has)
on a scratch data directory, with a small repository under the allowed root, two Tab
policy versions and the frontier models answered by the fake provider
(``router.contract.contract_server_config``), then runs Schemathesis against its
``/openapi.json`` with every phase (examples, coverage, fuzzing, stateful) and every check
that applies (``router.contract.CHECKS``). Prints cases per phase and per operation,
failures per check, the stateful links taken and what their targets answered, and a JSON
summary as the last line. Exit status 1 on any failure, a missing flow or an error.
Nothing leaves loopback. ``tests/reliability/test_api_contract.py`` is the CI-sized run.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from router.audit.common import offline_env  # noqa: E402
from router.serving import running  # noqa: E402

offline_env()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max-examples", type=int, default=200,
                   help="Schemathesis max examples per operation (fuzzing phase)")
    p.add_argument("--stateful-examples", type=int, default=1500,
                   help="scenarios of the stateful phase")
    p.add_argument("--max-time", type=int, default=600, help="seconds, the whole run")
    p.add_argument("--tab-processes", type=int, default=0,
                   help="Tab model worker processes (the default config's 2 on a 2-core box "
                        "measure the box)")
    p.add_argument("--seed", type=int, default=38)
    args = p.parse_args(argv)

    import httpx

    from router.app import create_app
    from router.config import parse_config
    from router.contract import run_contract, contract_server_config
    from router.serving import uvicorn_options
    from router.demo_provider import DemoProvider

    fake = DemoProvider().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = parse_config(contract_server_config(
                Path(tmp), fake.url, tab_processes=args.tab_processes), env={})
            started = time.monotonic()
            with running(create_app(config), **uvicorn_options(config)) as base:
                while httpx.get(f"{base}/readyz", timeout=30).status_code != 200:
                    if time.monotonic() - started > 300:
                        raise SystemExit("the server did not get ready in 300 s")
                    time.sleep(0.25)
                ready_s = time.monotonic() - started
                out = run_contract(base, max_examples=args.max_examples,
                                   stateful_examples=args.stateful_examples,
                                   max_time_s=args.max_time, seed=args.seed)
    finally:
        fake.stop()
    _print(out)
    summary = {"benchmark": "api_contract", "machine": f"{platform.machine()}, "
               f"{__import__('os').cpu_count()} cores", "ready_s": round(ready_s, 1),
               **{k: out[k] for k in ("cases", "cases_by_phase", "operations", "failures",
                                       "failures_by_check", "unexpressible", "flows_reached",
                                       "flows_missing", "links_reached", "stop_reason",
                                       "seconds", "max_examples", "stateful_examples", "seed")},
               "errors": len(out["errors"]),
               "ok": not out["failures"] and not out["flows_missing"] and not out["errors"]}
    print(json.dumps(summary))
    return summary


def _print(out: dict[str, Any]) -> None:
    print(f"{out['cases']} cases in {out['seconds']} s, stop: {out['stop_reason']}")
    print("per phase: " + ", ".join(f"{k} {v}" for k, v in out["cases_by_phase"].items()))
    print("failures per check:")
    for name, n in out["failures_by_check"].items():
        print(f"  {name:32} {n:6d}  (run {out['checks_run'].get(name, 0)})")
    for what, n in out["unexpressible"].items():
        print(f"  not expressible in JSON Schema, counted apart: {what}: {n}")
    print("per operation (cases: statuses):")
    for op, n in out["cases_by_operation"].items():
        print(f"  {op:30} {n:6d}: {out['statuses_by_operation'].get(op)}")
    print("stateful links taken (reached = not 400/404, by status):")
    for link, n in out["links_taken"].items():
        reached = {k.rsplit(' [', 1)[1][:-1]: v for k, v in out["links_reached"].items()
                   if k.startswith(f"{link} [")}
        print(f"  {link:64} {n:5d}  {reached}")
    for example in out["failure_examples"]:
        print(f"FAIL {example}")
    for error in out["errors"]:
        print(f"ERROR {error}")
    for case in out.get("unanswered_examples", []):
        print(f"UNANSWERED {json.dumps(case, default=repr)[:4000]}")


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
