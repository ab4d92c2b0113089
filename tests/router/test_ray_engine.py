"""``complement serve --engine ray`` (issue 18): the API suite of ``test_api.py`` against a
server on Ray Serve, the specialists' endpoints against the single process, a Tab hot
swap reaching both Tab replicas, and a Tab replica killed mid-burst.

One server for the module (a local Ray cluster takes ~15-30 s to start): the command a
user runs, as a subprocess, on the suite's own config plus Tab (2 replicas), apply and
retrieval. Skipped without the ``[ray]`` extra.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
import yaml

pytest.importorskip("ray.serve")

from router.app import create_app  # noqa: E402
from router.config import parse_config  # noqa: E402
from tests.conftest import free_port, running  # noqa: E402
from tests.fakes.fake_frontier import FakeFrontier  # noqa: E402

# The API suite, collected here again with ``base`` and ``fake`` below: the Ray server's.
# test_api_keys and test_non_loopback_without_keys_is_refused stay single-process only
# (they need a second server with other keys; the guard is the same app code).
from tests.router.test_api import (  # noqa: E402, F401
    config_data,
    test_bad_input_gets_openai_error_shape,
    test_body_over_limit_is_413,
    test_budget_skips_targets_that_could_overspend,
    test_cascade_escalates_on_abstain_and_verifier,
    test_fallback_to_second_model,
    test_mid_stream_break_is_reported_in_band,
    test_models_health_ready_metrics,
    test_route_without_key_answers_503_naming_the_variable,
    test_sdk_completion_carries_route_model_cost_latency,
    test_streaming_falls_back_before_first_byte,
    test_streaming_passes_through_intact,
)

REPO = Path(__file__).resolve().parents[2]
APP = "complement"
TAB_TEXT = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    ret"


def _config(fake: FakeFrontier, tmp: Path) -> dict[str, Any]:
    data = config_data(fake, tmp / "data")
    (tmp / "repos" / "proj").mkdir(parents=True)
    (tmp / "repos" / "proj" / "calc.py").write_text(
        "def add(a, b):\n    \"\"\"Sum of two numbers.\"\"\"\n    return a + b\n\n\n"
        "def shout(text):\n    \"\"\"Upper-case a greeting.\"\"\"\n    return text.upper()\n")
    data["specialists"].update({
        "tab": {"class": "specialists.tab:TabSpecialist",
                "options": {"sample": True, "log_features": True}},
        "apply": {"class": "specialists.apply.specialist:ApplySpecialist"},
        "retrieval": {"class": "retrieval.specialist:RetrievalSpecialist",
                      "options": {"allowed_root": str(tmp / "repos"), "embedder": "static",
                                  "index_dir": str(tmp / "data" / "indexes")}}})
    data["specialists"]["sleeper"] = {"class": "tests.router.swap_specialists:Sleeper",
                                      "options": {"seconds": 3.0,
                                                  "mark": str(tmp / "sleeper-started")}}
    data["routes"]["slow"] = {"targets": ["sleeper"]}
    data["engine"] = {"ray": {"num_cpus": 4, "app_name": APP,
                              "deployments": {"tab": {"num_replicas": 2}}}}
    return data


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "RAY_ADDRESS")}
    env.update(PYTHONPATH=str(REPO), LITELLM_LOCAL_MODEL_COST_MAP="True",
               LITELLM_OFFLINE_MODE="true", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    return env


@pytest.fixture(scope="module")
def ray_fake() -> Iterator[FakeFrontier]:
    server = FakeFrontier().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def ray_server(ray_fake: FakeFrontier, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("ray-engine")
    data = _config(ray_fake, tmp)
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    port = free_port()
    log_path = tmp / "serve.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--engine", "ray",
                                 "--config", str(path), "--port", str(port),
                                 "--log-level", "warning"],
                                cwd=tmp, env=_env(), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, log_path)
        yield {"url": url, "proc": proc, "tmp": tmp, "data": data}
    finally:  # the command alone: it takes its local cluster down
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def _wait_ready(url: str, proc: subprocess.Popen | None, log_path: Path,
                timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the Ray server exited with {proc.returncode}:\n"
                        + log_path.read_text(errors="replace")[-3000:])
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    tail = log_path.read_text(errors="replace")[-3000:] if log_path.exists() else ""
    pytest.fail(f"the server at {url} was not ready in time:\n{tail}")


@pytest.fixture
def base(ray_server: dict[str, Any]) -> str:
    return str(ray_server["url"])


@pytest.fixture
def fake(ray_fake: FakeFrontier, ray_server: dict[str, Any]) -> FakeFrontier:
    with ray_fake.lock:
        ray_fake.script.clear()  # what an earlier test pushed and did not use
    return ray_fake


# -- the specialists' endpoints: the same answers as the single process ------------------
REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("/v1/tab", {"file": TAB_TEXT, "cursor": len(TAB_TEXT), "language": "python"}),
    ("/v1/tab", {"file": "", "cursor": 0}),
    ("/v1/tab", {"file": "x", "cursor": 5}),
    ("/v1/apply", {"original": "a = 1\nb = 2\n", "sketch": "a = 1\nb = 3\n"}),
    ("/v1/apply", {"original": "a = 1\n"}),
    ("/v1/index", {"path": "proj"}),
    ("/v1/index", {"path": "../outside"}),
    ("/v1/retrieve", {"query": "upper-case a greeting", "k": 2, "repo": "proj",
                      "mode": "bm25"}),
    ("/v1/retrieve", {"query": "x", "repo": "never-indexed"}),
    ("/v1/feedback", {"request_id": "no-such-request", "outcome": "accepted"}),
]
VOLATILE = {"request_id", "latency_ms", "seconds", "took_s", "elapsed_s", "built_at",
            "indexed_at"}


def _shape(value: Any) -> Any:
    """A body with what varies per call (ids, timings, Tab's sampled choice) taken out."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return value


def _exchange(url: str, root: Path) -> list[tuple[int, set[str], str, Any]]:
    """Each request's status, headers, model class and body (its temporary root named
    ``<root>``: the two servers have their own)."""
    out = []
    with httpx.Client(base_url=url, timeout=120) as client:
        for path, body in REQUESTS:
            r = client.post(path, json=body)
            headers = {h for h in r.headers if h.startswith("x-complement-")}
            payload = json.loads(r.text.replace(str(root), "<root>"))
            if path == "/v1/tab" and r.status_code == 200:  # sampled: compare the keys
                payload = sorted(payload)
            out.append((r.status_code, headers, r.headers["x-complement-model"].split("@")[0],
                        _shape(payload)))
    return out


def _listening(root: int) -> dict[str, set[str]]:
    """What the processes under ``root`` (the command and its local cluster) listen on:
    each address -> the process names, from /proc (no tool needed)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    pids, todo = set(), [root]
    while todo:
        pid = todo.pop()
        pids.add(pid)
        todo.extend(children.get(pid, []))
    owner: dict[str, str] = {}
    for pid in pids:
        try:
            name = Path(f"/proc/{pid}/cmdline").read_text(errors="replace").split("\0")[0]
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    owner[link[8:-1]] = name
        except OSError:
            continue
    found: dict[str, set[str]] = {}
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in owner:  # LISTEN, one of ours
                continue
            raw = bytes.fromhex(fields[1].split(":")[0])
            words = [raw[i:i + 4][::-1] for i in range(0, len(raw), 4)]  # host order
            address = ipaddress.ip_address(b"".join(words))
            if getattr(address, "ipv4_mapped", None):
                address = address.ipv4_mapped
            found.setdefault(str(address), set()).add(owner[fields[9]])
    return found


def test_the_local_cluster_listens_on_loopback_only(ray_server: dict[str, Any]) -> None:
    """issue 41: Ray's processes (GCS, raylet, agents, the dashboard's head process,
    workers) listened on every interface; a local cluster is this machine's alone. One
    exception Ray leaves no way around: Serve 2.60 binds each replica's inter-deployment
    gRPC server to ``[::]:0`` in code (``ray/serve/_private/replica.py``); README says so."""
    found = _listening(ray_server["proc"].pid)
    assert "127.0.0.1" in found, found  # the cluster's own ports, Serve's HTTP proxy among them
    outside = {a: names for a, names in found.items() if not ipaddress.ip_address(a).is_loopback}
    replicas_only = {a: {n for n in names if not n.startswith("ray::ServeReplica:")}
                     for a, names in outside.items()}
    assert not any(replicas_only.values()), outside
    assert set(outside) <= {"::", "0.0.0.0"}, outside


def test_specialist_endpoints_answer_as_the_single_process_does(
        ray_server: dict[str, Any], ray_fake: FakeFrontier, tmp_path: Path) -> None:
    data = _config(ray_fake, tmp_path)
    data["data_dir"] = str(tmp_path / "data")
    with running(create_app(parse_config(data, env={}))) as single:
        _wait_ready(single, None, tmp_path / "no-log")  # the embedder loads in the background
        expected = _exchange(single, tmp_path)
    got = _exchange(ray_server["url"], ray_server["tmp"])
    for (path, _), want, have in zip(REQUESTS, expected, got):
        assert have == want, path
    statuses = [status for status, *_ in got]
    assert statuses == [200, 200, 400, 200, 400, 200, 403, 200, 404, 404]
    retrieved = got[7][3]["results"]
    assert retrieved[0]["path"].endswith("calc.py") and "shout" in retrieved[0]["symbol"]
    metrics = httpx.get(f"{ray_server['url']}/metrics").text
    assert 'route="tab",status="200"' in metrics and 'route="apply",status="400"' in metrics


def _tab(client: httpx.Client) -> httpx.Response:
    return client.post("/v1/tab", json={"file": TAB_TEXT, "cursor": len(TAB_TEXT)})


def test_hot_swap_reaches_every_tab_replica(ray_server: dict[str, Any]) -> None:
    from specialists.tab.loop.versions import PolicyStore
    from specialists.tab.policy import TabPolicy

    url, tmp = ray_server["url"], ray_server["tmp"]
    store = PolicyStore(tmp / "data" / "tab")
    v = store.deployed()
    assert v is not None  # a Tab replica published the shipped policy on the first start
    policy = TabPolicy.load(store.path(v))
    policy.version = v + 7
    policy.save(tmp / "next-policy")
    store.publish(tmp / "next-policy", v + 7, {"parent": v})

    deployed = httpx.post(f"{url}/v1/tab/deploy", json={"version": v + 7}, timeout=120).json()
    assert deployed["deployed"] == v + 7 and deployed["previous"] == v
    replicas = {r["replica"] for r in deployed["replicas"]}
    assert len(replicas) == 2  # both Tab replicas switched, each with its time
    assert all(r["switched_at"] > 0 for r in deployed["replicas"])
    with httpx.Client(base_url=url, timeout=60) as client:
        versions = Counter(_tab(client).json()["policy_version"] for _ in range(40))
    assert versions == Counter({v + 7: 40})
    log = httpx.get(f"{url}/v1/tab/versions").json()
    assert log["deployed"] == v + 7
    assert {r["replica"] for r in log["deploys"][0]["replicas"]} == replicas


def _replica_pids(root: int, deployment: str = "specialist-tab") -> list[int]:
    """A deployment's replica processes among ``root``'s descendants (the local cluster's)."""
    from router.ray_serve import replica_pids

    return replica_pids(root, deployment, APP)


def test_tab_replica_killed_mid_burst_is_replaced_and_requests_retried(
        ray_server: dict[str, Any]) -> None:
    url, proc = ray_server["url"], ray_server["proc"]
    before = _replica_pids(proc.pid)
    assert len(before) == 2, before
    deployed = httpx.get(f"{url}/v1/tab/versions").json()["deployed"]
    codes: Counter[int] = Counter()
    versions: Counter[Any] = Counter()
    stop = threading.Event()

    def editor() -> None:
        with httpx.Client(base_url=url, timeout=60) as client:
            while not stop.is_set():
                r = _tab(client)
                codes[r.status_code] += 1
                if r.status_code == 200:
                    versions[r.json()["policy_version"]] += 1

    threads = [threading.Thread(target=editor) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    os.kill(before[0], signal.SIGKILL)
    time.sleep(4.0)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert codes[200] > 20 and set(codes) == {200}, codes
    assert set(versions) == {deployed}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        after = _replica_pids(proc.pid)
        if len(after) == 2 and before[0] not in after:
            break
        time.sleep(0.5)
    assert len(after) == 2 and before[0] not in after, after
    # the replacement serves the deployed policy too: every answer from here on is it
    with httpx.Client(base_url=url, timeout=60) as client:
        assert {_tab(client).json()["policy_version"] for _ in range(40)} == {deployed}
    ready = httpx.get(f"{url}/readyz").json()
    assert ready["status"] == "ready"
    print("calls retried after the kill:", ready["specialists"]["tab"]["calls_retried"])


def test_a_call_in_flight_when_its_replica_dies_is_sent_again(
        ray_server: dict[str, Any]) -> None:
    """The sleeper's one replica is killed in the middle of a 3 s answer: the ingress sends
    the call again, Serve holds it until the replacement is up, and the client gets its 200."""
    url, proc = ray_server["url"], ray_server["proc"]
    before = _replica_pids(proc.pid, "specialist-sleeper")
    assert len(before) == 1, before
    mark = ray_server["tmp"] / "sleeper-started"
    mark.unlink(missing_ok=True)
    answer: dict[str, Any] = {}

    def ask() -> None:
        r = httpx.post(f"{url}/v1/chat/completions", timeout=180, json={
            "model": "slow", "messages": [{"role": "user", "content": "wake up"}]})
        answer.update(status=r.status_code, body=r.json())

    thread = threading.Thread(target=ask)
    thread.start()
    deadline = time.monotonic() + 60
    while not (mark.exists() and mark.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)  # until the call is in the replica's hands
    assert mark.read_text() == str(before[0])
    time.sleep(0.3)
    os.kill(before[0], signal.SIGKILL)
    thread.join(timeout=180)
    assert answer["status"] == 200, answer
    text = answer["body"]["choices"][0]["message"]["content"]
    assert text.startswith("slept in ") and text != f"slept in {before[0]}"
    after = _replica_pids(proc.pid, "specialist-sleeper")
    assert int(text.split()[-1]) in after  # the replacement answered
    ready = httpx.get(f"{url}/readyz").json()["specialists"]["sleeper"]
    assert ready["calls_retried"] >= 1
