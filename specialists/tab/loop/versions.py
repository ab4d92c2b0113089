"""Policy versions on disk: one directory per version, its lineage, and a deployed pointer.

    <data_dir>/tab/versions/v<N>/policy.safetensors, policy.json, lineage.json
    <data_dir>/tab/deployed            the deployed version number, replaced atomically
    <data_dir>/tab/canary              the canary, if one runs: {version, share, started_at}

Publishing copies into a temporary directory and renames it into place, so a trainer killed
mid-write leaves no half version behind; the pointer is written the same way. A running
server's store is its Tab service's (``router.service.tab``): the service swaps what the
pointer names into the specialist; this module only keeps the files.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from specialists.base import NotFoundError

__all__ = ["POLICY_FILES", "PolicyStore", "publish_policy"]


class PolicyStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser()
        self.versions_dir = self.root / "versions"
        self.versions_dir.mkdir(parents=True, exist_ok=True)
        self.pointer = self.root / "deployed"
        self.canary_pointer = self.root / "canary"

    def path(self, version: int) -> Path:
        return self.versions_dir / f"v{version}"

    def versions(self) -> list[int]:
        out = []
        for p in self.versions_dir.glob("v*"):
            if p.is_dir() and p.name[1:].isdigit() and (p / "policy.json").exists():
                out.append(int(p.name[1:]))
        return sorted(out)

    def publish(self, policy_dir: str | Path, version: int, lineage: dict[str, Any]) -> Path:
        """Copy a saved policy in as ``version`` with its lineage; atomic."""
        target = self.path(version)
        if target.exists():
            return target  # versions are immutable: the same number is the same policy
        tmp = Path(tempfile.mkdtemp(prefix=f".v{version}-", dir=self.versions_dir))
        try:
            for item in Path(policy_dir).iterdir():
                if item.is_file() and item.name != "lineage.json":
                    shutil.copy2(item, tmp / item.name)
            record = {"version": version, "created_at": time.time(), **lineage}
            (tmp / "lineage.json").write_text(json.dumps(record, indent=1) + "\n")
            os.replace(tmp, target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return target

    def lineage(self, version: int) -> dict[str, Any]:
        path = self.path(version) / "lineage.json"
        if not path.exists():
            raise NotFoundError(f"no policy version {version} under {self.versions_dir}; "
                           f"known: {self.versions()}")
        return json.loads(path.read_text())

    def deployed(self) -> int | None:
        try:
            return int(self.pointer.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def set_deployed(self, version: int) -> None:
        if version not in self.versions():
            raise NotFoundError(f"no policy version {version}; known: {self.versions()}")
        tmp = self.pointer.with_name(f".deployed-{os.getpid()}")
        tmp.write_text(f"{version}\n")
        os.replace(tmp, self.pointer)

    def canary(self) -> dict[str, Any] | None:
        """The canary being served beside the deployed version: ``{version, share,
        started_at}`` (epoch seconds), or None."""
        try:
            record = json.loads(self.canary_pointer.read_text())
            return {"version": int(record["version"]), "share": float(record["share"]),
                    "started_at": float(record["started_at"])}
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return None

    def set_canary(self, version: int, share: float) -> dict[str, Any]:
        """Record a canary (replacing any other); returns the record."""
        if version not in self.versions():
            raise NotFoundError(f"no policy version {version}; known: {self.versions()}")
        record = {"version": version, "share": share, "started_at": time.time()}
        tmp = self.canary_pointer.with_name(f".canary-{os.getpid()}")
        tmp.write_text(json.dumps(record) + "\n")
        os.replace(tmp, self.canary_pointer)
        return record

    def clear_canary(self) -> None:
        self.canary_pointer.unlink(missing_ok=True)


POLICY_FILES = ("policy.json", "policy.safetensors")


def publish_policy(store: PolicyStore, source: str | Path, version: int,
                   lineage: dict[str, Any]) -> Path:
    """Publish the policy files of ``source`` (a checkpoint or policy directory) as
    ``version``; the LM weights beside them stay where they are."""
    with tempfile.TemporaryDirectory() as tmp:
        for name in POLICY_FILES:
            shutil.copy2(Path(source) / name, Path(tmp) / name)
        return store.publish(tmp, version, lineage)
