"""Suite files: what a suite runs and on which data.

```yaml
kind: edit                  # edit | tab | retrieval
name: edit-heldout
data: ${COMPLEMENT_COMMITS:-../../../shared/data/commits}   # relative to this file
projects: [requests, cobra, express]      # held-out projects
per_project: 40
seed: 0
baseline: whole-file        # route the ratios are taken against
```
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from router.errors import ConfigError

__all__ = ["EditTask", "Suite", "iter_commit_rows", "load_edit_tasks", "load_suite"]


class Suite(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["edit", "tab", "retrieval"]
    name: str = ""
    data: str = ""
    projects: list[str] = Field(default_factory=list)
    per_project: int = Field(40, ge=1)
    seed: int = 0
    min_lines: int = 0
    max_lines: int = 100_000
    baseline: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    """Kind-specific settings (tab: frontier model, keystroke counts; retrieval: modes)."""
    path: str = ""

    def data_path(self) -> Path:
        p = Path(self.data).expanduser()
        if p.is_absolute() or not self.path:
            return p
        beside = Path(self.path).parent / p
        return beside if beside.exists() else p


def load_suite(path: str | Path, env: dict[str, str] | None = None) -> Suite:
    from router.config import interpolate, read_yaml  # the same rules as the main config

    p = Path(path)
    data = interpolate(read_yaml(p, "suite file") or {}, env)
    try:
        suite = Suite.model_validate({**data, "path": str(p)})
    except ValidationError as exc:
        msgs = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid suite {str(p)!r}: {msgs}") from None
    suite.name = suite.name or p.stem
    return suite


@dataclass
class EditTask:
    id: str
    project: str
    path: str
    language: str | None
    message: str
    before: str
    after: str

    @property
    def lines(self) -> int:
        return self.before.count("\n") + 1


def iter_commit_rows(source: Path, projects: list[str]) -> Iterator[dict[str, Any]]:
    """Rows of ``shared/data/commits`` files (a directory of NAME.jsonl.gz, or one file)."""
    files = sorted(source.glob("*.jsonl*")) if source.is_dir() else [source]
    if not files or not files[0].exists():
        raise ConfigError(f"no commit data at {str(source)!r} (set data: in the suite, or "
                          "COMPLEMENT_COMMITS)")
    for f in files:
        name = f.name.split(".")[0]
        if projects and name not in projects:
            continue
        opener = gzip.open if f.suffix == ".gz" else open
        with opener(f, "rt", encoding="utf-8") as fh:  # type: ignore[operator]
            for line in fh:
                if line.strip():
                    row = json.loads(line)
                    row.setdefault("repo", name)
                    yield row


def load_edit_tasks(suite: Suite) -> list[EditTask]:
    """``per_project`` tasks from each project, sampled with the suite's seed."""
    by_project: dict[str, list[dict[str, Any]]] = {}
    for row in iter_commit_rows(suite.data_path(), suite.projects):
        n = row["before"].count("\n") + 1
        if suite.min_lines <= n <= suite.max_lines:
            by_project.setdefault(row["repo"], []).append(row)
    missing = [p for p in suite.projects if p not in by_project]
    if missing:
        raise ConfigError(f"suite {suite.name!r}: no data for projects {missing}")
    tasks = []
    for project in sorted(by_project):
        rows = by_project[project]
        picked = random.Random(f"{suite.seed}:{project}").sample(
            rows, min(suite.per_project, len(rows)))
        for row in picked:
            tasks.append(EditTask(f"{project}:{row['commit'][:10]}:{row['path']}", project,
                                  row["path"], row.get("language"), row["message"],
                                  row["before"], row["after"]))
    return tasks
