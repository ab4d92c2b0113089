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
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Iterable

from specialists.base import ForbiddenError, NotFoundError, SpecialistError

__all__ = ["check_relative", "confine", "expand_home", "resolve_repo", "within"]


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
                             "list the directories repositories live under in the config "
                             "(workspace.allowed_roots, or the retriever's allowed_root)",
                             param=param)
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

