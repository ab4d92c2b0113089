"""A Merkle tree of a repository's files: what changed since the last index, cheaply.

Each file's hash is the blake2b of its bytes; a directory's hash is the hash of its
children's names and hashes. A refresh re-reads only files whose size or mtime changed
(the stat check), then walks the two trees from the root, descending only into
directories whose hashes differ, to list the files added, changed and removed.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FileState", "Tree", "diff_trees", "hash_bytes"]


def hash_bytes(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass(frozen=True)
class FileState:
    size: int
    mtime_ns: int
    hash: str

    def same_stat(self, st: os.stat_result) -> bool:
        return self.size == st.st_size and self.mtime_ns == st.st_mtime_ns


@dataclass
class Tree:
    """File states by relative posix path, with directory hashes derived on demand."""

    files: dict[str, FileState] = field(default_factory=dict)
    _dirs: dict[str, str] | None = None

    def dir_hashes(self) -> dict[str, str]:
        """Hash of every directory ("" is the root), from its children bottom-up."""
        if self._dirs is not None:
            return self._dirs
        children: dict[str, list[tuple[str, str]]] = {"": []}
        for path in self.files:
            parts = path.split("/")
            for i in range(1, len(parts)):
                parent, child = "/".join(parts[: i - 1]), "/".join(parts[:i])
                if child not in children:
                    children[child] = []
                    children.setdefault(parent, []).append((parts[i - 1] + "/", child))
            children.setdefault("/".join(parts[:-1]), []).append((parts[-1], path))
        hashes: dict[str, str] = {}
        for d in sorted(children, key=lambda p: -p.count("/") - (p != "")):
            h = hashlib.blake2b(digest_size=16)
            for name, key in sorted(children[d]):
                h.update(name.encode())
                h.update((hashes[key] if name.endswith("/") else self.files[key].hash).encode())
            hashes[d] = h.hexdigest()
        self._dirs = hashes
        return hashes

    @property
    def root_hash(self) -> str:
        return self.dir_hashes()[""]

    def to_json(self) -> dict[str, Any]:
        return {p: [s.size, s.mtime_ns, s.hash] for p, s in self.files.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Tree":
        return cls({p: FileState(int(v[0]), int(v[1]), str(v[2])) for p, v in data.items()})


def diff_trees(old: Tree, new: Tree) -> tuple[list[str], list[str], list[str]]:
    """(added, changed, removed) file paths, visiting only directories whose hash differs."""
    old_dirs, new_dirs = old.dir_hashes(), new.dir_hashes()
    if old_dirs.get("") == new_dirs.get(""):
        return [], [], []
    stale = {d for d, h in new_dirs.items() if old_dirs.get(d) != h}
    stale |= {d for d in old_dirs if d not in new_dirs}
    added, changed, removed = [], [], []
    for path, state in new.files.items():
        if _parent(path) not in stale:
            continue
        before = old.files.get(path)
        if before is None:
            added.append(path)
        elif before.hash != state.hash:
            changed.append(path)
    for path in old.files:
        if _parent(path) in stale and path not in new.files:
            removed.append(path)
    return sorted(added), sorted(changed), sorted(removed)


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""
