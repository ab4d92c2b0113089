"""A contextual bandit over the Tab policy's own actions: the baseline the policy gradient
must beat where it is deployed (issue 15).

LinUCB (Li et al., 2010) with one linear model shared by every *show* action: a request's
action row ``i`` (one candidate cut at one point) is described by the same features the
policy head sees — the action's row of ``Observation.actions``, the state
(``Observation.static`` + ``dynamic`` + ``personal``, :func:`~specialists.tab.features.state_vector`) and, when there is one, the LM's hidden state — each
scaled by the feature normalizer of the policy the bandit replaces. Its reward estimate is
θ·x, its optimism α·sqrt(xᵀA⁻¹x). "Show nothing" pays the configured ``reward_none`` for
sure, so it is not estimated: the bandit shows its best action when that action's score
beats it. ``alpha=0`` (or ``explore=False``) is the greedy rule a deployed version serves.

Unlike the policy gradient it needs no logged probabilities: every labelled event of any
version is a (features, reward) example for the ridge regression.

A linear model over (action, state) side by side can say *whether* showing pays for this
person (the personal features shift every action's estimate alike), not *which* action does:
a person who takes only short suggestions and one who takes only long ones need the cut's
length to pay differently. So the action's features also enter multiplied by the session's
history (:data:`INTERACT`, each centred on its "unknown" prior of 0.5) — zero where a request
carries no personal features, so a bandit without them estimates exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from specialists.tab.features import PERSONAL_FEATURES, Observation, state_vector

__all__ = ["LinUCB", "BanditChoice", "cross_fitted_values", "INTERACT"]

INTERACT = ("s_accept_ratio", "s_taken_ratio", "s_long_accept_ratio")
"""The personal features (:mod:`specialists.tab.personal`) each action feature is also
multiplied by: this session's share of shown suggestions accepted, of shown characters taken,
and of long suggestions accepted."""


@dataclass
class BanditChoice:
    index: int
    """0: show nothing; ``i + 1``: the observation's action row ``i`` (as :class:`Action`)."""
    score: float
    """The chosen action's score (its reward estimate plus optimism; ``reward_none`` for nothing)."""


class LinUCB:
    """Ridge regression of reward on (action, state[, hidden]) features, with UCB exploration."""

    def __init__(self, *, s_mean: Any, s_std: Any, a_mean: Any, a_std: Any, hidden_size: int = 0,
                 alpha: float = 0.5, ridge: float = 1.0, reward_none: float = 0.0,
                 interact: Sequence[str] = INTERACT) -> None:
        import numpy as np

        self.s_mean, self.s_std = np.asarray(s_mean, np.float64), np.asarray(s_std, np.float64)
        self.a_mean, self.a_std = np.asarray(a_mean, np.float64), np.asarray(a_std, np.float64)
        self.hidden_size = hidden_size
        self.alpha = alpha
        self.reward_none = reward_none
        unknown = [n for n in interact if n not in PERSONAL_FEATURES]
        if unknown:
            raise ValueError(f"interact: {unknown} are not personal features (known: {PERSONAL_FEATURES})")
        self.interact = [PERSONAL_FEATURES.index(n) for n in interact]
        self.dim = 1 + len(self.a_mean) * (1 + len(self.interact)) + len(self.s_mean) + hidden_size
        self.A = ridge * np.eye(self.dim)
        self.b = np.zeros(self.dim)
        self.n = 0
        self._refresh()

    @classmethod
    def like(cls, policy: Any, **kw: Any) -> "LinUCB":
        """A bandit over the features, and with the scaling, of ``policy`` (a TabPolicy)."""
        net = policy.net
        return cls(s_mean=net.s_mean.numpy(), s_std=net.s_std.numpy(), a_mean=net.a_mean.numpy(),
                   a_std=net.a_std.numpy(), hidden_size=policy.config.hidden_size, **kw)

    def _refresh(self) -> None:
        import numpy as np

        self.A_inv = np.linalg.inv(self.A)
        self.theta = self.A_inv @ self.b

    def rows(self, obs: Observation) -> Any:
        """(A, dim): one feature vector per show action of ``obs``."""
        import numpy as np

        n = len(obs.rows)
        state = (state_vector(obs) - self.s_mean) / self.s_std
        actions = (np.asarray(obs.actions, np.float64) - self.a_mean) / self.a_std
        parts = [np.ones((n, 1)), actions, np.broadcast_to(state, (n, len(state)))]
        if self.interact:
            p = obs.personal
            if p is None or len(p) != len(PERSONAL_FEATURES):
                parts.append(np.zeros((n, actions.shape[1] * len(self.interact))))
            else:
                c = np.asarray(p, np.float64)[self.interact] - 0.5
                parts.append((actions[:, :, None] * c[None, None, :]).reshape(n, -1))
        if self.hidden_size:
            h = np.asarray(obs.hidden, np.float64)
            h = h if len(h) == self.hidden_size else np.zeros(self.hidden_size)
            parts.append(np.broadcast_to(h, (n, self.hidden_size)))
        return np.concatenate(parts, axis=1)

    def choose(self, obs: Observation, explore: bool = True) -> BanditChoice:
        import numpy as np

        if len(obs.rows) == 0:
            return BanditChoice(0, self.reward_none)
        x = self.rows(obs)
        score = x @ self.theta
        if explore and self.alpha > 0:
            score = score + self.alpha * np.sqrt(np.einsum("ij,jk,ik->i", x, self.A_inv, x).clip(min=0))
        i = int(np.argmax(score))
        if score[i] <= self.reward_none:
            return BanditChoice(0, self.reward_none)
        return BanditChoice(i + 1, float(score[i]))

    def values(self, obs: Observation) -> Any:
        """The reward estimate of every action of ``obs``, indexed as :class:`BanditChoice`:
        ``reward_none`` for "show nothing", then θ·x of each action row (no optimism)."""
        import numpy as np

        shown = self.rows(obs) @ self.theta if len(obs.rows) else np.zeros(0)
        return np.concatenate([[self.reward_none], shown])

    def choose_many(self, obs_list: Sequence[Observation], explore: bool = True) -> list[BanditChoice]:
        return [self.choose(o, explore) for o in obs_list]

    def update(self, examples: Sequence[tuple[Observation, int, float]]) -> int:
        """Fold in (observation, action index as in :class:`BanditChoice`, reward) examples;
        "show nothing" teaches nothing (its reward is known). Returns the examples used."""
        import numpy as np

        used = 0
        for obs, index, reward in examples:
            if index <= 0:
                continue
            x = self.rows(obs)[index - 1]
            self.A += np.outer(x, x)
            self.b += reward * x
            used += 1
        self.n += used
        self._refresh()
        return used


def cross_fitted_values(model: LinUCB, examples: Sequence[tuple[Observation, int, float]],
                        folds: int = 2) -> list[Any]:
    """:meth:`LinUCB.values` for each example's request, from ``model`` (what it has seen
    before) refitted with the *other* folds of ``examples`` only (example ``i`` is in fold
    ``i % folds``): no estimate has seen its own example's reward, so a policy gradient that
    subtracts it stays unbiased (:meth:`TabPolicy.ppo_update`'s ``q_values``). ``model`` is
    left as it was; fold it the examples with :meth:`LinUCB.update` afterwards."""
    import copy

    if folds < 2:
        raise ValueError(f"folds={folds}: cross-fitting needs at least 2")
    out: list[Any] = [None] * len(examples)
    for k in range(folds):
        fitted = copy.deepcopy(model)
        fitted.update([e for i, e in enumerate(examples) if i % folds != k])
        for i in range(k, len(examples), folds):
            out[i] = fitted.values(examples[i][0])
    return out
