"""The sandbox a verification command runs in: model-written code, so never with the
server's rights.

With ``sandbox: bwrap`` (the default) a command runs under bubblewrap in new user, mount,
PID, network, IPC and UTS namespaces with every capability dropped:

* the whole file system is mounted read-only, except the scratch copy (read-write) and a
  private, empty ``/tmp`` and ``/run`` (so the server's own temporary files and the
  sockets under ``/run`` are out of sight); the paths in ``hide`` (by default the usual
  credential folders of the server's home) are replaced by empty ones;
* no network: only a loopback interface of its own, so nothing on the host, loopback
  included, and nothing beyond it can be reached;
* a clean environment: ``PATH``, ``LANG``/``LC_ALL``, ``HOME=/tmp``, ``TMPDIR=/tmp`` and
  only the server variables ``pass_env`` names (provider keys never reach the command);
* limits: address space (``memory_mb``, ``RLIMIT_AS``), CPU seconds (the timeout) and the
  wall-clock timeout, past which the whole sandbox is killed.

It is not a read jail: the command can read what the server's user can read outside the
hidden paths, and what it prints lands in the trace. It does not limit disk use inside the
scratch copy, nor the number of processes beyond the memory and time limits.

When bubblewrap is missing or cannot start (user namespaces off), verification fails
closed: no command runs, and the check says what to install. ``sandbox: none`` runs
commands unconfined (the environment is still cleaned and the limits still set): model-
written code then has the server's rights, so use it only for a server you alone use.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from router.config import VERIFY_HIDE

__all__ = ["DEFAULT_HIDE", "SANDBOXES", "sandbox_env", "sandbox_problem", "wrap"]

SANDBOXES = ("bwrap", "none")

DEFAULT_HIDE = VERIFY_HIDE
"""Replaced by empty ones inside the sandbox (the usual places credentials live)."""

INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: "
                "dnf install bubblewrap; Arch: pacman -S bubblewrap), or set "
                "workspace.verify.sandbox: none to run verification commands unconfined "
                "(dangerous: model-written code then runs with the server's rights)")

# Sets the limits, then becomes the sandbox (thread-safe, unlike Popen's preexec_fn).
_LIMITS = ("import os, resource, sys\n"
           "mem, cpu = int(sys.argv[1]), int(sys.argv[2])\n"
           "if mem > 0: resource.setrlimit(resource.RLIMIT_AS, (mem, mem))\n"
           "if cpu > 0: resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))\n"
           "try:\n"
           "    os.execvp(sys.argv[3], sys.argv[3:])\n"
           "except OSError as exc:\n"
           "    print(f'cannot run {sys.argv[3]!r}: {exc.strerror or exc}', file=sys.stderr)\n"
           "    sys.exit(127)\n")


def sandbox_problem(sandbox: str) -> str | None:
    """Why commands cannot run in ``sandbox`` now (what to install), or ``None``."""
    if sandbox == "none":
        return None
    if sandbox != "bwrap":
        return f"unknown sandbox {sandbox!r}; use one of {', '.join(SANDBOXES)}"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return ("verification commands run in a bubblewrap sandbox "
                "(workspace.verify.sandbox: bwrap) but bwrap is not on PATH, so no command "
                "was run: " + INSTALL_HINT)
    return _bwrap_problem(bwrap)


@lru_cache(maxsize=8)
def _bwrap_problem(bwrap: str) -> str | None:
    try:
        proc = subprocess.run([bwrap, *_ISOLATION, "--ro-bind", "/", "/", "--", "true"],
                              capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap ({bwrap}) could not start, so no command was run: {exc}"
    if proc.returncode != 0:
        return (f"bubblewrap ({bwrap}) cannot make a sandbox here, so no command was run: "
                f"{proc.stderr.strip()[-300:]} (user namespaces must be allowed: "
                "sysctl kernel.unprivileged_userns_clone=1, or run the server where they "
                "are); or set workspace.verify.sandbox: none (dangerous)")
    return None


_ISOLATION = ("--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL")


def sandbox_env(pass_env: Sequence[str] = ()) -> dict[str, str]:
    """The environment a command gets: nothing of the server's but what it names."""
    env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
           "HOME": "/tmp", "TMPDIR": "/tmp"}
    for name in ("LANG", "LC_ALL", *pass_env):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def _private_prefix(program: str) -> Path | None:
    """The install folder of ``program`` (``PREFIX/bin/program``) when it lies under
    ``/tmp`` or ``/run``, which the sandbox replaces by empty ones (a virtual environment
    made under ``/tmp``: its ``bin/python`` would be gone inside, and the command with it).
    It goes back in read-only; the rest of ``/tmp`` stays out of sight."""
    found = program if os.path.isabs(program) else shutil.which(program)
    if not found:
        return None
    path = Path(os.path.abspath(found))
    if not any(path.is_relative_to(root) for root in (Path("/tmp"), Path("/run"))):
        return None
    prefix = path.parent.parent if path.parent.name == "bin" else path.parent
    return prefix if prefix not in (Path("/tmp"), Path("/run")) else None


def wrap(argv: Sequence[str], scratch: Path, *, sandbox: str, memory_mb: int = 0,
         cpu_s: int = 0, hide: Sequence[str] = DEFAULT_HIDE) -> list[str]:
    """The argv that runs ``argv`` in ``scratch`` under ``sandbox`` with the limits set."""
    inner = list(argv)
    if sandbox == "bwrap":
        bwrap = shutil.which("bwrap") or "bwrap"
        scratch = scratch.resolve()
        inner = [bwrap, *_ISOLATION, "--ro-bind", "/", "/", "--dev", "/dev",
                 "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run"]
        for raw in hide:
            path = Path(os.path.expanduser(raw))
            if not path.is_absolute() or path.is_symlink() or not path.exists():
                continue
            if path.is_dir():
                inner += ["--tmpfs", str(path)]
            else:
                inner += ["--ro-bind", "/dev/null", str(path)]
        prefix = _private_prefix(argv[0]) if argv else None
        if prefix is not None:  # the program's install, under a folder the sandbox empties
            inner += ["--ro-bind", str(prefix), str(prefix)]
        inner += ["--bind", str(scratch), str(scratch), "--chdir", str(scratch),
                  "--", *argv]
    return [sys.executable, "-I", "-S", "-c", _LIMITS, str(memory_mb * 1024 * 1024),
            str(cpu_s), *inner]
