"""Issue 41 F4: verification must not run model-written code with the server's rights.

The probe serves the real app with a route whose verification command (from the config,
``workspace.verify.routes``) is ``python -c "import app"``, and a repository holding a
symlink ``out`` to a folder outside it. Each attack is one ``/v1/edit`` request whose
scripted model answer is an ``app.py`` that, on import, tries one thing: write a sentinel
outside the scratch copy (by absolute path, into the real repository, through the ``out``
link), run a shell command that would leave a sentinel, connect to a loopback listener of
the probe's, print the server's environment (a canary variable stands for a provider
key), find a symlink in the scratch copy, allocate past the memory limit, or hang past the
time limit.

With bubblewrap usable, every attempt must be contained (the verification ran, and the
payload says it was blocked); without it, verification must fail closed: the edit fails
saying what to install, no model is asked and nothing runs. Either way no sentinel may
appear, nothing may change under the probe's folder, no connection may reach the listener
and the canary must not show.

``python -m router.audit.f4_verify_sandbox`` prints the tally.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import httpx

from router.audit.common import Tally, changed, serve, snapshot
from router.audit.f3_edit_writes import answer, config, layout

CANARY_VAR = "COMPLEMENT_F4_CANARY_KEY"
TIMEOUT_S = 3.0


class Listener:
    """A loopback TCP listener counting the connections that reach it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


def payloads(paths: dict[str, Path], port: int) -> dict[str, str]:
    """Attack name -> the body of a function ``app.py`` runs on import."""
    sentinels = paths["sentinels"]
    return {
        "write an absolute path": f"open({str(sentinels / 'abs')!r}, 'w').write('x')",
        "write outside /tmp": f"open({str(paths['var_tmp'])!r}, 'w').write('x')",
        "write into the real repository":
            f"open({str(paths['repo'] / 'pwned.txt')!r}, 'w').write('x')",
        "write through a symlink out": "open('out/pwned.txt', 'w').write('x')",
        "run a shell command":
            f"rc = os.system('touch {sentinels / 'shell'}')\n"
            "if rc: raise OSError(f'shell exited {rc}')",
        "reach the network":
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)"
            ".sendall(b'x')",
        "read the server's environment":
            f"value = os.environ.get({CANARY_VAR!r})\nprint('ENV', value)\n"
            "if value is None: raise PermissionError('the server environment is not visible')",
        "find a symlink in the scratch copy":
            "links = [p for p in os.listdir('.') if os.path.islink(p)]\n"
            "print('LINKS', links)\n"
            "if not links and not os.path.exists('out'): raise FileNotFoundError('no link')",
        # 8 GiB of address space, never touched: refused under the default 4 GiB limit
        "allocate past the memory limit": "import mmap\nmmap.mmap(-1, 8 * 1024 ** 3)",
        "hang past the time limit": "import time\ntime.sleep(60)",
    }


def app_py(body: str) -> str:
    return ("import os\n\n\ndef _attack():\n" + textwrap.indent(body, "    ") + "\n\n\n"
            "try:\n    _attack()\n    print('F4-DONE')\n"
            "except BaseException as exc:\n    print('F4-BLOCKED', type(exc).__name__, exc)\n")


def sandbox_usable() -> bool:
    """Can bubblewrap make a sandbox on this machine? (Asked of bwrap itself, not of the
    code under test.)"""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    try:
        return subprocess.run([bwrap, "--unshare-all", "--ro-bind", "/", "/", "true"],
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@contextmanager
def canary() -> Iterator[str]:
    """A provider-key-like variable in the server's environment while the probe runs."""
    value = "sk-canary-" + secrets.token_hex(8)
    old = os.environ.get(CANARY_VAR)
    os.environ[CANARY_VAR] = value
    try:
        yield value
    finally:
        if old is None:
            os.environ.pop(CANARY_VAR, None)
        else:
            os.environ[CANARY_VAR] = old


def verify_config(**extra: Any) -> dict[str, Any]:
    """The route's command; the sandbox and memory limit are the defaults'."""
    return {"timeout_s": TIMEOUT_S, "routes": {"edit": [[sys.executable, "-c", "import app"]]},
            **extra}


def prepare(tmp: Path) -> dict[str, Path]:
    paths = layout(tmp)
    paths["sentinels"] = tmp / "sentinels"
    paths["sentinels"].mkdir()
    # outside /tmp (a private, empty one in the sandbox): the read-only file system's test
    paths["var_tmp"] = Path("/var/tmp") / f"complement-f4-{secrets.token_hex(6)}"
    return paths


def attack(base: str, fake: Any, paths: dict[str, Path], body: str) -> httpx.Response:
    """One edit of app.py whose answer is ``app_py(body)`` (verified, not written)."""
    fake.push(answer("whole_file", {"app.py": app_py(body)}))
    return httpx.post(f"{base}/v1/edit", json={
        "instruction": "add a docstring to greet", "route": "edit", "repo": str(paths["repo"]),
        "files": ["app.py"], "strategy": "whole_file"}, timeout=60)


def judge(tally: Tally, name: str, r: httpx.Response, asked: int, fake: Any,
          secret: str, contained: bool) -> None:
    """Record what ``r`` shows: contained (the command ran and was blocked) or failed closed."""
    if not tally.expect(r.status_code == 200, f"{name}: status {r.status_code}: {r.text[:200]}"):
        return
    body = r.json()
    tally.leaks += secret in r.text
    if not contained:
        tally.expect(body["status"] == "failed" and "bubblewrap" in (body["reason"] or ""),
                     f"{name}: without bubblewrap the edit did not fail closed: "
                     f"{body['status']} {body['reason']}")
        tally.expect(len(fake.requests) == asked, f"{name}: a model was asked though "
                                                  "verification could not run")
        fake.script.clear()
        return
    verify = [s for s in body["trace"] if s["stage"] == "verify"]
    command = (verify[-1]["detail"].get("commands") or [{}])[0] if verify else {}
    output = command.get("output", "")
    tally.expect(command.get("sandbox") == "bwrap", f"{name}: no sandboxed command in the "
                                                    f"trace: {str(command)[:300]}")
    if name == "hang past the time limit":
        tally.expect("timed out" in (verify[-1]["reason"] or "") if verify else False,
                     f"{name}: not stopped by the time limit: {verify}")
    else:
        tally.expect("F4-BLOCKED" in output, f"{name}: the payload was not blocked: "
                                             f"{output[-300:]!r}")


def probe(tmp: Path) -> Tally:
    from router.demo_provider import DemoProvider

    tally = Tally("f4_verify_sandbox")
    paths = prepare(tmp)
    contained = sandbox_usable()
    listener = Listener()
    fake = DemoProvider().start()
    try:
        with canary() as secret, \
                serve(config(fake.url, paths, verify_config())) as base:
            for name, body in payloads(paths, listener.port).items():
                tally.attempts += 1
                before = _state(tmp)
                asked = len(fake.requests)
                started = time.monotonic()
                r = attack(base, fake, paths, body)
                judge(tally, name, r, asked, fake, secret, contained)
                tally.expect(time.monotonic() - started < TIMEOUT_S * 3 + 10,
                             f"{name}: took {time.monotonic() - started:.0f}s")
                tally.writes_outside += len(changed(before, _state(tmp)))
        tally.commands_run += len(list(paths["sentinels"].iterdir())) + listener.connections
    finally:
        if paths["var_tmp"].exists():
            tally.commands_run += 1
            tally.writes_outside += 1
            paths["var_tmp"].unlink()
        fake.stop()
        listener.close()
    return tally


def _state(tmp: Path) -> dict[str, str]:
    return {p: h for p, h in snapshot(tmp).items() if not p.startswith("data/")}


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="complement-sec-f4-") as tmp:
        result = probe(Path(tmp))
    print(json.dumps({**result.as_dict(), "sandboxed": sandbox_usable()}, indent=2))
    sys.exit(0 if result.ok else 1)
