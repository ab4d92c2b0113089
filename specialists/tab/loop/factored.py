"""A learner that splits "will this suggestion be accepted?" in two (issue 35, personalisation).

The policy gradient learns only from what it showed: a person who takes only long suggestions,
which are seldom right, is never shown the long cuts that would serve them, so the loop never
learns that they would. But whether a cut is *right* — what the person goes on to type — the
server reads for every candidate of every request, shown or not, from everyone, whatever they
accept. So :class:`FactoredCuts` estimates

    P(accepted) = P(right | the cut, the request)  ×  P(taken | right, its length, this person)

* **rightness** (:class:`Logistic` on :func:`right_features`): the cut's action features, its
  log length, the two multiplied, and the request's state; every candidate of every logged
  request labelled by whether the person typed it next (:func:`typed_next`: a completion at
  the cursor that the rest of what they typed starts with). Plenty of labels from the first
  turn on.
* **taken**: per editor session, the share of *right* cuts shown that were accepted, read
  from the server's record (:class:`Tastes`, kept like
  :class:`~specialists.tab.personal.Tracker`), in one of two shapes (``taste``):
  ``bands`` — a Beta posterior per length band (:data:`BANDS`), its prior the share over
  every session (``prior`` pseudo-counts); ``curve`` — a logistic curve in log length
  (:func:`curve_fit`), its Gaussian prior everyone's curve, with a covariance as wide as the
  collecting sessions' curves lie apart (``update(..., tastes)``), so one length shown tells
  of the lengths near it; ``mixture`` — kinds of taste (:func:`latent_kinds`: a mixture of
  such curves, as many as the collecting sessions bear out, each session wholly of one kind),
  and per session how likely it is of each kind, so one right cut taken or dismissed at one
  length tells of every length: a person who dismissed a right word is of the kind that
  takes lines, when the collecting sessions were of two such kinds. Few labels, so it
  explores by Thompson sampling: a person whose
  taste for long cuts nobody has seen gets some shown while the posterior is wide, and one
  who dismissed a few right ones is shown fewer of that length.

Each request shows the cut of highest expected reward, ``q·gain(len) + (1 − q)·dismiss`` with
``q`` the product above and ``gain`` the reward of an accepted cut (for the kept reward,
``per_char`` × its length × the share of accepted characters kept so far), where that beats
showing nothing. Without a per-session record (``tastes=None``) the taken share is the one
over everyone: the same learner, global. Where it keeps a per-session record it also *serves*
by Thompson draws (``choose_many(explore=True)``): a session's shares are learnt from what it
is shown, and a greedy choice from the prior would never try the length a new person takes.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Sequence

from specialists.tab.features import STATE_FEATURES, Observation, state_vector
from specialists.tab.types import Suggestion

__all__ = ["Logistic", "Net", "FactoredCuts", "Tastes", "Hits", "Dismissals", "BANDS", "TASTES", "RIGHT_MODELS", "HIT_FEATURES",
           "band", "latent_kinds", "right_features", "typed_next"]

TASTES = ("bands", "curve", "mixture")
"""The shapes of a session's taken share (:class:`FactoredCuts`'s ``taste``)."""

BANDS = (8, 16, 32)
"""Length bands' edges (characters): a cut of fewer than 8, 8–15, 16–31, or 32 and more."""


def band(chars: int) -> int:
    """The length band (index) of a cut of ``chars`` characters."""
    return bisect_right(BANDS, chars)


def _sigmoid(z: Any) -> Any:
    import numpy as np

    return 1.0 / (1.0 + np.exp(-np.clip(z, -40.0, 40.0)))


def _hessian(z: Any, w: Any, precision: Any, weight: Any = 1.0) -> Any:
    """The penalised logistic loss's Hessian at ``w`` (inputs ``z``, Gaussian penalty
    ``precision``, each row counted ``weight`` times)."""
    p = _sigmoid(z @ w)
    return (z * (weight * p * (1 - p))[:, None]).T @ z + precision


def _newton_step(z: Any, y: Any, w: Any, mean: Any, precision: Any, weight: Any = 1.0) -> Any:
    """Newton's step for the logistic loss of ``y`` on ``z`` (each row counted ``weight``
    times) plus ½(w − mean)ᵀ·precision·(w − mean)."""
    import numpy as np

    grad = z.T @ (weight * (_sigmoid(z @ w) - y)) + precision @ (w - mean)
    return np.linalg.solve(_hessian(z, w, precision, weight), grad)


def _inputs(who: str, dim: int, x: Any, y: Any) -> tuple[Any, Any]:
    """``x`` (rows, ``dim``) and ``y`` (rows,) as float arrays, or a ValueError naming ``who``."""
    import numpy as np

    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.ndim != 2 or x.shape[1] != dim or len(x) != len(y):
        raise ValueError(f"{who}: want ({len(y)}, {dim}) inputs, got {x.shape}")
    return x, y


def _scaling(x: Any) -> tuple[Any, Any]:
    """Each input's mean and spread over ``x``; an input constant in ``x`` keeps spread 1
    (left unscaled), so a later value of it does not blow up through a vanishing spread."""
    import numpy as np

    spread = x.std(0)
    return x.mean(0), np.where(spread > 1e-6, spread, 1.0)


def _lengths_taken(shown: Sequence[tuple[int, bool]]) -> tuple[Any, list[bool]]:
    """Right cuts shown, (characters, accepted) each, as a taken curve reads them: their log
    lengths and whether each was taken."""
    import numpy as np

    return np.log1p([c for c, _ in shown]), [a for _, a in shown]


def _calibration_inputs(p: Any, log_len: Any) -> Any:
    """What the calibration of P(right) reads (``FactoredCuts(calibrate=...)``): the model's
    logit, the cut's log length, the two multiplied."""
    import numpy as np

    p = np.clip(np.asarray(p, np.float64), 1e-4, 1 - 1e-4)
    z = np.log(p / (1 - p))
    log_len = np.asarray(log_len, np.float64)
    return np.stack([z, log_len, z * log_len], axis=1)


def right_features(obs: Observation) -> Any:
    """Per cut (action row): its action features, log length, the two multiplied, and the
    request's state (static and dynamic; not the personal history); where the observation
    carries :class:`Hits` (``obs.hits``), those too, alone and times the log length."""
    import numpy as np

    x = np.asarray(obs.actions, np.float64)
    lens = np.log1p([len(obs.suggestion(i).text) for i in range(len(obs.rows))])[:, None]
    state = np.asarray(state_vector(obs), np.float64)[: len(STATE_FEATURES)]
    parts = [x, lens, x * lens, np.broadcast_to(state, (len(x), len(state)))]
    if obs.hits is not None:
        hits = np.broadcast_to(np.asarray(obs.hits, np.float64), (len(x), len(obs.hits)))
        parts += [hits, hits * lens]
    return np.concatenate(parts, axis=1)


HIT_FEATURES = ("log_resolved", "log_long_right", "log_long_wrong", "long_right_share", "mean_log_best")
"""What :meth:`Hits.request` returns, in order."""


@dataclass
class Hits:
    """Per editor session, how the cuts the server had on offer lately fared against what the
    person then typed (issue 35): where this session's long cuts kept turning out right, the
    next long one is likelier right; where they kept going wrong — a file the model reads
    badly —, less likely. Copilot's filter weighs the previous label most (PRIOR_ART.md);
    this is that label for the model's own cuts, shown or not, read as
    :func:`typed_next` reads them.

    :meth:`request` takes each request's place (which hunk; any key) and ``rest`` (what is
    typed from the cursor on there). Of ``rest`` it reads only what a server has seen by
    then: the difference between an earlier request's rest and this one's — the characters
    typed (or accepted) in between —, or, once the person is typing elsewhere, the whole of
    the earlier place's rest. A cut is settled right once that text starts with it, wrong
    once the two part, or once the person moved on before typing it all. A request is
    settled when all of its cuts are; then it counts, its weight fading by ``decay`` per
    later settled request: whether it had a cut of ``long`` characters or more that was
    right, or had such cuts and none was right, and the log length of its longest right cut.
    ``most``: requests left unsettled per session beyond this are dropped (oldest first);
    ``max_keys``: sessions kept (least recently used dropped)."""

    long: int = 16
    decay: float = 0.9
    most: int = 32
    max_keys: int = 10_000
    _open: "OrderedDict[Any, list]" = field(default_factory=OrderedDict, init=False, repr=False)
    _counts: dict = field(default_factory=dict, init=False, repr=False)

    @staticmethod
    def _verdict(cut: str, typed: str, done: bool) -> bool | None:
        k = min(len(cut), len(typed))
        if cut[:k] != typed[:k]:
            return False
        if len(typed) >= len(cut):
            return True
        return False if done else None

    def request(self, session: Any, place: Any, rest: str, obs: Observation) -> Any:
        """This request's features (:data:`HIT_FEATURES`) from what ``session``'s earlier
        requests turned out to be, settled by what was typed since; then ``obs``'s cuts at
        the cursor are kept open to be settled by what comes next."""
        import numpy as np

        pending = self._open.get(session)
        if pending is None:
            pending = self._open[session] = []
            self._counts[session] = [0.0, 0.0, 0.0, 0.0]
            while len(self._open) > self.max_keys:
                self._counts.pop(self._open.popitem(last=False)[0], None)
        else:
            self._open.move_to_end(session)
        counts = self._counts[session]
        still = []
        for where, before, cuts in pending:
            typed, done = _typed_since(where, before, place, rest)
            verdicts = [self._verdict(c, typed, done) for c in cuts]
            if any(v is None for v in verdicts):
                still.append((where, before, cuts))
                continue
            right = [len(c) for c, v in zip(cuts, verdicts) if v]
            has_long = any(len(c) >= self.long for c in cuts)
            long_right = any(n >= self.long for n in right)
            for j, add in enumerate((1.0, float(long_right), float(has_long and not long_right),
                                     math.log1p(max(right, default=0)))):
                counts[j] = counts[j] * self.decay + add
        texts = [t for t in (_completion(obs.suggestion(i), obs.cursor) for i in range(len(obs.rows))) if t]
        if texts:
            still.append((place, rest, sorted(set(texts))))
        self._open[session] = still[-self.most:]
        n, lr, lw, best = counts
        return np.array([math.log1p(n), math.log1p(lr), math.log1p(lw), (lr + 0.5) / (lr + lw + 1.0),
                         best / n if n > 0 else 0.0], np.float32)


def _completion(s: Suggestion, cursor: int) -> str:
    """``s``'s text where it is a completion at ``cursor``, else ""."""
    return s.text if s.text and not s.jump and s.start == s.end == cursor else ""


def _typed_since(where: Any, before: str, place: Any, rest: str) -> tuple[str, bool]:
    """What a server has seen typed since a request made at ``where`` with ``before`` to come,
    now that one at ``place`` has ``rest`` to come (:class:`Hits`, :class:`Dismissals`): the
    characters between the two rests, and False; or, once the person is typing elsewhere,
    the whole of ``before``, and True (they moved on)."""
    if where != place or not before.endswith(rest):
        return before, True
    return before[: len(before) - len(rest)], False


@dataclass
class Dismissals:
    """Per editor session, the suggestions it was shown lately and dismissed, followed as the
    person types on (issue 35): while what they type keeps to a dismissed suggestion, a cut
    that carries it on — its text starts with the part not yet typed — is the same guess
    again, and the dismissal is evidence on it. How much, the person's taste says
    (:meth:`FactoredCuts.expected`): someone who takes every right line they are shown and
    dismissed this one says it is wrong; someone who takes only a word says nothing of its
    rightness. Places and rests are read as :class:`Hits` reads them (only what was typed
    in between); a dismissed suggestion is let go once the typing parts from it, reaches its
    end, or moves elsewhere. ``most``: dismissals kept per session; ``max_keys``: sessions."""

    most: int = 8
    max_keys: int = 10_000
    _kept: "OrderedDict[Any, list]" = field(default_factory=OrderedDict, init=False, repr=False)

    def request(self, session: Any, place: Any, rest: str, obs: Observation) -> list[tuple[int, ...]]:
        """Per row of ``obs``, the shown lengths of the session's dismissed suggestions its cut
        carries on (empty where none)."""
        live, ahead = [], []
        for where, before, text in self._kept.get(session, []):
            typed, moved = _typed_since(where, before, place, rest)
            if moved or not text.startswith(typed) or len(typed) >= len(text):
                continue
            live.append((where, before, text))
            ahead.append((text[len(typed):], len(text)))
        if session in self._kept:
            self._kept[session] = live
        out = []
        for i in range(len(obs.rows)):
            cut = _completion(obs.suggestion(i), obs.cursor)
            out.append(tuple(n for left, n in ahead if cut and cut.startswith(left)))
        return out

    def dismissed(self, session: Any, place: Any, rest: str, shown: Suggestion, cursor: int) -> None:
        """``session`` was shown ``shown`` at the request made at ``place`` (its cursor
        ``cursor``) with ``rest`` to come, and dismissed it; only a completion at the cursor
        is followed."""
        text = _completion(shown, cursor)
        if not text:
            return
        kept = self._kept.get(session)
        if kept is None:
            kept = self._kept[session] = []
            while len(self._kept) > self.max_keys:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(session)
        kept.append((place, rest, text))
        del kept[:-self.most]


def typed_next(obs: Observation, rest: str, cursor: int) -> list[bool]:
    """Which of ``obs``'s cuts the person typed next: a completion at ``cursor`` that ``rest``
    (what they went on to type there) starts with — what a server reads from the next
    requests' text, for cuts it never showed as well as for the one it did."""
    out = []
    for i in range(len(obs.rows)):
        text = _completion(obs.suggestion(i), cursor)
        out.append(bool(text) and rest.startswith(text))
    return out


class Logistic:
    """L2-regularised logistic regression (Newton's method, warm-started) on standardised inputs."""

    def __init__(self, dim: int, ridge: float = 1.0) -> None:
        import numpy as np

        self.dim, self.ridge = dim, ridge
        self.mean = np.zeros(dim)
        self.std = np.ones(dim)
        self.w = np.zeros(dim + 1)
        self.n = 0

    def fit(self, x: Any, y: Any, steps: int = 8, tol: float = 1e-6) -> "Logistic":
        """Newton's method from the last fit's weights, each step halved until the penalised
        loss falls. An input constant in ``x`` is left unscaled (its weight stays 0), so a
        later value of it does not blow up through a vanishing spread."""
        import numpy as np

        x, y = _inputs("Logistic.fit", self.dim, x, y)
        self.n = len(y)
        if not len(y):
            return self
        old_mean, old_std = self.mean, self.std
        self.mean, self.std = _scaling(x)
        # the warm start keeps its function while the scaling moves
        shift = float(self.w[1:] @ ((self.mean - old_mean) / old_std))
        self.w = np.concatenate([[self.w[0] + shift], self.w[1:] * self.std / old_std])
        z = np.concatenate([np.ones((len(x), 1)), (x - self.mean) / self.std], axis=1)
        reg = self.ridge * np.eye(z.shape[1])
        reg[0, 0] = 1e-4

        def loss(w: Any) -> float:
            m = z @ w
            return float(np.logaddexp(0.0, m).sum() - y @ m + 0.5 * w @ reg @ w)

        now = loss(self.w)
        if not np.isfinite(now):
            self.w = np.zeros_like(self.w)
            now = loss(self.w)
        for _ in range(steps):
            step = _newton_step(z, y, self.w, 0.0, reg)
            for _ in range(20):
                after = loss(self.w - step)
                if after <= now:
                    break
                step = step / 2
            else:
                break
            self.w, now = self.w - step, after
            if float(np.abs(step).max()) < tol:
                break
        return self

    def prob(self, x: Any) -> Any:
        import numpy as np

        x = np.asarray(x, np.float64)
        return _sigmoid(((x - self.mean) / self.std) @ self.w[1:] + self.w[0])


class Net:
    """A small network for P(right) (``FactoredCuts(right_model="net")``): two hidden layers
    of ``hidden`` ReLU units on standardised inputs, trained afresh at each fit for
    ``epochs`` passes of AdamW (the log loss; at least ``min_steps`` batches of 512), from a
    fixed seed; a forward pass in numpy.
    Rightness is not linear in the cut's features — a long cut copied from nearby is right
    for other reasons than a short one the LM wrote — and a network can read that."""

    def __init__(self, dim: int, hidden: int = 64, epochs: int = 2, lr: float = 3e-3,
                 weight_decay: float = 1e-4, seed: int = 0, min_steps: int = 300) -> None:
        import numpy as np

        self.dim, self.hidden, self.epochs, self.lr, self.weight_decay, self.seed, self.min_steps = \
            dim, hidden, epochs, lr, weight_decay, seed, min_steps
        self.mean, self.std = np.zeros(dim), np.ones(dim)
        self.layers: list[tuple[Any, Any]] = []
        self.n = 0

    def fit(self, x: Any, y: Any) -> "Net":
        import numpy as np
        import torch

        x, y = _inputs("Net.fit", self.dim, x, y)
        self.n = len(y)
        if not len(y):
            return self
        self.mean, self.std = _scaling(x)
        gen = torch.Generator().manual_seed(self.seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            net = torch.nn.Sequential(torch.nn.Linear(self.dim, self.hidden), torch.nn.ReLU(),
                                      torch.nn.Linear(self.hidden, self.hidden), torch.nn.ReLU(),
                                      torch.nn.Linear(self.hidden, 1))
        inputs = torch.tensor((x - self.mean) / self.std, dtype=torch.float32)
        labels = torch.tensor(y, dtype=torch.float32)
        opt = torch.optim.AdamW(net.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        batches = -(-len(labels) // 512)
        for _ in range(max(self.epochs, -(-self.min_steps // batches))):  # a few rows: more passes
            order = torch.randperm(len(labels), generator=gen)
            for i in range(0, len(labels), 512):
                rows = order[i:i + 512]
                loss = torch.nn.functional.binary_cross_entropy_with_logits(net(inputs[rows]).squeeze(1), labels[rows])
                opt.zero_grad()
                loss.backward()
                opt.step()
        self.layers = [(m.weight.detach().numpy().astype(np.float64).T, m.bias.detach().numpy().astype(np.float64))
                       for m in net if isinstance(m, torch.nn.Linear)]
        return self

    def prob(self, x: Any) -> Any:
        import numpy as np

        h = (np.asarray(x, np.float64) - self.mean) / self.std
        if not self.layers:
            return np.full(len(h), 0.5)
        for i, (w, b) in enumerate(self.layers):
            h = h @ w + b
            if i < len(self.layers) - 1:
                h = np.maximum(h, 0.0)
        return _sigmoid(h[:, 0])


RIGHT_MODELS = ("logistic", "net")
"""What P(right) is (:class:`FactoredCuts`'s ``right_model``): :class:`Logistic` or :class:`Net`."""

CENTRE = math.log1p(16)
"""The log length the taken curve's intercept is read at (a cut of 16 characters)."""


def _design(x: Any) -> Any:
    import numpy as np

    return np.stack([np.ones(len(x)), np.asarray(x, np.float64) - CENTRE], axis=1)


def curve_fit(x: Any, y: Any, mean: Any, precision: Any, steps: int = 8, weight: Any = 1.0) -> tuple[Any, Any]:
    """P(taken | right) = sigmoid(w₀ + w₁·(log1p(length) − :data:`CENTRE`)) for one session (or
    everyone), ``x`` its cuts' log lengths, ``y`` taken or not (each counted ``weight``
    times): the posterior mode under a Gaussian prior (``mean``, ``precision``) and the
    Cholesky factor of its Laplace covariance."""
    import numpy as np

    z, y = _design(x), np.asarray(y, np.float64)
    w = np.array(mean, np.float64)
    for _ in range(steps):
        step = _newton_step(z, y, w, mean, precision, weight)
        w = w - step
        if float(np.abs(step).max()) < 1e-6:
            break
    return w, np.linalg.cholesky(np.linalg.inv(_hessian(z, w, precision, weight)))


def _loglik(x: Any, y: Any, w: Any) -> float:
    """The log likelihood of taken-or-not ``y`` at log lengths ``x`` under the curve ``w``."""
    import numpy as np

    m = _design(x) @ w
    return float(np.asarray(y, np.float64) @ m - np.logaddexp(0.0, m).sum())


def latent_kinds(sessions: Sequence[tuple[Any, Any]], mean: Any, precision: Any, most: int = 3,
                 iters: int = 30) -> list[tuple[float, Any, Any]]:
    """Kinds of taste among ``sessions`` (each its right cuts' log lengths and taken-or-not): a
    mixture of taken curves, each session wholly of one unknown kind (EM: a kind's curve is
    fitted on every session's cuts weighted by how likely that session is of it; the prior
    ``mean``, ``precision`` keeps a kind of few cuts near everyone's curve). From 1 to
    ``most`` kinds, as many as the Bayesian information criterion picks, each started from
    the sessions farthest apart. Returns [(share, curve, Cholesky factor of its covariance)]."""
    import numpy as np

    sessions = [(np.asarray(x, np.float64), np.asarray(y, np.float64)) for x, y in sessions if len(x)]
    if not sessions:
        return [(1.0, np.asarray(mean, np.float64), np.linalg.cholesky(np.linalg.inv(precision)))]
    x_all = np.concatenate([x for x, _ in sessions])
    y_all = np.concatenate([y for _, y in sessions])
    owner = np.concatenate([np.full(len(x), i) for i, (x, _) in enumerate(sessions)])
    # each session's own curve, to start the kinds from the ones farthest apart
    own = np.array([curve_fit(x, y, mean, precision)[0] for x, y in sessions])
    best, best_bic = None, math.inf
    for k in range(1, min(most, len(sessions)) + 1):
        starts = [int(np.argmax(((own - own.mean(0)) ** 2).sum(1)))] if k > 1 else []
        while k > 1 and len(starts) < k:
            gap = np.min([((own - own[j]) ** 2).sum(1) for j in starts], axis=0)
            starts.append(int(np.argmax(gap)))
        if k == 1:
            resp = np.ones((len(sessions), 1))
        else:  # each session to its nearest start
            resp = np.eye(k)[np.argmin([((own - own[j]) ** 2).sum(1) for j in starts], axis=0)]
        last = -math.inf
        for _ in range(iters):
            shares = (resp.sum(0) + 1e-3) / (len(sessions) + 1e-3 * k)
            fits = [curve_fit(x_all, y_all, mean, precision, weight=resp[owner, j]) for j in range(k)]
            ll = np.array([[_loglik(x, y, w) for w, _ in fits] for x, y in sessions]) + np.log(shares)
            top = ll.max(1, keepdims=True)
            total = top[:, 0] + np.log(np.exp(ll - top).sum(1))
            resp = np.exp(ll - total[:, None])
            now = float(total.sum())
            if now - last < 1e-6:
                break
            last = now
        bic = -2 * last + (3 * k - 1) * math.log(len(y_all))
        if bic < best_bic:
            best, best_bic = [(float(shares[j]), fits[j][0], fits[j][1]) for j in range(k)], bic
    return best  # type: ignore[return-value]


@dataclass
class Tastes:
    """Per editor session, the right cuts shown and how many were accepted, by length band
    (:data:`BANDS`): what this server showed and what came of it, kept as
    :class:`~specialists.tab.personal.Tracker` keeps its history (least recently used dropped
    beyond ``max_keys``)."""

    max_keys: int = 10_000
    max_each: int = 200
    counts: "OrderedDict[str, list[list[float]]]" = field(default_factory=OrderedDict)
    shown: dict[str, list[tuple[int, bool]]] = field(default_factory=dict)
    """Per session, its latest ``max_each`` right cuts shown: (characters, accepted)."""
    fits: dict[str, tuple] = field(default_factory=dict)
    """Per session, a learner's last curve fit of it (:meth:`FactoredCuts.curve`), with what
    it was fitted from: kept here, with the record it reads, so no other record's can be read."""

    def record(self, session: str, chars: int, accepted: bool) -> None:
        """A right cut of ``chars`` characters shown to ``session``: ``accepted`` or not."""
        c = self.counts.get(session)
        if c is None:
            c = self.counts[session] = [[0.0, 0.0] for _ in range(len(BANDS) + 1)]
            self.shown[session] = []
            while len(self.counts) > self.max_keys:
                gone = self.counts.popitem(last=False)[0]
                self.shown.pop(gone, None)
                self.fits.pop(gone, None)
        else:
            self.counts.move_to_end(session)
        c[band(chars)][0 if accepted else 1] += 1.0
        self.shown[session] = (self.shown[session] + [(chars, accepted)])[-self.max_each:]

    def of(self, session: str) -> list[list[float]]:
        """[accepted, dismissed] per band for ``session`` (zeros for one never seen)."""
        return self.counts.get(session) or [[0.0, 0.0] for _ in range(len(BANDS) + 1)]


@dataclass
class FactoredCuts:
    """P(right) × P(taken | right) over the policy's own cuts; see the module docstring.

    ``per_char`` / ``accept``: the reward of an accepted cut (``per_char`` × kept characters
    when it is > 0, else ``accept``); ``dismiss``: of a dismissed one; ``none``: of showing
    nothing. ``taste``: how the taken share reads length — ``bands`` (a Beta per session and
    band, ``prior`` pseudo-counts at the share over everyone), ``curve`` (per session a
    logistic curve in log length, :func:`curve_fit`, its prior the curve over everyone with
    ``spread`` standard deviation per weight: what a session shows of one length tells of the
    lengths near it) or ``mixture`` (kinds of taste read from the collecting sessions'
    record, :meth:`_kinds`; a session is of each kind as likely as what it did says, and is
    served by a kind drawn so; without that record, one kind: everyone's curve).
    ``max_rows``: the rightness model learns from the latest this many candidates;
    ``right_model``: :class:`Logistic` (``logistic``) or a small network (:class:`Net`, ``net``).
    ``calibrate``: the share of the latest rows held out to calibrate P(right) on (0: none):
    a model fitted on the rows before them predicts them, and a logistic regression of what
    was right on its logit, the cut's log length and the two multiplied maps every later
    prediction (:meth:`right_prob`). The history a version serves comes after the one it
    learnt from, and there a long cut the model rates likely is right far less often than it
    says; this reads by how much, as the latest rows show it."""

    per_char: float = 0.1
    accept: float = 0.75
    dismiss: float = -0.25
    none: float = 0.0
    ridge: float = 1.0
    prior: float = 2.0
    taste: str = "bands"
    spread: float = 1.5
    max_rows: int = 300_000
    right_model: str = "logistic"
    calibrate: float = 0.0
    seed: int = 0
    serve_as: int | str | None = None
    """Serve every request as one kind's taste (an index of :meth:`kind_curves`) or as
    ``"mixture"`` (a person of no record: the kinds' curves weighted by their shares), whoever
    asks: single global policies at this learner's rightness — the first what one kind is
    served by a policy that treats everyone as of that kind, the second the policy best for a
    person drawn at random, as the learner reads them. None: by the session's record."""
    right: Any = field(init=False)
    fitted: bool = field(init=False, default=False)
    pooled: list = field(init=False)
    """[accepted, dismissed] per band over every session: the right cuts shown."""

    def __post_init__(self) -> None:
        import numpy as np

        if self.right_model not in RIGHT_MODELS:
            raise ValueError(f"FactoredCuts: right_model {self.right_model!r} is not one of {', '.join(RIGHT_MODELS)}")
        self.right = self._new_right(0)  # sized at the first update (the action features' count)
        if self.taste not in TASTES:
            raise ValueError(f"FactoredCuts: taste {self.taste!r} is not one of {', '.join(TASTES)}")
        self.pooled = [[0.0, 0.0] for _ in range(len(BANDS) + 1)]
        self._pooled_shown: list[tuple[int, bool]] = []
        self._curve = (np.zeros(2), np.eye(2) * 10.0)  # everyone's curve: its mode and covariance factor
        self._version = 0  # one more at each update: a per-session fit from an older one is stale
        self._prior_cov = np.eye(2) * self.spread ** 2
        self._mixture = [(1.0, np.zeros(2), np.eye(2) * self.spread)]  # kinds of taste: (share, curve, cov. factor)
        self._rx: list[Any] = []
        self._ry: list[Any] = []
        self._rl: list[Any] = []  # each row's log length (the calibration's input)
        self._calibration: Logistic | None = None
        if not 0.0 <= self.calibrate < 1.0:
            raise ValueError(f"FactoredCuts: calibrate {self.calibrate} is a share of rows, at least 0 and under 1")
        self._kept = 0.0
        self._accepted_chars = 0.0
        self._rng = np.random.default_rng(self.seed)

    def _new_right(self, dim: int) -> Any:
        return Logistic(dim, self.ridge) if self.right_model == "logistic" else Net(dim, seed=self.seed)

    @classmethod
    def for_reward(cls, reward: Any, **kw: Any) -> "FactoredCuts":
        """One for ``reward``: a :class:`~specialists.tab.rewards.KeptReward` or a
        :class:`~specialists.tab.replay.RewardConfig`."""
        if hasattr(reward, "dismiss"):
            return cls(per_char=reward.per_char, dismiss=reward.dismiss, none=reward.none, **kw)
        return cls(per_char=0.0, accept=reward.accept, dismiss=reward.reject, none=reward.none, **kw)

    @property
    def kept_share(self) -> float:
        """Accepted characters kept, over the characters of accepted cuts (1 before any)."""
        return (self._kept + 1.0) / (self._accepted_chars + 1.0)

    def update(self, events: Sequence[tuple[Observation, Sequence[bool], int, bool, int]],
               tastes: Tastes | None = None) -> dict[str, float]:
        """Learn from logged events, each (observation, typed-next label per cut, shown index
        — 0 nothing, ``i + 1`` row ``i`` —, accepted, characters kept); refit the rightness
        model and add the shown right cuts to the share over everyone. ``tastes`` (``curve``):
        the record of the sessions that collected; how far their curves lie from everyone's
        sets a new session's prior (:meth:`_between`), so the loop tries as widely as its
        people differ."""
        import numpy as np

        for obs, labels, index, accepted, kept in events:
            if not len(obs.rows):
                continue
            if len(labels) != len(obs.rows):
                raise ValueError(f"FactoredCuts.update: {len(labels)} labels for {len(obs.rows)} cuts")
            self._rx.append(right_features(obs))
            self._ry.append(np.asarray(labels, np.float64))
            self._rl.append(np.log1p([len(obs.suggestion(i).text) for i in range(len(obs.rows))]))
            if index > 0:
                chars = len(obs.suggestion(index - 1).text)
                if accepted:
                    self._kept += kept
                    self._accepted_chars += chars
                if labels[index - 1]:
                    self.pooled[band(chars)][0 if accepted else 1] += 1.0
                    self._pooled_shown.append((chars, bool(accepted)))
        if not self._rx:
            raise ValueError("FactoredCuts.update: no event with a cut to learn from")
        rx, ry, rl = np.concatenate(self._rx), np.concatenate(self._ry), np.concatenate(self._rl)
        if len(ry) > self.max_rows:  # keep the latest
            rx, ry, rl = rx[-self.max_rows:], ry[-self.max_rows:], rl[-self.max_rows:]
        self._rx, self._ry, self._rl = [rx], [ry], [rl]
        if self.right.dim != rx.shape[1]:
            self.right = self._new_right(rx.shape[1])
        held = int(len(ry) * self.calibrate)
        if held >= 200 and len(ry) - held >= 200:  # fitted on the earlier rows, read on the latest
            early = self._new_right(rx.shape[1]).fit(rx[:-held], ry[:-held])
            self._calibration = Logistic(3).fit(_calibration_inputs(early.prob(rx[-held:]), rl[-held:]), ry[-held:])
        self.right.fit(rx, ry)
        if self._pooled_shown:
            self._curve = curve_fit(*_lengths_taken(self._pooled_shown), np.zeros(2), np.eye(2) * 0.01)
        self._prior_cov = self._between(tastes) if tastes is not None and self.taste == "curve" \
            else np.eye(2) * self.spread ** 2
        if self.taste == "mixture":
            self._mixture = self._kinds(tastes) if tastes is not None else [(1.0, *self._curve)]
        self._version += 1
        self.fitted = True
        return {"right_rows": float(len(ry)), "right_share": float(ry.mean()),
                "taken_rows": float(sum(a + d for a, d in self.pooled)),
                **{f"taken_band{b}": round(self._share(*self.pooled[b]), 4) for b in range(len(self.pooled))},
                "kept_share": self.kept_share, "taste_kinds": float(len(self._mixture))}

    @staticmethod
    def _share(accepted: float, dismissed: float) -> float:
        return (accepted + 1.0) / (accepted + dismissed + 2.0)

    def taken(self, mine: Sequence[Sequence[float]] | None, explore: bool) -> Any:
        """P(taken | right) per band for a session with counts ``mine`` ([accepted, dismissed]
        per band; None: the share over everyone): the posterior mean, or (``explore``) a draw."""
        import numpy as np

        out = np.empty(len(self.pooled))
        for b, (acc, dis) in enumerate(self.pooled):
            share = self._share(acc, dis)
            if mine is None:  # global: the pooled posterior itself
                a, d = acc + 1.0, dis + 1.0
            else:
                a, d = self.prior * share + mine[b][0], self.prior * (1 - share) + mine[b][1]
            out[b] = self._rng.beta(a, d) if explore else a / (a + d)
        return out

    def _between(self, tastes: Tastes, least: int = 5) -> Any:
        """The prior covariance of a session's curve about everyone's: the spread of the
        curves of the sessions in ``tastes`` with at least ``least`` right cuts shown (each
        fitted with the ``spread`` prior) about it, added to ``spread``² per weight."""
        import numpy as np

        base, _ = self._curve
        prec = np.eye(2) / self.spread ** 2
        ws = [curve_fit(*_lengths_taken(shown), base, prec)[0]
              for shown in tastes.shown.values() if len(shown) >= least]
        cov = np.eye(2) * self.spread ** 2
        if len(ws) >= 2:
            d = np.asarray(ws) - base
            cov = cov + d.T @ d / len(ws)
        return cov

    def _kinds(self, tastes: Tastes) -> list[tuple[float, Any, Any]]:
        """``taste="mixture"``: the kinds of taste among the sessions in ``tastes``
        (:func:`latent_kinds`, each kind's prior everyone's curve, ``spread`` wide)."""
        import numpy as np

        return latent_kinds([_lengths_taken(shown) for shown in tastes.shown.values()],
                            self._curve[0], np.eye(2) / self.spread ** 2)

    def _stamp(self, session: str, tastes: Tastes) -> tuple:
        """What a session's fit kept in ``tastes.fits`` was made from: this learner, its
        version, and the session's count of records ever (a fit with another stamp is stale)."""
        return id(self), self._version, sum(a + d for a, d in tastes.of(session))

    def _posterior(self, session: str, tastes: Tastes) -> Any:
        """``taste="mixture"``: how likely ``session`` is of each kind of taste — the kinds'
        shares times the likelihood of what it took and dismissed under each kind's curve;
        kept in ``tastes.fits`` as :meth:`curve` keeps its fits."""
        import numpy as np

        stamp = self._stamp(session, tastes)
        cached = tastes.fits.get(session)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        shown = tastes.shown.get(session, [])
        x, y = _lengths_taken(shown)
        logp = np.array([math.log(max(share, 1e-12)) + (_loglik(x, y, w) if shown else 0.0)
                         for share, w, _ in self._mixture])
        post = np.exp(logp - logp.max())
        post = post / post.sum()
        tastes.fits[session] = (stamp, post)
        return post

    def curve(self, session: str | None, tastes: Tastes | None, explore: bool) -> Any:
        """``taste="curve"``: the taken curve's weights for ``session`` (None: everyone's), its
        posterior mode or (``explore``) a draw."""
        import numpy as np

        w, chol = self._curve
        if session is not None and tastes is not None:
            shown = tastes.shown.get(session, [])
            stamp = self._stamp(session, tastes)
            cached = tastes.fits.get(session)
            if cached is None or cached[0] != stamp:
                prec = np.linalg.inv(self._prior_cov)
                fit = curve_fit(*_lengths_taken(shown), w, prec) if shown \
                    else (w, np.linalg.cholesky(self._prior_cov))
                cached = tastes.fits[session] = (stamp, *fit)
            w, chol = cached[1], cached[2]
        return w + chol @ self._rng.standard_normal(2) if explore else w

    @contextmanager
    def aside(self) -> Any:
        """Serve within this block without changing what the learner does after it: its random
        stream and :attr:`serve_as` are as they were when the block ends (a measurement beside
        the run's own leaves the run as it would have been without it)."""
        state, kind = self._rng.bit_generator.state, self.serve_as
        try:
            yield self
        finally:
            self._rng.bit_generator.state, self.serve_as = state, kind

    def kind_curves(self) -> list[Any]:
        """The kinds' taken curves (``taste="mixture"``; otherwise everyone's, alone), from the
        kind that takes fewest right cuts of 32 characters to the one that takes most."""
        import numpy as np

        curves = [np.asarray(w) for _, w, _ in self._mixture] if self.taste == "mixture" else [self._curve[0]]
        return sorted(curves, key=lambda w: float(w[0] + w[1] * (math.log1p(32) - CENTRE)))

    def taken_probs(self, chars: Any, session: str | None, tastes: Tastes | None, explore: bool) -> Any:
        """P(taken | right) for cuts of ``chars`` characters shown to ``session`` (None or no
        ``tastes``: anyone), by :attr:`taste` (or :attr:`serve_as`'s kind)."""
        import numpy as np

        if self.serve_as == "mixture":
            x = np.log1p(chars) - CENTRE
            return sum(share * _sigmoid(w[0] + w[1] * x) for share, w, _ in self._mixture)
        if self.serve_as is not None:
            w = self.kind_curves()[int(self.serve_as)]
            return _sigmoid(w[0] + w[1] * (np.log1p(chars) - CENTRE))

        if self.taste == "bands":
            mine = tastes.of(session) if tastes is not None and session is not None else None
            return self.taken(mine, explore)[[band(int(n)) for n in chars]]
        x = np.log1p(chars) - CENTRE
        if self.taste == "mixture" and session is not None and tastes is not None:
            post = self._posterior(session, tastes)
            if explore:  # a kind drawn by how likely the session is of it, then its curve drawn
                _, w, chol = self._mixture[int(self._rng.choice(len(post), p=post))]
                w = w + chol @ self._rng.standard_normal(2)
                return _sigmoid(w[0] + w[1] * x)
            return sum(p * _sigmoid(w[0] + w[1] * x) for p, (_, w, _) in zip(post, self._mixture))
        w = self.curve(session, tastes, explore)
        return _sigmoid(w[0] + w[1] * x)

    def right_prob(self, features: Any, chars: Any) -> Any:
        """P(right) of cuts of ``chars`` characters with :func:`right_features` ``features``:
        the rightness model's, through the calibration where there is one (``calibrate``)."""
        import numpy as np

        p = self.right.prob(features)
        if self._calibration is None:
            return p
        return self._calibration.prob(_calibration_inputs(p, np.log1p(np.asarray(chars, np.float64))))

    def expected(self, obs: Observation, session: str | None = None, tastes: Tastes | None = None,
                 explore: bool = False) -> Any:
        """Each cut's expected reward if shown to ``session`` (a (rows,) array)."""
        import numpy as np

        if not len(obs.rows):
            return np.zeros(0)
        chars = np.array([len(obs.suggestion(i).text) for i in range(len(obs.rows))])
        right = self.right_prob(right_features(obs), chars)
        seen = [n for row in obs.dismissed or () for n in row]
        if seen:  # one draw of taste for the cuts and the dismissals alike
            taken_all = self.taken_probs(np.concatenate([chars, seen]), session, tastes, explore)
            taken, missed = taken_all[: len(chars)], iter(1.0 - taken_all[len(chars):])
            # each dismissal of what a cut carries on: P(dismissed | right) = 1 - taken, | wrong = 1
            ratio = np.array([math.prod(next(missed) for _ in row) for row in obs.dismissed])
            right = right * ratio / (right * ratio + 1.0 - right)
        else:
            taken = self.taken_probs(chars, session, tastes, explore)
        q = right * taken
        gain = self.per_char * self.kept_share * chars if self.per_char > 0 else np.full(len(chars), self.accept)
        return q * gain + (1 - q) * self.dismiss

    def choose_many(self, obs: Sequence[Observation], explore: bool,
                    sessions: Sequence[str] | None = None, tastes: Tastes | None = None) -> list[int]:
        """0 (show nothing) or ``i + 1`` (row ``i``) per request; ``sessions`` and ``tastes``:
        each request's editor session and the per-session record (None: global);
        ``explore``: a Thompson draw of the taken shares per request."""
        if not self.fitted:
            raise RuntimeError("FactoredCuts.choose_many before any update")
        out = []
        for j, o in enumerate(obs):
            value = self.expected(o, sessions[j] if sessions is not None else None, tastes, explore)
            best = int(value.argmax()) if len(value) else -1
            out.append(best + 1 if best >= 0 and value[best] > self.none else 0)
        return out
