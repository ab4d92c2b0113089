"""The workspace of one edit: the files it may read and write, and nothing else.

Every path that reaches the disk passes through here: the request's ``files`` and
``texts`` and every path a model's answer names. A path is refused (``ForbiddenError``,
403 over HTTP) when it is absolute, climbs out with ``..``, or passes through a symlink
that leaves the repository (``specialists.paths.confine``); without a repository, paths
are still checked lexically, since they name files in the scratch copy.

Writes are all-or-nothing: every file is staged beside its target first, then each is
swapped in; if any step fails, the files already swapped are put back and the staged
ones and any directory created for them are removed. Verification commands never run in
the user's tree: ``scratch`` copies the repository and lays the merged files over it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from specialists.base import SpecialistError
from specialists.paths import check_relative, confine

__all__ = ["SCRATCH_IGNORE", "Workspace"]

SCRATCH_IGNORE = (".git", "node_modules", ".venv", "__pycache__")
"""Not copied into the scratch copy: large, and no verification command should need them."""


class Workspace:
    """One request's files, under ``root`` (a repository already confined to the allowed
    roots by ``specialists.paths.resolve_repo``), or inline only when ``root`` is None."""

    def __init__(self, root: Path | None) -> None:
        self.root = root.resolve() if root is not None else None

    def check(self, path: str, *, param: str = "files", what: str = "path") -> str:
        """``path`` if it is safe to read and write; ``ForbiddenError`` otherwise."""
        if self.root is not None:
            confine(self.root, path, param=param, what=what)
        else:
            check_relative(path, param=param, what=what)
        return path

    def check_answer(self, paths: Iterator[str] | list[str]) -> None:
        """Refuse a model's answer that names a path outside the repository: it is
        untrusted input, and nothing of it is kept."""
        for path in paths:
            self.check(path, param="answer", what="the model's answer names the path")

    def read(self, path: str) -> str:
        """A file of the repository; one that does not exist is a new file (empty)."""
        if self.root is None:
            return ""
        from specialists.paths import read_confined

        # a link inside the repository is read as the file it names; the read itself opens
        # every component with no link followed, so a link swapped in since this check
        # (one out of the repository) is refused, never read through
        try:
            full = confine(self.root, path, param="files")
        except OSError as exc:  # resolve() raced a link being swapped (EINVAL, ELOOP)
            raise SpecialistError(f"cannot read {path!r}: it changed while it was checked "
                                  f"({exc.strerror or exc}); try again", param="files") from None
        target = full.relative_to(self.root).as_posix()
        try:
            return read_confined(self.root, target, param="files").decode("utf-8")
        except FileNotFoundError:
            return ""
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecialistError(f"cannot read {path!r}: {exc}", param="files") from exc

    @contextmanager
    def scratch(self, merged: dict[str, str]) -> Iterator[Path]:
        """A throwaway copy of the repository (or an empty directory) holding ``merged``."""
        with tempfile.TemporaryDirectory(prefix="complement-verify-") as tmp:
            root = Path(tmp) / "repo"
            if self.root is not None:
                shutil.copytree(self.root, root, symlinks=True,
                                ignore=shutil.ignore_patterns(*SCRATCH_IGNORE))
            else:
                root.mkdir()
            for path, text in merged.items():
                target = confine(root, path, param="answer")
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.is_symlink():  # never write through a link, even in the copy
                    target.unlink()
                target.write_text(text, encoding="utf-8")
            yield root

    def write(self, merged: dict[str, str]) -> list[str]:
        """Write every file or none (see the module docstring); the paths written."""
        if self.root is None:
            raise SpecialistError("write needs repo: the directory the files are written "
                                  "into", param="write")
        targets = {path: confine(self.root, path, param="answer") for path in merged}
        created: list[Path] = []
        staged: list[tuple[Path, Path]] = []
        swapped: list[tuple[Path, Path | None]] = []  # (target, backup of the old file)
        try:
            for path, text in merged.items():
                target = targets[path]
                created.extend(_make_parents(target.parent))
                staged.append((target, _stage(target, text)))
            for target, tmp in staged:
                backup = _backup(target)
                try:
                    os.replace(tmp, target)
                except BaseException:
                    if backup is not None:
                        backup.unlink(missing_ok=True)
                    raise
                swapped.append((target, backup))
        except BaseException:
            _roll_back(staged, swapped, created)
            raise
        for _, backup in swapped:
            if backup is not None:
                backup.unlink(missing_ok=True)
        return list(merged)


def _make_parents(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; the ones created, deepest last."""
    missing = []
    for d in [directory, *directory.parents]:
        if d.exists():
            break
        missing.append(d)
    directory.mkdir(parents=True, exist_ok=True)
    return list(reversed(missing))


def _stage(target: Path, text: str) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    if target.exists():
        shutil.copymode(target, tmp)
    return Path(tmp)


def _backup(target: Path) -> Path | None:
    if not target.exists():
        return None
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.bak.", dir=target.parent)
    os.close(fd)
    shutil.copy2(target, tmp)
    return Path(tmp)


def _roll_back(staged: list[tuple[Path, Path]], swapped: list[tuple[Path, Path | None]],
               created: list[Path]) -> None:
    for target, backup in reversed(swapped):
        if backup is not None:
            os.replace(backup, target)
        else:
            target.unlink(missing_ok=True)
    for _, tmp in staged:
        tmp.unlink(missing_ok=True)
    for d in reversed(created):
        try:
            d.rmdir()
        except OSError:
            pass
