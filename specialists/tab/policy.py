"""The Tab policy: which candidate, how much of it, or nothing — and its on-policy update.

A small head over the LM's last hidden state and the state features scores every action
(one candidate cut at one point, features from :mod:`specialists.tab.features`) against
"show nothing"; the policy is the softmax over those scores. A second head is the learned
baseline (the value of the state) for REINFORCE.

On-policy discipline (DESIGN.md, the online loop): every :class:`Action` carries the
``version`` of the policy that drew it, and :meth:`TabPolicy.train_step` refuses any sample
drawn by another version — older samples are off-policy. Each update bumps the version.

:meth:`TabPolicy.ppo_update` is the update the live loop and the learning benchmark share:
PPO-clip over several epochs of one batch with a KL guard against the version that drew it,
the learned value as baseline, and the optimizer state and advantage scale carried from one
version to the next (saved beside the weights). By default it too takes only the current
version's samples; ``max_staleness > 0`` admits those of the last few versions, each
corrected towards the current policy by its importance weight, clipped at ``is_clip`` (the
"decoupled" PPO objective of Hilton et al., 2021: the proximal policy is the current
version, the behaviour policy the one that logged the sample).

Given ``q_values`` — a reward estimate for *every* action of each sample's request, from a
model that did not see that sample (:func:`specialists.tab.loop.bandit.cross_fitted_values`)
— the update uses it as a control variate (the doubly robust estimator of contextual
bandits, Dudík et al., 2011; Q-Prop, Gu et al., 2017): the sampled action's advantage is its
reward minus the model's estimate for it, and a second term moves every action of the
request by the model's estimate against the request's mean under the policy. The gradient
stays unbiased whatever the model's errors; what the model gets right reaches actions the
policy seldom samples, which a sampled-action gradient alone moves only by ~ε a batch.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from specialists.tab.features import ACTION_FEATURES, PERSONAL_FEATURES, STATE_FEATURES, Observation, state_vector
from specialists.tab.types import Suggestion

__all__ = ["Action", "Sample", "TabPolicy", "PolicyConfig", "PPOConfig", "OffPolicyError", "OPTIMIZER_FILE",
           "POLICY_STATE"]

POLICY_STATE = STATE_FEATURES + PERSONAL_FEATURES
"""The head's state input: the request's features, then the personal ones (issue 35). A
policy saved with ``STATE_FEATURES`` alone (the shipped checkpoint) loads with the personal
inputs' weights at zero: the same decisions until an update moves them."""

OPTIMIZER_FILE = "optimizer.pt"
TOP_ACTIONS = 5
"""How many of the most likely actions an :class:`Action` keeps in ``top``."""
"""Beside ``policy.safetensors``: the Adam state an update leaves for the next version's."""


class OffPolicyError(ValueError):
    """A sample drawn by another policy version was handed to ``train_step``."""


@dataclass
class Action:
    index: int
    """0: show nothing; ``i + 1``: the observation's action row ``i``."""
    logprob: float
    version: int
    suggestion: Suggestion | None = None
    value: float = 0.0
    prob_show: float = 0.0
    top: list[tuple[int, float]] = field(default_factory=list)
    """The most likely actions (index as ``index``, probability), most likely first:
    what a request that asks why (``explain``) is told the policy weighed."""

    @property
    def shown(self) -> bool:
        return self.index > 0


@dataclass
class Sample:
    """One decision and its reward, as the trainer (or the event store) keeps it."""

    obs: Observation
    action: Action
    reward: float

    @property
    def version(self) -> int:
        return self.action.version


@dataclass
class PolicyConfig:
    hidden_size: int = 0
    """Size of the LM's hidden state (0: no LM features)."""
    width: int = 64
    lr: float = 3e-3
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 1.0
    normalize_advantages: bool = False
    n_state: int = len(POLICY_STATE)
    n_action: int = len(ACTION_FEATURES)


@dataclass
class PPOConfig:
    """One PPO update of a batch (:meth:`TabPolicy.ppo_update`)."""

    epochs: int = 4
    """Passes over the batch (the KL guard may stop earlier)."""
    minibatches: int = 4
    """Gradient steps per epoch: the batch cut into this many shuffled parts."""
    clip: float = 0.2
    """PPO's ratio clip ε: the objective stops rewarding moves beyond 1 ± ε."""
    target_kl: float = 0.02
    """KL guard: no further step once KL(previous version ‖ this one), exact over the actions and
    averaged over the states of the minibatch about to be stepped on, exceeds it."""
    lr: float | None = None
    """Learning rate for this update (None: the policy's own, ``PolicyConfig.lr``)."""
    max_staleness: int = 0
    """Admit samples drawn by up to this many versions back (0: on-policy only)."""
    is_clip: float = 1.0
    """Truncation ``c`` of a stale sample's importance weight π_current / π_behaviour."""
    seed: int = 0


def _state_layer(cfg: PolicyConfig) -> Any:
    """The first state layer: drawn as it was over the request's features alone, then widened
    by zero columns for the personal inputs — a fresh policy's other weights are the same
    draws as before them, and every policy starts out ignoring the personal inputs."""
    import torch
    from torch import nn

    base = min(cfg.n_state, len(STATE_FEATURES))
    layer = nn.Linear(base, cfg.width)
    if cfg.n_state > base:
        with torch.no_grad():
            layer.weight = nn.Parameter(torch.cat([layer.weight, layer.weight.new_zeros(cfg.width, cfg.n_state - base)], 1))
        layer.in_features = cfg.n_state
    return layer


def _net(cfg: PolicyConfig):
    import torch
    from torch import nn

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lm_proj = nn.Linear(cfg.hidden_size, cfg.width) if cfg.hidden_size else None
            self.state = nn.Sequential(_state_layer(cfg), nn.Tanh())
            self.action = nn.Sequential(nn.Linear(cfg.n_action + cfg.width, cfg.width), nn.Tanh(),
                                        nn.Linear(cfg.width, 1))
            self.none = nn.Linear(cfg.width, 1)
            self.value = nn.Sequential(nn.Linear(cfg.width, cfg.width), nn.Tanh(), nn.Linear(cfg.width, 1))
            # The personal inputs also reach the state's code through a layer of their own
            # (issue 35): the request's features can saturate every unit of the state layer
            # (the shipped normalizer makes the last outcome read +-1,000), and a saturated
            # unit passes no gradient, so personal columns there learn nothing on those
            # requests. Zero at first (and made without a random draw, so every other weight and
            # later draw is what it was): a loaded policy acts as it did until an update moves
            # it. Registered last, so that an optimizer state saved before it loads in order.
            n_personal = cfg.n_state - min(cfg.n_state, len(STATE_FEATURES))
            self.personal = None
            if n_personal:
                self.personal = torch.nn.utils.skip_init(nn.Linear, n_personal, cfg.width, bias=False)
                with torch.no_grad():
                    self.personal.weight.zero_()
            self.register_buffer("s_mean", torch.zeros(cfg.n_state))
            self.register_buffer("s_std", torch.ones(cfg.n_state))
            self.register_buffer("a_mean", torch.zeros(cfg.n_action))
            self.register_buffer("a_std", torch.ones(cfg.n_action))

        def encode(self, state: Any, hidden: Any) -> Any:
            x = (state - self.s_mean) / self.s_std
            z = self.state(x)  # (B, W)
            if self.personal is not None:
                z = z + torch.tanh(self.personal(x[:, len(STATE_FEATURES):]))
            if self.lm_proj is not None:
                z = z + torch.tanh(self.lm_proj(hidden))
            return z

        def forward(self, state: Any, hidden: Any, actions: Any, mask: Any) -> tuple[Any, Any]:
            """state (B, S), hidden (B, C), actions (B, A, F), mask (B, A) -> logits (B, 1 + A), value (B,)."""
            z = self.encode(state, hidden)
            a = (actions - self.a_mean) / self.a_std
            za = z.unsqueeze(1).expand(-1, a.shape[1], -1)
            scores = self.action(torch.cat([a, za], dim=-1)).squeeze(-1)  # (B, A)
            scores = scores.masked_fill(~mask, float("-inf"))
            logits = torch.cat([self.none(z), scores], dim=1)
            return logits, self.value(z).squeeze(-1)

    return Head()


class TabPolicy:
    """``act(obs) -> Action``; ``train_step(samples)`` on the current version's samples only."""

    def __init__(self, config: PolicyConfig | None = None, version: int = 0, seed: int = 0) -> None:
        import torch

        self.config = config or PolicyConfig()
        torch.manual_seed(seed)
        self.net = _net(self.config)
        self.version = version
        self.opt = torch.optim.Adam(self.net.parameters(), lr=self.config.lr)
        self.adv_stats: dict[str, float] = {"count": 0.0, "mean": 0.0, "m2": 0.0}
        """Running moments of the advantages seen by every version (Welford), carried across
        versions so that their scale does not jump with one batch's mix of outcomes."""
        self.trained_with: dict[str, Any] = {}
        """The training arguments saved with a loaded policy (LM prompt length and the like)."""
        self._gen = torch.Generator().manual_seed(seed)
        self._np: dict[str, Any] | None = None
        """numpy views of the head's weights, for acting (:meth:`_head_numpy`)."""

    def __getstate__(self) -> dict[str, Any]:
        # a copy (copy.deepcopy, pickle) makes its own views of its own weights
        return {**self.__dict__, "_np": None}

    # -- acting ------------------------------------------------------------------------
    def _tensors(self, obs_list: Sequence[Observation]) -> tuple[Any, Any, Any, Any]:
        import torch

        return tuple(torch.from_numpy(a) for a in self._arrays(obs_list))  # type: ignore[return-value]

    def _arrays(self, obs_list: Sequence[Observation]) -> tuple[Any, Any, Any, Any]:
        """The head's inputs: state (B, S), hidden (B, C), actions (B, A, F), mask (B, A)."""
        import numpy as np

        B = len(obs_list)
        A = max(1, max(len(o.rows) for o in obs_list))
        F = self.config.n_action
        actions = np.zeros((B, A, F), dtype=np.float32)
        mask = np.zeros((B, A), dtype=bool)
        for b, o in enumerate(obs_list):
            n = len(o.rows)
            if n:
                actions[b, :n] = o.actions
                mask[b, :n] = True
        state = np.stack([state_vector(o) for o in obs_list]).astype(np.float32)
        C = self.config.hidden_size
        hidden = np.stack([o.hidden if len(o.hidden) == C else np.zeros(C, np.float32) for o in obs_list]) \
            if C else np.zeros((B, 0), np.float32)
        return state, hidden.astype(np.float32, copy=False), actions, mask

    def _head_numpy(self, state: Any, hidden: Any, actions: Any, mask: Any) -> tuple[Any, Any]:
        """The head's forward (logits (B, 1 + A), value (B,)) in numpy over views of its
        weights — what ``self.net`` computes, to float rounding, for acting on a keystroke:
        a few small products, where torch's per-op dispatch cost more than the maths
        (issue 17). The state's share of the first action layer is computed once per row,
        not once per candidate. Training and :meth:`logprobs` stay in torch."""
        import numpy as np

        if self._np is None:  # views: an optimizer step or load_state_dict updates them
            self._np = {k: v.detach().numpy() for k, v in self.net.state_dict(keep_vars=True).items()}
        w = self._np
        # the request's features, then the personal ones apart: a policy whose personal
        # weights are zero acts exactly (to the bit) as it did without them
        s0 = len(STATE_FEATURES)
        x = (state - w["s_mean"]) / w["s_std"]
        first_state = w["state.0.weight"]
        z = x[:, :s0] @ first_state[:, :s0].T + w["state.0.bias"]
        if x.shape[1] > s0:
            z += x[:, s0:] @ first_state[:, s0:].T
        z = np.tanh(z)
        if "personal.weight" in w and x.shape[1] > s0:
            z += np.tanh(x[:, s0:] @ w["personal.weight"].T)
        if "lm_proj.weight" in w:
            z += np.tanh(hidden @ w["lm_proj.weight"].T + w["lm_proj.bias"])
        n_action = actions.shape[2]
        first = w["action.0.weight"]  # (W, F + W): the candidate's features, then the state's
        h = ((actions - w["a_mean"]) / w["a_std"]) @ first[:, :n_action].T
        h += (z @ first[:, n_action:].T + w["action.0.bias"])[:, None, :]
        scores = np.tanh(h) @ w["action.2.weight"][0] + w["action.2.bias"][0]  # (B, A)
        scores[~mask] = -np.inf
        logits = np.concatenate([z @ w["none.weight"].T + w["none.bias"], scores], 1)
        value = np.tanh(z @ w["value.0.weight"].T + w["value.0.bias"]) @ w["value.2.weight"][0] \
            + w["value.2.bias"][0]
        return logits, value

    def act(self, obs: Observation, sample: bool = True, explore: float = 0.0,
            explore_to: str = "uniform") -> Action:
        """Draw an action (``sample=False``: the most likely one) with its log-probability."""
        return self.act_many([obs], sample, explore, explore_to)[0]

    def act_many(self, obs_list: Sequence[Observation], sample: bool = True,
                 explore: float = 0.0, explore_to: str = "uniform") -> list[Action]:
        """:meth:`act` for several observations: one forward pass of the head, then each
        draw in order (the same draws as one ``act`` after another).

        ``explore`` (with ``sample``): the draw is from (1 − explore) · π + explore · uniform
        over the request's actions, so an action the policy has learned to leave alone for
        some kind of request is still tried there now and then (issue 35: a kind of person
        the policy stopped showing to never meets the cuts that person would take). The
        logged log-probability is that mixture's — what drew the action — so an
        importance-weighted (stale) update or an off-policy estimate stays right; an
        on-policy update takes the sample as the policy's own. 0: the policy's own draws,
        exactly as without it. ``explore_to="value"``: the explored share goes instead to the
        one show action that would save the most if right — the highest logit plus the log
        of its length (the shipped logits were trained on whether a cut is right).

        Not used by the product: with PPO both made things worse (BENCHMARKS.md, "Line 2,
        continued": uniform draws are mostly wrong cuts, so an update that takes them as its
        own learns to show less to everyone; the most valuable cut is a long one, which most
        people dismiss); ``benchmarks/loop_learn.py --explore [--explore-to value]``
        reproduces that."""
        if not 0.0 <= explore <= 1.0:
            raise ValueError(f"explore={explore}: a share of draws, between 0 and 1")
        if explore_to not in ("uniform", "value"):
            raise ValueError(f"explore_to={explore_to!r}: 'uniform' or 'value'")
        import numpy as np
        import torch

        logits, value = self._head_numpy(*self._arrays(obs_list))  # (B, 1 + A), (B,)
        out = []
        for b, obs in enumerate(obs_list):
            # this row as act() alone would see it (the same width: the same random draws)
            row = logits[b, : 1 + max(1, len(obs.rows))]
            logp = row - (row.max() + np.log(np.exp(row - row.max()).sum()))
            drawn = logp
            if sample and explore > 0.0:
                n_act = 1 + len(obs.rows)  # a padded row (no action rows) is never drawn
                if explore_to == "uniform" or n_act == 1:
                    mix = (1.0 - explore) * np.exp(logp[:n_act]) + explore / n_act
                else:  # "value": the cut that would save the most if right
                    lens = np.array([len(obs.suggestion(i).text) for i in range(n_act - 1)], dtype=np.float64)
                    best = 1 + int(np.argmax(row[1:n_act] + np.log(np.maximum(lens, 1.0))))
                    mix = (1.0 - explore) * np.exp(logp[:n_act])
                    mix[best] += explore
                drawn = np.full_like(logp, -np.inf)
                drawn[:n_act] = np.log(mix)
            if sample:
                idx = int(torch.multinomial(torch.from_numpy(np.exp(drawn)), 1, generator=self._gen))
            else:
                idx = int(np.argmax(logp))
            sug = obs.suggestion(idx - 1) if idx > 0 else None
            probs = np.exp(logp)
            top = [(int(i), round(float(probs[i]), 4)) for i in np.argsort(-probs)[:TOP_ACTIONS]]
            out.append(Action(index=idx, logprob=float(drawn[idx]), version=self.version,
                              suggestion=sug, value=float(value[b]),
                              prob_show=float(1.0 - probs[0]), top=top))
        return out

    def logprobs(self, obs_list: Sequence[Observation], indices: Sequence[int]) -> list[float]:
        """log π(action | obs) of given actions under this policy (off-policy evaluation)."""
        import torch

        if not obs_list:
            return []
        with torch.inference_mode():
            logits, _ = self.net(*self._tensors(obs_list))
            logp = torch.log_softmax(logits, dim=-1)
            idx = torch.tensor([int(i) for i in indices])[:, None]
            return [float(x) for x in logp.gather(1, idx).squeeze(1)]

    # -- learning ----------------------------------------------------------------------
    def fit_normalizer(self, obs_list: Sequence[Observation]) -> None:
        """Feature scaling from observations (before the first update; saved with the head)."""
        import numpy as np
        import torch

        states = np.stack([state_vector(o) for o in obs_list])
        acts = np.concatenate([o.actions for o in obs_list if len(o.rows)] or
                              [np.zeros((1, self.config.n_action), np.float32)])
        mean, std = states.mean(0), states.std(0) + 1e-3
        # A feature that does not vary here is left unscaled (std 1), not divided by the floor:
        # the pass that fits the scales may show nothing (complement tab train), so the last
        # outcome reads "none" throughout, and a 1 later ("accepted", "rejected") became 1,000,
        # which saturated every unit of the state layer whenever it came (issue 35). Personal
        # inputs not yet seen are also left uncentred (their weights start at zero).
        flat = states.std(0) < 1e-6
        std[flat] = 1.0
        mean[flat & (np.arange(len(mean)) >= len(STATE_FEATURES))] = 0.0
        a_std = acts.std(0)
        a_std = np.where(a_std < 1e-6, 1.0, a_std + 1e-3)
        self.net.s_mean.copy_(torch.from_numpy(mean.astype(np.float32)))
        self.net.s_std.copy_(torch.from_numpy(std.astype(np.float32)))
        self.net.a_mean.copy_(torch.from_numpy(acts.mean(0)))
        self.net.a_std.copy_(torch.from_numpy(a_std.astype(np.float32)))

    def scale_personal(self, obs_list: Sequence[Observation]) -> bool:
        """Standardise the personal inputs on ``obs_list`` while every weight that reads them is
        still zero (a policy loaded from one saved before them reads them unscaled: ratios that
        differ by tenths, which a zero-started weight then learns from at a tenth of the pace of
        the request's standardised features). Their weights being zero, no decision changes.
        Returns whether it scaled: not once any of those weights has moved, nor on observations
        without personal features."""
        import numpy as np
        import torch

        s0 = len(STATE_FEATURES)
        if self.config.n_state <= s0 or not any(o.personal is not None for o in obs_list):
            return False
        read = [self.net.state[0].weight[:, s0:]] + ([self.net.personal.weight] if self.net.personal is not None else [])
        if any(bool(w.detach().abs().sum() > 0) for w in read):
            return False
        x = np.stack([state_vector(o)[s0:] for o in obs_list if o.personal is not None]).astype(np.float64)
        mean, std = x.mean(0), x.std(0)
        flat = std < 1e-6  # a feature that does not vary here is left as it is
        mean[flat], std[flat] = 0.0, 1.0
        with torch.no_grad():
            self.net.s_mean[s0:] = torch.from_numpy(mean.astype(np.float32))
            self.net.s_std[s0:] = torch.from_numpy(std.astype(np.float32))
        self._np = None
        return True

    def train_step(self, samples: Sequence[Sample]) -> dict[str, float]:
        """One REINFORCE-with-baseline update on the current version's samples; bumps the version.

        Raises :class:`OffPolicyError` if any sample was drawn by another version.
        """
        import torch

        stale = [s.version for s in samples if s.version != self.version]
        if stale:
            raise OffPolicyError(f"{len(stale)} of {len(samples)} samples come from policy version(s) "
                                 f"{sorted(set(stale))}, not the current version {self.version}; "
                                 f"off-policy samples are not used")
        if not samples:
            raise ValueError("no samples")
        state, hidden, actions, mask = self._tensors([s.obs for s in samples])
        idx = torch.tensor([s.action.index for s in samples])
        rewards = torch.tensor([s.reward for s in samples], dtype=torch.float32)
        old_logprob = torch.tensor([s.action.logprob for s in samples])
        logits, value = self.net(state, hidden, actions, mask)
        logp_all = torch.log_softmax(logits, dim=-1)  # (B, 1 + A)
        logprob = logp_all.gather(1, idx[:, None]).squeeze(1)
        advantages = (rewards - value).detach()
        if self.config.normalize_advantages and len(samples) > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        pg_loss = -(advantages * logprob).mean()
        v_loss = 0.5 * ((value - rewards) ** 2).mean()
        p = logp_all.exp()
        entropy = -(p * torch.where(p > 0, logp_all, torch.zeros_like(logp_all))).sum(-1).mean()
        loss = pg_loss + self.config.vf_coef * v_loss - self.config.ent_coef * entropy
        self.opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.config.max_grad_norm)
        self.opt.step()
        self.version += 1
        return {"tab/pg_loss": pg_loss.item(), "tab/v_loss": v_loss.item(), "tab/entropy": entropy.item(),
                "tab/approx_kl": (old_logprob - logprob.detach()).mean().item(),
                "tab/reward": rewards.mean().item(), "tab/value": value.mean().item()}

    def _adv_scale(self, adv: Any) -> float:
        """Fold this batch's advantages into the running moments; their running std."""
        import math

        st = self.adv_stats
        for x in adv.tolist():
            st["count"] += 1.0
            d = x - st["mean"]
            st["mean"] += d / st["count"]
            st["m2"] += d * (x - st["mean"])
        var = st["m2"] / st["count"] if st["count"] > 1 else 1.0
        return math.sqrt(var) + 1e-6

    def ppo_update(self, samples: Sequence[Sample], ppo: PPOConfig | None = None,
                   versions: set[int] | None = None, q_values: Sequence[Any] | None = None) -> dict[str, float]:
        """PPO-clip on one batch, several epochs, KL-guarded; bumps the version.

        ``q_values`` (optional): per sample, the estimated reward of each of its request's
        actions, indexed as :attr:`Action.index` (entry 0 "show nothing", then one per action
        row), from a model fitted without that sample's reward. The sampled action's advantage
        becomes reward − its estimate, and every action of the request is also pushed by its
        estimate minus their mean under the version that drew the batch (the module's
        docstring); both scaled as the advantages are.

        Samples must come from this version, or (``ppo.max_staleness`` > 0) from at most that
        many versions back — ``versions``, when given, names them (the live loop's numbers
        follow lineage, not arithmetic); any other raises :class:`OffPolicyError`. A stale sample's
        objective is weighted by min(c, π_current(a|s) / π_behaviour(a|s)), from the
        log-probability logged when it was drawn. Returns per-update statistics: reward and
        its standard error, KL to the previous version, clip fraction, grad norm, entropy,
        the epochs and steps run and the importance weights' mean and clipped share.
        """
        import math

        import torch

        ppo = ppo or PPOConfig()
        if not samples:
            raise ValueError("no samples")
        if q_values is not None:
            if len(q_values) != len(samples):
                raise ValueError(f"q_values: {len(q_values)} rows for {len(samples)} samples; give one per sample")
            wrong = [i for i, (s, q) in enumerate(zip(samples, q_values)) if len(q) != 1 + len(s.obs.rows)]
            if wrong:
                i = wrong[0]
                raise ValueError(f"q_values[{i}] has {len(q_values[i])} estimates for {1 + len(samples[i].obs.rows)} "
                                 f"actions (show nothing, then each action row); {len(wrong)} rows are wrong")
        self.scale_personal([s.obs for s in samples])
        lo = self.version - max(0, ppo.max_staleness)
        if versions is None or not ppo.max_staleness:
            versions = set(range(lo, self.version + 1)) if ppo.max_staleness else {self.version}
        bad = [s.version for s in samples if s.version not in versions]
        if bad:
            window = (f"versions {sorted(versions)}" if ppo.max_staleness
                      else f"the current version {self.version}")
            raise OffPolicyError(f"{len(bad)} of {len(samples)} samples come from policy version(s) "
                                 f"{sorted(set(bad))}, outside {window}; they are not used")
        if ppo.lr is not None:
            for group in self.opt.param_groups:
                group["lr"] = ppo.lr
        self.net.train()
        state, hidden, actions, mask = self._tensors([s.obs for s in samples])
        idx = torch.tensor([s.action.index for s in samples])
        rewards = torch.tensor([s.reward for s in samples], dtype=torch.float32)
        behaviour = torch.tensor([s.action.logprob for s in samples], dtype=torch.float32)
        stale = torch.tensor([s.version != self.version for s in samples])
        with torch.no_grad():
            logits0, value0 = self.net(state, hidden, actions, mask)
            logp0_all = torch.log_softmax(logits0, dim=-1)
            p0 = logp0_all.exp()
            logp0 = logp0_all.gather(1, idx[:, None]).squeeze(1)
            # importance weight of each sample towards the current (proximal) policy; on-policy: 1
            raw_w = torch.where(stale, (logp0 - behaviour).exp(), torch.ones_like(logp0))
            weight = raw_w.clamp(max=ppo.is_clip) if ppo.max_staleness else raw_w
            adv = rewards - value0
            scale = self._adv_scale(adv) if self.config.normalize_advantages else 1.0
            adv = adv / scale
            all_adv = None  # (B, 1 + A): every action's estimated advantage (with q_values)
            if q_values is not None:
                q = torch.zeros_like(logits0)
                for b, row in enumerate(q_values):
                    q[b, : len(row)] = torch.as_tensor(row, dtype=torch.float32)
                q_taken = q.gather(1, idx[:, None]).squeeze(1)
                adv = (rewards - q_taken) / scale
                all_adv = (q - (p0 * q).sum(1, keepdim=True)) / scale

        def kl_to_previous(logp_all: Any, rows: Any) -> Any:
            """Exact KL(previous ‖ current) over the actions, averaged over the states."""
            q = p0[rows]
            diff = torch.where(q > 0, logp0_all[rows] - logp_all, torch.zeros_like(logp_all))
            return (q * diff).sum(-1).mean()

        n = len(samples)
        gen = torch.Generator().manual_seed(ppo.seed + self.version)
        n_mb = max(1, min(ppo.minibatches, n))
        steps = 0
        epochs_run = 0
        stopped = False
        grad_norms: list[float] = []
        for _ in range(max(1, ppo.epochs)):
            perm = torch.randperm(n, generator=gen)
            for rows in torch.chunk(perm, n_mb):
                logits, value = self.net(state[rows], hidden[rows], actions[rows], mask[rows])
                logp_all = torch.log_softmax(logits, dim=-1)
                if steps and kl_to_previous(logp_all, rows).item() > ppo.target_kl:
                    stopped = True
                    break
                logp = logp_all.gather(1, idx[rows][:, None]).squeeze(1)
                ratio = (logp - logp0[rows]).exp()
                a, w = adv[rows], weight[rows]
                surrogate = torch.min(ratio * a, ratio.clamp(1 - ppo.clip, 1 + ppo.clip) * a)
                pg_loss = -(w * surrogate).mean()
                p = logp_all.exp()
                if all_adv is not None:  # every action of the request, by the model's estimate
                    pg_loss = pg_loss - (w * (p * all_adv[rows]).sum(-1)).mean()
                v_loss = 0.5 * (w * (value - rewards[rows]) ** 2).mean()
                entropy = -(p * torch.where(p > 0, logp_all, torch.zeros_like(logp_all))).sum(-1).mean()
                loss = pg_loss + self.config.vf_coef * v_loss - self.config.ent_coef * entropy
                self.opt.zero_grad()
                loss.backward()
                grad_norms.append(float(torch.nn.utils.clip_grad_norm_(self.net.parameters(),
                                                                       self.config.max_grad_norm)))
                self.opt.step()
                steps += 1
            if stopped:
                break
            epochs_run += 1
        self.net.eval()
        with torch.no_grad():
            logits, value = self.net(state, hidden, actions, mask)
            logp_all = torch.log_softmax(logits, dim=-1)
            logp = logp_all.gather(1, idx[:, None]).squeeze(1)
            ratio = (logp - logp0).exp()
            kl = kl_to_previous(logp_all, torch.arange(n)).item()
            p = logp_all.exp()
            entropy = -(p * torch.where(p > 0, logp_all, torch.zeros_like(logp_all))).sum(-1).mean()
            clip_frac = ((ratio - 1).abs() > ppo.clip).float().mean().item()
            v_loss = 0.5 * ((value - rewards) ** 2).mean().item()
        self.version += 1
        sd = rewards.std().item() if n > 1 else 0.0
        return {"tab/reward": rewards.mean().item(), "tab/reward_se": sd / math.sqrt(n),
                "tab/kl": kl, "tab/approx_kl": (logp0 - logp).mean().item(),
                "tab/clip_frac": clip_frac, "tab/grad_norm": sum(grad_norms) / max(1, len(grad_norms)),
                "tab/entropy": entropy.item(), "tab/v_loss": v_loss, "tab/value": value0.mean().item(),
                "tab/epochs": float(epochs_run), "tab/steps": float(steps),
                "tab/kl_stopped": float(stopped), "tab/stale_share": stale.float().mean().item(),
                "tab/is_weight": weight.mean().item(),
                "tab/is_clipped": (raw_w > ppo.is_clip).float().mean().item() if ppo.max_staleness else 0.0}

    # -- persistence -------------------------------------------------------------------
    def save(self, path: str | Path, meta: dict[str, Any] | None = None) -> None:
        """Weights (with the feature normalizer) in ``policy.safetensors``; the optimizer's
        state in ``optimizer.pt``, so that the next version's update continues it."""
        import torch
        from safetensors.torch import save_file

        p = Path(path)
        p.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in self.net.state_dict().items()}, str(p / "policy.safetensors"))
        if self.opt.state:
            torch.save(self.opt.state_dict(), p / OPTIMIZER_FILE)
        info = {"version": self.version, "config": asdict(self.config),
                "state_features": POLICY_STATE, "action_features": ACTION_FEATURES,
                "adv_stats": dict(self.adv_stats), **(meta or {})}
        (p / "policy.json").write_text(json.dumps(info, indent=1) + "\n")

    def state(self) -> dict[str, Any]:
        """What :meth:`from_state` needs to rebuild this policy elsewhere (another process)."""
        return {"config": asdict(self.config), "version": self.version,
                "weights": {k: v.detach().clone() for k, v in self.net.state_dict().items()},
                "trained_with": dict(self.trained_with), "adv_stats": dict(self.adv_stats)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "TabPolicy":
        policy = cls(PolicyConfig(**state["config"]), version=int(state["version"]))
        policy.net.load_state_dict(state["weights"])
        policy.net.eval()
        policy.trained_with = dict(state["trained_with"])
        policy.adv_stats = dict(state.get("adv_stats") or policy.adv_stats)
        return policy

    @classmethod
    def load(cls, path: str | Path) -> "TabPolicy":
        from safetensors.torch import load_file

        p = Path(path)
        info = json.loads((p / "policy.json").read_text())
        saved = info.get("state_features")
        if saved not in (POLICY_STATE, STATE_FEATURES) or info.get("action_features") != ACTION_FEATURES:
            raise ValueError(f"{p}: the policy was trained on other features; retrain it")
        fields = PolicyConfig.__dataclass_fields__
        config = PolicyConfig(**{k: v for k, v in info["config"].items() if k in fields})
        config.n_state = len(POLICY_STATE)
        policy = cls(config, version=int(info["version"]))
        weights = load_file(str(p / "policy.safetensors"))
        if saved == STATE_FEATURES:  # saved before the personal inputs: theirs start at zero
            weights = _with_personal(weights)
        own_layer = "personal.weight" not in weights and policy.net.personal is not None
        if own_layer:  # saved before the personal inputs had a layer of their own: zero
            weights = {**weights, "personal.weight": policy.net.personal.weight.detach().new_zeros(
                policy.net.personal.weight.shape)}
        policy.net.load_state_dict(weights)
        policy.net.eval()
        policy.trained_with = dict(info.get("train_args") or {})
        policy.adv_stats = {k: float(v) for k, v in (info.get("adv_stats") or policy.adv_stats).items()}
        if (p / OPTIMIZER_FILE).exists():
            import torch

            opt = torch.load(p / OPTIMIZER_FILE, weights_only=True)
            if saved == STATE_FEATURES:  # the first state layer's moments, widened with zeros
                n_old = len(STATE_FEATURES)
                for st in opt.get("state", {}).values():
                    for k, v in list(st.items()):
                        if hasattr(v, "shape") and v.dim() >= 1 and v.shape[-1] == n_old \
                                and v.dim() == 2:
                            st[k] = torch.cat([v, v.new_zeros(v.shape[0], len(PERSONAL_FEATURES))], 1)
            if own_layer:  # the personal layer is the last parameter: no moments yet (Adam starts them)
                groups = opt["param_groups"]
                groups[-1]["params"] = list(groups[-1]["params"]) + [
                    1 + max(i for g in groups for i in g["params"])]
            policy.opt.load_state_dict(opt)
        return policy


def _with_personal(weights: dict[str, Any]) -> dict[str, Any]:
    """Weights saved with ``STATE_FEATURES`` alone, widened to :data:`POLICY_STATE`: the
    personal inputs' first-layer weights zero, their normalizer the identity."""
    import torch

    n = len(PERSONAL_FEATURES)
    out = dict(weights)
    w = out["state.0.weight"]
    out["state.0.weight"] = torch.cat([w, w.new_zeros(w.shape[0], n)], 1)
    out["s_mean"] = torch.cat([out["s_mean"], out["s_mean"].new_zeros(n)])
    out["s_std"] = torch.cat([out["s_std"], out["s_std"].new_ones(n)])
    return out
