"""The workspace of one edit: the files it may read and write, and nothing else.

Every path that reaches the disk passes through here: the request's ``files`` and
``texts`` and every path a model's answer names. A path is refused (``ForbiddenError``,
403 over HTTP) when it is absolute, climbs out with ``..``, or passes through a symlink
that leaves the repository (``specialists.paths.confine``); without a repository, paths
are still checked lexically, since they name files in the scratch copy.

An edit may change only the files the request gave it (``allow``): those named in
``files`` or ``texts`` (or, with neither, the ones retrieval chose). A named file that does
not exist yet is a new file the request allows; nothing else is. A model's answer naming
any other path is refused as a whole (``check_answer``), and ``write`` checks again. Nothing
is ever written under a dot-folder (``.git/``, ``.github/``, ...) or to a ``.git`` file, nor
through a symlink.

Writes are all-or-nothing: every file is staged beside its target first, then each is
swapped in; if any step fails, the files already swapped are put back and the staged
ones and any directory created for them are removed. Verification commands never run in
the user's tree: ``scratch`` copies the repository's regular files (a symlink is copied as
the file it points to when that is a regular file inside the repository, and left out
otherwise) and lays the merged files over it.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from specialists.base import ForbiddenError, SpecialistError
from specialists.paths import check_relative, confine, within

__all__ = ["SCRATCH_IGNORE", "Workspace", "unwritable"]

SCRATCH_IGNORE = (".git", "node_modules", ".venv", "__pycache__")
"""Not copied into the scratch copy: large, and no verification command should need them."""


class Workspace:
    """One request's files, under ``root`` (a repository already confined to the allowed
    roots by ``specialists.paths.resolve_repo``), or inline only when ``root`` is None."""

    def __init__(self, root: Path | None) -> None:
        self.root = root.resolve() if root is not None else None
        self.allowed: frozenset[str] = frozenset()
        """The paths this edit may change (``allow``); an answer naming another is refused."""

    def check(self, path: str, *, param: str = "files", what: str = "path") -> str:
        """``path`` in its plain form (``./a.py`` is ``a.py``) if it is safe to read and
        write; ``ForbiddenError`` otherwise."""
        if self.root is not None:
            confine(self.root, path, param=param, what=what)
        return str(check_relative(path, param=param, what=what))

    def allow(self, paths: Iterator[str] | list[str]) -> None:
        """The files this edit may change: the ones the request gave it (see the module
        docstring); each already passed ``check``."""
        self.allowed = frozenset(paths)

    def check_answer(self, paths: Iterator[str] | list[str]) -> None:
        """Refuse a model's answer that names a path outside the repository or one the
        request did not give the edit: it is untrusted input, and nothing of it is kept."""
        paths = list(paths)
        for path in paths:
            self.check(path, param="answer", what="the model's answer names the path")
        for path in paths:
            if path not in self.allowed:
                raise ForbiddenError(
                    f"the model's answer names the path {path!r}, which the request did not "
                    f"give the edit (it may change only {sorted(self.allowed)}); the whole "
                    "answer is refused and nothing was written. To let an edit create or "
                    "change a file, name it in files", param="answer")

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
        """A throwaway copy of the repository (or an empty directory) holding ``merged``,
        with no symlink in it (see the module docstring)."""
        with tempfile.TemporaryDirectory(prefix="complement-verify-") as tmp:
            root = Path(tmp) / "repo"
            if self.root is not None:
                _copy_regular(self.root, root)
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
        """Write every file or none (see the module docstring); the paths written. Each
        must be one the edit was given (``allow``), outside dot-folders, reached through
        no symlink; otherwise ``ForbiddenError`` and nothing is written."""
        if self.root is None:
            raise SpecialistError("write needs repo: the directory the files are written "
                                  "into", param="write")
        targets: dict[str, Path] = {}
        for path in merged:
            self.check_answer([path])
            why = unwritable(path)
            if why is not None:
                raise ForbiddenError(f"{path!r} is not written: {why}; nothing was written",
                                     param="answer")
            targets[path] = self._plain_target(path)
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

    def _plain_target(self, path: str) -> Path:
        """``root / path`` if no part of it is a symlink and the file, if it exists, is a
        regular one; ``ForbiddenError`` otherwise."""
        assert self.root is not None
        rel = check_relative(path, param="answer")
        full = self.root
        for part in rel.parts:
            full = full / part
            if full.is_symlink():
                link = str(full.relative_to(self.root))
                raise ForbiddenError(f"{path!r} is not written: {link!r} is a symlink, and "
                                     "edits never write through one; nothing was written",
                                     param="answer")
        if full.exists() and not full.is_file():
            raise ForbiddenError(f"{path!r} is not written: it is not a regular file; "
                                 "nothing was written", param="answer")
        return full


def unwritable(path: str) -> str | None:
    """Why an edit never writes ``path`` (a relative path already checked), or ``None``:
    a dot-folder anywhere in it (``.git/``, ``.github/``, ...), or a ``.git`` file."""
    parts = check_relative(path, param="answer").parts
    hidden = next((p for p in parts[:-1] if p.startswith(".")), None)
    if hidden is not None:
        return (f"it is under the dot-folder {hidden + '/'!r} (.git, .github and the like "
                "hold repository and tool settings; edits never write there)")
    if parts[-1].lower() == ".git":
        return "a .git file points git at its settings; edits never write it"
    return None


def _copy_regular(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst``: regular files only, links to regular files inside ``src``
    as the files they point to; other links, sockets, FIFOs and ``SCRATCH_IGNORE`` left out."""
    dst.mkdir()
    for dirpath, dirnames, filenames in os.walk(src):  # never follows a link to a directory
        here = Path(dirpath)
        out = dst / here.relative_to(src)
        keep = []
        for name in dirnames:
            if name in SCRATCH_IGNORE or (here / name).is_symlink():
                continue
            (out / name).mkdir()
            keep.append(name)
        dirnames[:] = keep
        for name in filenames:
            if name in SCRATCH_IGNORE:
                continue
            source = here / name
            try:
                mode = os.lstat(source).st_mode
                if stat.S_ISLNK(mode):
                    real = source.resolve()
                    if within(real, src) and real.is_file():
                        shutil.copyfile(real, out / name)
                elif stat.S_ISREG(mode):
                    shutil.copy2(source, out / name, follow_symlinks=False)
            except (OSError, RuntimeError):  # unreadable, a link loop, gone: left out
                continue


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
