"""The README cannot drift: every shell and Python block in it runs against a live server
(`complement serve` on the default config, a fake OpenAI-compatible provider standing in
for OpenAI), unless a `<!-- readme-test: skip (why) -->` line right above it says why not."""

from __future__ import annotations

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
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("COMPLEMENT_API_KEY", "ANTHROPIC_API_KEY", "COMPLEMENT_TAB_COLLECT")}
    env.pop("COMPLEMENT_EMBEDDER", None)  # the default, shipped embedder
    env.update(COMPLEMENT_DATA_DIR=str(tmp_path_factory.mktemp("readme-data")),
               OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake.url, PYTHONPATH=str(REPO),
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
