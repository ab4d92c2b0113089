"""Path confinement: the one place a path from a request or a model's answer is checked.

Two questions, two functions:

* ``resolve_repo(raw, roots)``: a repository directory a request names. It must lie under
  one of the configured allowed roots, lexically *and* once symlinks are resolved.
  ``/v1/index`` (through the retriever) and ``/v1/edit`` ask this same function.
* ``confine(root, raw)``: a file path relative to a repository (a request's ``files``, or a
  path a model's answer names). Refused when absolute, when it climbs with ``..``, or when
  it passes through a symlink that leaves the root.

Both raise ``ForbiddenError`` (or ``SpecialistError`` for a malformed path) and never touch
the file system beyond ``resolve``/``is_dir``.

Checking a path and then reading it is a race: a symlink swapped in between the check and
the read would be followed out of the root. So every read of a file a request names goes
through ``read_confined`` / ``ConfinedRoot``, which open each component with
``O_NOFOLLOW`` relative to the directory before it (``openat``): a link anywhere on the way,
at the moment of the open, is refused, and what is read is the file that was opened.

``unsafe_root`` says why a directory must not be an allowed root (``/``, the home
directory, or a folder holding it); the config refuses such roots at load.
"""

from __future__ import annotations

import errno
import os
import stat as stat_mod
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Iterable

from specialists.base import ForbiddenError, NotFoundError, SpecialistError

__all__ = ["ConfinedRoot", "check_relative", "confine", "expand_home", "read_confined",
           "resolve_repo", "unsafe_root", "within"]


def within(path: Path, root: Path) -> bool:
    """Is ``path`` the root itself or below it (both already absolute)?"""
    return path == root or root in path.parents


def check_relative(raw: str, *, param: str = "path", what: str = "path") -> PurePosixPath:
    """A relative path with no ``..``, no drive and no NUL, as a POSIX path; else an error."""
    if not isinstance(raw, str) or not raw.strip() or "\x00" in raw:
        raise SpecialistError(f"{what} {raw!r} is empty or invalid", param=param)
    text = raw.replace("\\", "/")
    pure = PurePosixPath(text)
    if pure.is_absolute() or PureWindowsPath(raw).drive or text.startswith("~"):
        raise ForbiddenError(f"{what} {raw!r} is absolute; name files relative to the "
                             "repository", param=param)
    if ".." in pure.parts:
        raise ForbiddenError(f"{what} {raw!r} climbs out with '..'; name files inside the "
                             "repository", param=param)
    parts = [p for p in pure.parts if p not in ("", ".")]
    if not parts:
        raise SpecialistError(f"{what} {raw!r} names no file", param=param)
    return PurePosixPath(*parts)


def confine(root: Path, raw: str, *, param: str = "path", what: str = "path") -> Path:
    """``root / raw`` resolved, refused if it is absolute, climbs out, or leaves ``root``
    through a symlink. ``root`` must already be trusted (e.g. from ``resolve_repo``)."""
    rel = check_relative(raw, param=param, what=what)
    base = root.resolve()
    full = (base / rel).resolve()
    if not within(full, base):
        raise ForbiddenError(f"{what} {raw!r} resolves outside the repository (a symlink "
                             "out of it?)", param=param)
    return full


def expand_home(raw: str, *, param: str = "repo", what: str = "repository") -> Path:
    """``raw`` with a leading ``~`` or ``~user`` expanded; a ``~name`` that is no user of this
    machine is the caller's error (``pathlib`` raises ``RuntimeError`` there)."""
    try:
        return Path(raw).expanduser()
    except RuntimeError:
        # nothing by that name exists (404), as for any other path that names nothing
        raise NotFoundError(f"{what} {raw!r} starts with '~' but no user of this machine has "
                            "that name; give the path itself", param=param) from None


def resolve_repo(raw: str, roots: Iterable[str | Path], *, param: str = "repo",
                 what: str = "repository") -> Path:
    """The directory ``raw`` names, resolved, if it lies under one of ``roots``.

    A relative ``raw`` is taken relative to the first root. ``..`` anywhere, a path outside
    every root, or a symlink that resolves outside them is a ``ForbiddenError``; a path that
    is not a directory is a ``NotFoundError``.
    """
    roots = list(roots)
    allowed = [Path(r).expanduser().resolve() for r in roots]
    if not allowed:
        raise ForbiddenError(f"no allowed roots are configured, so no {what} may be used; "
                             "set COMPLEMENT_REPOS to the folder your repositories live "
                             "under (the default config reads it), or list the directories "
                             "in the config (workspace.allowed_roots, or the retriever's "
                             "allowed_root)", param=param)
    if not isinstance(raw, str) or not raw.strip() or "\x00" in raw:
        raise SpecialistError(f"{what} path is empty or invalid", param=param)
    candidate = expand_home(raw, param=param, what=what)
    if ".." in candidate.parts:
        raise ForbiddenError(f"{what} {raw!r} contains '..'", param=param)
    if not candidate.is_absolute():
        candidate = allowed[0] / candidate
    resolved = candidate.resolve()
    if not any(within(resolved, root) for root in allowed):
        lexical_roots = allowed + [Path(r).expanduser().absolute() for r in roots]
        inside = any(within(candidate, root) for root in lexical_roots)
        raise ForbiddenError(
            f"{what} {raw!r} resolves outside the allowed roots (a symlink out?)" if inside
            else f"{what} {raw!r} is outside the allowed roots "
                 f"({', '.join(map(str, allowed))})", param=param)
    try:
        is_dir = resolved.is_dir()
    except OSError as exc:  # e.g. a name longer than the file system allows
        shown = raw if len(raw) <= 200 else raw[:200] + "..."
        raise NotFoundError(f"{what} {shown!r} cannot be used: {exc.strerror or exc}",
                            param=param) from None
    if not is_dir:
        raise NotFoundError(f"no directory at {raw!r}", param=param)
    return resolved



# -- reading without following links ------------------------------------------------------
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | \
    getattr(os, "O_CLOEXEC", 0)
# directories only passed through: O_PATH (Linux) needs no read permission on them, only
# search, as a plain path lookup does; the root itself is opened readable (it is listed)
_PASS_FLAGS = _DIR_FLAGS | getattr(os, "O_PATH", 0)
# O_NONBLOCK: a FIFO swapped in must not hang the open; fstat then refuses it
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | \
    getattr(os, "O_NONBLOCK", 0)
_SAFE = hasattr(os, "O_NOFOLLOW") and os.open in os.supports_dir_fd


def _open_at(name: str, flags: int, dir_fd: int | None, shown: str, param: str,
             what: str) -> int:
    """``openat(dir_fd, name, flags)``; a link there is a ``ForbiddenError``."""
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            try:
                is_link = stat_mod.S_ISLNK(os.stat(name, dir_fd=dir_fd,
                                                   follow_symlinks=False).st_mode)
            except OSError:
                is_link = False
            if is_link or exc.errno == errno.ELOOP:
                raise ForbiddenError(f"{what} {shown!r} passes through a symbolic link "
                                     f"({name!r}); links are not followed when reading, so "
                                     "name the file itself", param=param) from None
        raise


class ConfinedRoot:
    """A directory opened once, without a symlink at any component of its resolved path,
    to read files below it the same way (``read``/``fetch``). Use as a context manager or
    ``close()`` it. POSIX only; elsewhere it falls back to ``confine`` and a stat check."""

    def __init__(self, root: str | Path, *, param: str = "path", what: str = "path") -> None:
        self.root = Path(root).resolve()
        self.fd: int | None = None
        if not _SAFE:
            return
        parts = self.root.parts[1:]
        fd = os.open("/", _PASS_FLAGS if parts else _DIR_FLAGS)
        try:
            for n, part in enumerate(parts, 1):
                flags = _DIR_FLAGS if n == len(parts) else _PASS_FLAGS
                nxt = _open_at(part, flags, fd, str(self.root), param, what)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "ConfinedRoot":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self, raw: str, *, param: str = "path", what: str = "path") -> int:
        """A file descriptor of the regular file ``raw`` names (relative, no ``..``), opened
        with no link followed on the way. ``ForbiddenError`` for a link, ``SpecialistError``
        for something that is not a regular file; a missing one is ``FileNotFoundError``."""
        rel = check_relative(raw, param=param, what=what)
        if self.fd is None:  # no openat/O_NOFOLLOW here: check, open, check it is the same
            full = confine(self.root, raw, param=param, what=what)
            if Path(self.root, rel).is_symlink():
                raise ForbiddenError(f"{what} {raw!r} is a symbolic link; links are not "
                                     "followed when reading", param=param)
            fd = os.open(full, os.O_RDONLY)
            if not os.path.samestat(os.fstat(fd), os.stat(full, follow_symlinks=False)):
                os.close(fd)
                raise ForbiddenError(f"{what} {raw!r} changed while it was opened",
                                     param=param)
        else:
            dir_fd = self.fd
            try:
                for part in rel.parts[:-1]:
                    nxt = _open_at(part, _PASS_FLAGS, dir_fd, raw, param, what)
                    if dir_fd != self.fd:
                        os.close(dir_fd)
                    dir_fd = nxt
                fd = _open_at(rel.parts[-1], _FILE_FLAGS, dir_fd, raw, param, what)
            finally:
                if dir_fd != self.fd:
                    os.close(dir_fd)
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode):
            os.close(fd)
            raise SpecialistError(f"{what} {raw!r} is not a regular file", param=param)
        if _SAFE:
            os.set_blocking(fd, True)
        return fd

    def fetch(self, raw: str, *, max_bytes: int | None = None, param: str = "path",
              what: str = "path") -> tuple[bytes, os.stat_result]:
        """The bytes of the file ``raw`` names and the stat of what was read (see ``open``);
        with ``max_bytes``, at most one byte more than that is read."""
        fd = self.open(raw, param=param, what=what)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            data = fh.read() if max_bytes is None else fh.read(max_bytes + 1)
        return data, st

    def read(self, raw: str, *, max_bytes: int | None = None, param: str = "path",
             what: str = "path") -> bytes:
        return self.fetch(raw, max_bytes=max_bytes, param=param, what=what)[0]


def read_confined(root: str | Path, raw: str, *, max_bytes: int | None = None,
                  param: str = "path", what: str = "path") -> bytes:
    """The bytes of the file ``raw`` (relative) names under ``root``, opened without
    following a symlink at any component, the root's own included: a link, or a file
    swapped for one since it was checked, is a ``ForbiddenError``; anything but a regular
    file is a ``SpecialistError``; a missing file is ``FileNotFoundError``."""
    with ConfinedRoot(root, param=param, what=what) as confined:
        return confined.read(raw, max_bytes=max_bytes, param=param, what=what)


# -- which directories may be roots -------------------------------------------------------
def _homes() -> list[Path]:
    homes = []
    try:
        homes.append(Path.home())
    except (RuntimeError, KeyError):
        pass
    try:
        import pwd

        homes.append(Path(pwd.getpwuid(os.getuid()).pw_dir))
    except (ImportError, KeyError, AttributeError):
        pass
    out = []
    for home in homes:
        try:
            out.append(home.resolve())
        except OSError:
            continue
    return out


def unsafe_root(raw: str | Path) -> str | None:
    """Why ``raw`` must not be an allowed root, or None: the file system root, the home
    directory, or a directory holding it would expose SSH keys, cloud credentials and
    every other file of the user to requests."""
    path = Path(os.path.expanduser(str(raw))).resolve()
    if path == Path(path.anchor):
        return (f"{str(raw)!r} is the file system root: every file of this machine could be "
                "indexed or edited")
    for home in _homes():
        if within(home, path):
            which = ("the home directory" if home == path
                     else f"a folder holding the home directory {home}")
            return (f"{str(raw)!r} is {which}: its dot-folders hold keys and credentials "
                    "(.ssh, .config, .docker) that requests could read")
    return None
