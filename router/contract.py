"""The API's contract, checked by a fuzzer: Schemathesis over the server's own ``/openapi.json``.

The schema (``router.openapi``) is built from the same models that validate, documents every
status an operation answers, and carries links (``/v1/tab`` → ``/v1/feedback``, ``/v1/index``
→ ``/v1/retrieve``, deploy → rollback, canary → promote / abort) and working examples, so a
fuzzer's stateful phase walks the flows and its examples get past the 404s.

:func:`contract_server_config` is the default config (every specialist it has) on a
scratch data directory, with a small repository under the allowed root, two Tab policy
versions in the store and the frontier models pointed at a loopback fake provider;
:func:`run_contract` runs Schemathesis with every phase (examples, coverage, fuzzing,
stateful) and the checks in :data:`CHECKS` against a base URL, and counts what it did.
``tests/reliability/test_api_contract.py`` runs it with a small budget;
``benchmarks/api_contract.py`` with a large one. Nothing here reaches past loopback.

Schemathesis and Hypothesis are development dependencies (the ``dev`` extra): imported
only when a run starts.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import yaml

__all__ = ["CHECKS", "PHASES", "STATEFUL_LINKS", "contract_server_config", "prepare_data",
           "run_contract"]

PHASES = ("examples", "coverage", "fuzzing", "stateful")

#: A schema-valid request may still be refused for the server's state or config, and say
#: so: Schemathesis's defaults (2xx, 3xx, 401, 403, 404, 409, 429, 5xx), plus 402 (the
#: route's budget cannot cover the worst case of the max_tokens asked for).
_CHECKS_CONFIG = {"positive_data_acceptance": {"expected-statuses": [
    "2xx", "3xx", "401", "402", "403", "404", "409", "429", "5xx"]}}

#: Every Schemathesis check that applies to this API. Left out: ``ignored_auth`` (a
#: loopback server without keys has no security scheme to ignore), ``use_after_free`` and
#: ``ensure_resource_availability`` (no operation deletes or creates an addressable
#: resource), ``missing_required_header`` (no operation requires a header),
#: ``object_level_authorization`` (no per-user objects), ``max_response_time`` (a bound on
#: a loaded 2-core machine measures the machine).
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_headers_conformance", "response_schema_conformance",
          "negative_data_rejection", "positive_data_acceptance", "unsupported_method",
          "allow_header_conformance")

#: The flows the stateful phase must walk: (source operation, link name, target operation).
STATEFUL_LINKS = (
    "POST /v1/tab -> [200] Feedback -> POST /v1/feedback",
    "POST /v1/index -> [200] Retrieve -> POST /v1/retrieve",
    "POST /v1/tab/deploy -> [200] Rollback -> POST /v1/tab/deploy",
)

#: Failures of a check that the schema cannot prevent, each with the answer's text that
#: says so: JSON Schema cannot relate one field to another, so a Tab cursor past the end of
#: its 'file' is schema-valid and answered 400 naming the range. Counted apart
#: (``unexpressible``), never silently: any other 400 there is a failure.
UNEXPRESSIBLE = {("positive_data_acceptance", "POST /v1/tab"): "is outside the file"}

_REPO_FILES = {
    "calc/ops.py": 'def add(a, b):\n    """Sum of two numbers."""\n    return a + b\n\n\n'
                   'def mul(a, b):\n    return a * b\n',
    "calc/fmt.py": "from calc.ops import add\n\n\ndef show(a, b):\n"
                   "    return f'{a} + {b} = {add(a, b)}'\n",
    "README.md": "# calc\n\nA tiny calculator: add, mul, show.\n",
}


def prepare_data(root: Path) -> dict[str, Path]:
    """Under ``root``: ``repos/calc`` (a small repository under the allowed root), and a
    data directory whose Tab policy store holds the shipped policy and a second version
    (so a canary has a candidate and a deploy something to roll back to)."""
    from router.service.tab import TabService
    from specialists.tab.loop.versions import PolicyStore, publish_policy

    repos, data = root / "repos", root / "data"
    for rel, text in _REPO_FILES.items():
        path = repos / "calc" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    checkpoint = Path(__file__).resolve().parents[1] / "specialists" / "tab" / "checkpoint"
    shipped = int(json.loads((checkpoint / "policy.json").read_text())["version"])
    store = PolicyStore(data / "tab")
    publish_policy(store, checkpoint, shipped, {"parent": None, "source": str(checkpoint),
                                                "events_used": 0})
    candidate = root / "candidate"
    candidate.mkdir(exist_ok=True)
    for name in ("policy.json", "policy.safetensors"):
        shutil.copy2(checkpoint / name, candidate / name)
    meta = json.loads((candidate / "policy.json").read_text())
    meta["version"] = shipped + 1
    (candidate / "policy.json").write_text(json.dumps(meta))
    store.publish(candidate, shipped + 1, {"parent": shipped, "source": "contract fixture",
                                           "events_used": 0})
    TabService(None, data).deploy_at_next_start(shipped)  # the server starts serving it
    return {"repos": repos, "data": data}


def contract_server_config(root: Path, frontier_url: str, *,
                           tab_processes: int = 0) -> dict[str, Any]:
    """The default config (``configs/default.yaml``) as a mapping for ``parse_config``:
    data under ``root/data``, repositories under ``root/repos``, the Tab model in
    ``tab_processes`` worker processes (0: a thread of the server) and every frontier model
    answered by the OpenAI-compatible fake at ``frontier_url`` (loopback)."""
    from router.config import default_config_path

    paths = prepare_data(root)
    config = yaml.safe_load(default_config_path().read_text())
    env = {"COMPLEMENT_DATA_DIR": str(paths["data"]), "COMPLEMENT_REPOS": str(paths["repos"]),
           "COMPLEMENT_TAB_PROCESSES": str(tab_processes)}
    config = _substitute(config, env)
    for model in config["models"].values():
        model.update(api_base=frontier_url, api_key="contract-fake", transport="http")
    return config


def _substitute(node: Any, env: dict[str, str]) -> Any:
    """``${VAR:-default}`` resolved from ``env`` only (never this process's environment)."""
    if isinstance(node, dict):
        return {k: _substitute(v, env) for k, v in node.items()}
    if isinstance(node, list):
        return [_substitute(v, env) for v in node]
    if isinstance(node, str):
        return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}",
                      lambda m: env.get(m.group(1), m.group(2) or ""), node)
    return node


def run_contract(base_url: str, *, max_examples: int = 20, stateful_examples: int | None = None,
                 phases: tuple[str, ...] = PHASES,
                 checks: tuple[str, ...] = CHECKS, max_time_s: int | None = None,
                 seed: int | None = 38, workers: int = 1, request_timeout_s: float = 30.0,
                 keep_failures: int = 20) -> dict[str, Any]:
    """Run Schemathesis against the server at ``base_url`` (its ``/openapi.json``) and
    count: cases per phase and per operation (``stateful_examples``: scenarios of the
    stateful phase, default ``max_examples``), failures per check (with the first
    ``keep_failures`` described), the stateful links taken and what their targets answered
    (``links_reached``: by status, leaving out 400 and 404), the statuses seen."""
    import schemathesis
    from schemathesis.config import SchemathesisConfig
    from schemathesis.engine import from_schema
    from schemathesis.engine import events as ev

    config = SchemathesisConfig.from_dict({**_dictionaries(_fetch_schema(base_url)),
                                           "checks": _CHECKS_CONFIG})
    config.update(seed=seed, max_failures=None, max_time=max_time_s,
                  suppress_health_check=None)
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json", config=config)
    project = schema.config
    # every POST says it is JSON, a body-less one too (the guard's 415, documented): a
    # client that sends no content type there is answered 415 before its input is read
    project.update(base_url=base_url, workers=workers, request_timeout=request_timeout_s,
                   continue_on_failure=True, headers={"Content-Type": "application/json"})
    project.phases.update(phases=list(phases))
    project.checks.update(included_check_names=list(checks))
    project.generation.update(max_examples=max_examples)
    # scenarios of the stateful phase (each up to max_steps calls along the links)
    project.phases.stateful.generation.update(
        max_examples=stateful_examples or max_examples)

    cases_by_phase: Counter[str] = Counter()
    cases_by_operation: Counter[str] = Counter()
    statuses: dict[str, Counter[str]] = defaultdict(Counter)
    failures_by_check: Counter[str] = Counter({name: 0 for name in checks})
    unexpressible: Counter[str] = Counter()
    checks_run: Counter[str] = Counter()
    links: Counter[str] = Counter()
    links_ok: Counter[str] = Counter()
    examples: list[dict[str, Any]] = []
    unanswered: list[dict[str, Any]] = []
    errors: list[str] = []
    started = time.monotonic()
    stop_reason = None
    for event in from_schema(schema).execute():
        if isinstance(event, (ev.ScenarioFinished, ev.FuzzScenarioFinished)):
            phase = getattr(event, "phase", None)
            phase_name = getattr(phase, "value", None) or ("fuzzing" if phase is None
                                                            else str(phase))
            _count(event.recorder, phase_name.lower(), cases_by_phase, cases_by_operation,
                   statuses, failures_by_check, unexpressible, checks_run, links, links_ok,
                   examples, keep_failures, unanswered)
        elif isinstance(event, ev.NonFatalError):
            errors.append(f"{event.label}: {type(event.value).__name__}: {event.value}"[:500])
        elif isinstance(event, ev.FatalError):
            errors.append(f"fatal: {type(event.exception).__name__}: {event.exception}"[:500])
        elif isinstance(event, ev.EngineFinished):
            stop_reason = event.stop_reason.value
    wanted = set(STATEFUL_LINKS)
    return {
        "cases": sum(cases_by_phase.values()),
        "cases_by_phase": dict(cases_by_phase),
        "cases_by_operation": dict(sorted(cases_by_operation.items())),
        "operations": len(cases_by_operation),
        "failures": sum(failures_by_check.values()),
        "failures_by_check": dict(failures_by_check),
        "unexpressible": dict(unexpressible),
        "checks_run": dict(checks_run),
        "statuses_by_operation": {op: dict(c) for op, c in sorted(statuses.items())},
        "links_taken": dict(sorted(links.items())),
        "links_reached": dict(sorted(links_ok.items())),
        "flows_reached": sorted(k for k in wanted if _reached(links_ok, k)),
        "flows_missing": sorted(k for k in wanted if not _reached(links_ok, k)),
        "errors": errors[:keep_failures],
        "failure_examples": examples,
        "unanswered_examples": unanswered,
        "stop_reason": stop_reason,
        "seconds": round(time.monotonic() - started, 1),
        "max_examples": max_examples, "stateful_examples": stateful_examples or max_examples,
        "phases": list(phases), "checks": list(checks),
        "seed": seed,
    }


def _reached(reached: Counter[str], link: str) -> bool:
    """Did ``link``'s target answer with its real logic: what the link carried was found
    (a 2xx, or a 409 from the server's state, such as feedback for a suggestion not shown),
    not a 400 or 404."""
    return any(key.startswith(f"{link} [") for key in reached)


def _fetch_schema(base_url: str) -> dict[str, Any]:
    import httpx

    response = httpx.get(f"{base_url}/openapi.json", timeout=30)
    response.raise_for_status()
    return response.json()  # type: ignore[no-any-return]


def _dictionaries(schema: dict[str, Any], probability: float = 0.5) -> dict[str, Any]:
    """Schemathesis configuration binding each top-level field of a request body's working
    example to its value, with ``probability``: the fuzzer sometimes uses a real repository
    or policy version (every phase, the stateful one included) and otherwise generates."""
    dictionaries: dict[str, Any] = {}
    operations = []
    for path, ops in schema.get("paths", {}).items():
        for method, op in ops.items():
            content = (op.get("requestBody") or {}).get("content", {}).get("application/json", {})
            value = (content.get("examples") or {}).get("working", {}).get("value")
            if not isinstance(value, dict):
                continue
            parameters = {}
            for field, entry in value.items():
                if isinstance(entry, (str, int, float)) and not isinstance(entry, bool):
                    name = f"{method}{path}.{field}".replace("/", "_")
                    dictionaries[name] = {"values": [entry]}
                    parameters[f"body.{field}"] = {"dictionary": name,
                                                   "probability": probability}
            if parameters:
                operations.append({"include-path": path, "include-method": method.upper(),
                                   "parameters": parameters})
    return {"dictionaries": dictionaries, "operations": operations}


def _operation(case: Any) -> str:
    return f"{case.operation.method.upper()} {case.operation.path}"


def _count(recorder: Any, phase: str, by_phase: Counter[str], by_operation: Counter[str],
           statuses: dict[str, Counter[str]], failures: Counter[str],
           unexpressible: Counter[str], checks_run: Counter[str],
           links: Counter[str], links_ok: Counter[str], examples: list[dict[str, Any]],
           keep: int, unanswered: list[dict[str, Any]] | None = None) -> None:
    for case_id, node in recorder.cases.items():
        interaction = recorder.interactions.get(case_id)
        if interaction is None:  # never sent (a shrinking step that reused a response)
            continue
        case = node.value
        op = _operation(case)
        by_phase[phase] += 1
        by_operation[op] += 1
        response = interaction.response
        status = str(response.status_code) if response is not None else "no answer"
        statuses[op][status] += 1
        if response is None and unanswered is not None and len(unanswered) < keep:
            # a request the server did not answer in time: kept whole, to be replayed
            unanswered.append({"phase": phase, "operation": op, "body": case.body,
                               "query": getattr(case, "query", None),
                               "headers": dict(getattr(case, "headers", None) or {})})
        if node.transition is not None and node.parent_id in recorder.cases:
            name = str(node.transition.id)
            links[name] += 1
            if response is not None and response.status_code not in (400, 404):
                links_ok[f"{name} [{status}]"] += 1
        for check in recorder.checks.get(case_id, []):
            checks_run[check.name] += 1
            if check.status.value == "failure":
                known = UNEXPRESSIBLE.get((check.name, op))
                if known and response is not None and known in response.text:
                    unexpressible[f"{check.name} {op}: {known}"] += 1
                    continue
                failures[check.name] += 1
                if len(examples) < keep:
                    failure = check.failure_info.failure if check.failure_info else None
                    examples.append({
                        "check": check.name, "phase": phase, "operation": op,
                        "status": status,
                        "title": getattr(failure, "title", None),
                        "message": (getattr(failure, "message", "") or "")[:400],
                        "body": repr(case.body)[:300],
                        "answer": (response.text[:300] if response is not None else None)})

