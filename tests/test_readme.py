"""The README cannot drift: every shell and Python block in it runs against a live server
(`complement serve` on the default config, a fake OpenAI-compatible provider standing in
for OpenAI), unless a `<!-- readme-test: skip (why) -->` line right above it says why not."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from router.demo_provider import DemoProvider
from tests.conftest import free_port
from tests.fakes.fake_frontier import FakeFrontier

REPO = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(?P<skip><!-- readme-test: skip \((?P<why>[^)]*)\) -->\n)?"
                   r"```(?P<lang>bash|python)\n(?P<code>.*?)```", re.S)


def blocks() -> list[tuple[str, str, str | None, int]]:
    text = (REPO / "README.md").read_text()
    return [(m["lang"], m["code"], m["why"], text.count("\n", 0, m.start()) + 1)
            for m in BLOCK.finditer(text)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    for tool in ("curl", "jq", "bash"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed: the README's shell blocks use it")
    fake = FakeFrontier().start()
    demo = DemoProvider(default="demo").start()  # as `complement demo-provider` serves it
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("COMPLEMENT_API_KEY", "ANTHROPIC_API_KEY", "COMPLEMENT_TAB_COLLECT")}
    env.pop("COMPLEMENT_EMBEDDER", None)  # the default, shipped embedder
    # the README's first command serves with COMPLEMENT_REPOS=$PWD, this checkout
    env.update(COMPLEMENT_REPOS=str(REPO),
               COMPLEMENT_DATA_DIR=str(tmp_path_factory.mktemp("readme-data")),
               OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake.url, PYTHONPATH=str(REPO),
               COMPLEMENT_DEMO_URL=demo.url,
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    log = tmp_path_factory.mktemp("readme-log") / "server.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--port",
                                 str(port)], cwd=REPO, env=env, stdout=fh,
                                stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
        yield base, env
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        fake.stop()
        demo.stop()


def test_the_readme_has_runnable_blocks_and_says_why_for_the_rest() -> None:
    found = blocks()
    runnable = [b for b in found if b[2] is None]
    assert len(runnable) >= 4, "the README lost its examples"
    assert all(why.strip() for _, _, why, _ in found if why is not None)


@pytest.mark.parametrize("lang,code,why,line", blocks(),
                         ids=[f"README.md:{b[3]}" for b in blocks()])
def test_readme_block_runs(server: tuple[str, dict[str, str]], lang: str, code: str,
                           why: str | None, line: int) -> None:
    if why is not None:
        pytest.skip(f"README.md:{line}: {why}")
    base, env = server
    port = base.rsplit(":", 1)[1]
    code = code.replace("localhost:8000", f"127.0.0.1:{port}").replace("127.0.0.1:8000",
                                                                       f"127.0.0.1:{port}")
    command = (["bash", "-euo", "pipefail", "-c", code] if lang == "bash"
               else [sys.executable, "-c", code])
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, (f"README.md:{line} failed ({done.returncode}):\n"
                                  f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    assert "Traceback" not in done.stderr
    assert '"error"' not in done.stdout or "showed no suggestion" in done.stdout, done.stdout


def _fenced(lang: str, text: str | None = None) -> list[tuple[str, int]]:
    """The README's (or ``text``'s) fenced blocks whose info string is ``lang`` ("" for
    plain ones)."""
    out, current, start, body = [], None, 0, []  # type: ignore[var-annotated]
    text = (REPO / "README.md").read_text() if text is None else text
    for number, line in enumerate(text.splitlines(), 1):
        if current is None and line.startswith("```"):
            current, start, body = line[3:].strip(), number, []
        elif current is not None and line.strip() == "```":
            if current == lang:
                out.append(("\n".join(body) + "\n", start))
            current = None
        elif current is not None:
            body.append(line)
    return out


def test_readme_config_snippets_are_valid_config() -> None:
    """Each YAML block, laid over the default config, passes the config's validation; a
    population of simulated people (``people:``, issue 35) passes the population's."""
    import yaml

    from router.config import parse_config
    from specialists.tab.users import parse_population

    default = yaml.safe_load((REPO / "configs" / "default.yaml").read_text())
    snippets = _fenced("yaml")
    assert snippets
    for code, line in snippets:
        fragment = yaml.safe_load(code)
        if "people" in fragment:
            parse_population(fragment, where=f"README.md:{line}")
            continue
        merged = dict(default)
        for key, value in fragment.items():
            base = merged.get(key)
            merged[key] = {**base, **value} if isinstance(base, dict) and isinstance(
                value, dict) else value
        parse_config(merged, source=f"README.md:{line}", env={})


def test_readme_json_examples_parse() -> None:
    for code, line in _fenced("json"):
        json.loads(code), f"README.md:{line}"


def test_readme_command_list_names_real_commands() -> None:
    from router.cli import build_parser

    parser = build_parser()
    known = set(next(a for a in parser._actions if a.dest == "command").choices)
    listed = [ln.split()[1] for code, _ in _fenced("") for ln in code.splitlines()
              if ln.startswith("complement ")]
    assert listed and set(listed) <= known, set(listed) - known


def test_the_first_tab_example_answers_as_documented(server: tuple[str, dict[str, str]]) -> None:
    """The README's first Tab request, sent as written, gives the documented suggestion
    (about seven times in ten: the policy samples), and nothing else is ever shown."""
    text = (REPO / "README.md").read_text()
    first = text[text.index("## The first ten minutes"):]
    curl = next(code for code, _ in _fenced("bash", first) if "/v1/tab" in code)
    request = json.loads(curl.split("-d '", 1)[1].split("'", 1)[0])
    documented = json.loads(next(code for code, _ in _fenced("json", first)).replace(
        '"5549…"', '"x"'))
    base, _ = server
    answers = [httpx.post(f"{base}/v1/tab", json=request, timeout=30).json() for _ in range(30)]
    shown = [a["suggestion"] for a in answers if a["suggestion"] is not None]
    assert shown and all(s == documented["suggestion"] for s in shown), shown
    assert 0.4 <= len(shown) / len(answers) <= 0.95, len(shown)
    assert all(a["reason"] == "policy chose not to show" for a in answers if not a["suggestion"])
    assert {a["policy_version"] for a in answers} == {documented["policy_version"]}
    why = httpx.post(f"{base}/v1/tab", json={**request, "explain": True}, timeout=30).json()
    assert why["explain"]["n_candidates"] >= 1
    assert any(t["shows"] and t["shows"]["text"] == "urn" for t in why["explain"]["top_actions"])



def test_the_first_ten_minutes_followed_literally_show_accept_and_count_it(
        server: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    """Issue 40: from the README's first ten minutes, run as written and in order, a Tab
    suggestion is shown, accepted, and the accept is in ``complement loop status``."""
    base, env = server
    port = base.rsplit(":", 1)[1]
    text = (REPO / "README.md").read_text()
    section = text[text.index("## The first ten minutes"):text.index("## The API")]
    script = "\n".join(code for code, _ in _fenced("bash", section))
    script = script.replace("localhost:8000", f"127.0.0.1:{port}")
    tab_json = tmp_path / "tab.json"  # not /tmp/tab.json: tests may run side by side
    script = script.replace("/tmp/tab.json", str(tab_json))
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(tab_json.read_text())
    assert answer["suggestion"] is not None, answer  # shown, within the loop's five tries
    assert '"status": "recorded"' in done.stdout or '"status":"recorded"' in done.stdout, \
        done.stdout[-2000:]
    # the last block's last output: jq's {deployed, events_per_version}, pretty-printed
    status = json.loads(done.stdout[done.stdout.rindex('{\n  "deployed"'):])
    deployed = [v for v in status["events_per_version"]
                if str(v["version"]) == str(status["deployed"])]
    assert deployed and deployed[0]["accepted"] >= 1, status
