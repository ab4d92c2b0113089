"""Tab: context copy and a small LM propose, an RL-trained policy picks what, how much and whether.

Configure as ``specialists.tab:TabSpecialist``. Modules: ``types`` (the request and the
suggestion it serves), ``replay`` (edit replay and the simulated user, built on ``types``
and ``hunks``), ``context_copy``, ``lm``, ``features``, ``policy``, ``baselines``,
``harness``, ``train`` (the RL script), ``pretrain`` (the LM recipe), ``data``, ``events``
(the event store the online loop reads) and ``loop`` (the online loop that trains it:
versions, trainer, gate, simulated users, the runner). Its HTTP endpoints and CLI commands
live in the router.

The names below are the public surface other parts (the evaluators, benchmarks) build on;
all but ``TabSpecialist`` load on first use, so importing this package stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

from specialists.tab.specialist import TabSpecialist

__all__ = ["SPLIT", "ObserveConfig", "Session", "Suggestion", "TabSpecialist", "copy_min_match",
           "load_split", "observe"]

_LAZY = {
    "SPLIT": "specialists.tab.data",
    "load_split": "specialists.tab.data",
    "Session": "specialists.tab.replay",
    "Suggestion": "specialists.tab.types",
    "ObserveConfig": "specialists.tab.features",
    "observe": "specialists.tab.features",
    "copy_min_match": "specialists.tab.baselines",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'specialists.tab' has no attribute {name!r}")
