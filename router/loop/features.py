"""An observation as the event store keeps it: the arrays the policy's update needs.

Candidates and their texts are not needed to compute a gradient (the action index names the
row), so only ``static``, ``hidden``, ``actions`` and ``dynamic`` are stored, rounded to
float32 precision.
"""

from __future__ import annotations

from typing import Any

__all__ = ["from_features", "to_features"]

_ARRAYS = ("static", "hidden", "actions", "dynamic")


def to_features(obs: Any) -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {}
    for name in _ARRAYS:
        value = getattr(obs, name)
        out[name] = [] if value is None else np.asarray(value, dtype=np.float32).tolist()
    out["n_actions"] = len(obs.rows)
    return out


def from_features(features: dict[str, Any], n_action_features: int) -> Any:
    """An Observation whose arrays are the stored ones (no candidates: training only)."""
    import numpy as np

    from specialists.tab.features import Observation

    n = int(features.get("n_actions", 0))
    actions = np.asarray(features["actions"], dtype=np.float32).reshape(n, n_action_features)
    rows = np.zeros((n, 2), dtype=np.int32)
    return Observation(static=np.asarray(features["static"], dtype=np.float32),
                       hidden=np.asarray(features["hidden"], dtype=np.float32),
                       actions=actions, rows=rows, candidates=[], cursor=0,
                       dynamic=np.asarray(features["dynamic"], dtype=np.float32))
