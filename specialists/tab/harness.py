"""Run a decision rule over replayed edits and measure it — one harness for every policy.

A *decider* maps ``(request, observation)`` to a suggestion or ``None``. :func:`run` replays
pairs through :class:`~specialists.tab.replay.Session`, asks the decider at every request,
lets the simulated user answer, and sums the figures the benchmark reports. Observations
are cached by state (the replay visits the same states whatever the policy does, except
the policy's own past, which is refreshed per request), so baselines, the policy and every
training rollout share one feature pass.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from specialists.tab.data import Pair
from specialists.tab.features import Observation, ObserveConfig, observe
from specialists.tab.replay import Outcome, RewardConfig, Session, Suggestion, TabRequest

__all__ = ["ObservationCache", "Metrics", "KINDS", "run", "Decider", "measure_latency", "cache_path", "pair_key"]

Decider = Callable[[TabRequest, Observation], Suggestion | None]


class ObservationCache:
    """Observations by state: (pair, cursor, file). The LM is frozen while a cache lives.

    ``path`` keeps the cache on disk between runs (training and the benchmark share one);
    its name should identify the LM checkpoint and the observation settings.
    """

    def __init__(self, lm: Any = None, config: ObserveConfig | None = None,
                 path: str | Path | None = None) -> None:
        self.lm = lm
        self.config = config or ObserveConfig()
        self.path = Path(path) if path else None
        self._store: dict[tuple, Observation] = {}
        self.hits = 0
        self.misses = 0
        if self.path is not None and self.path.exists():
            with open(self.path, "rb") as fh:
                self._store = pickle.load(fh)

    @classmethod
    def kept_in(cls, cache_dir: str | Path | None, lm: Any, config: ObserveConfig,
                checkpoint: str | Path | None) -> "ObservationCache":
        """A cache whose file under ``cache_dir`` (empty: in memory only) is named for the
        LM's weights at ``checkpoint`` and for what they observed: ``config`` and the LM's
        prompt settings (its length in tokens and its anchoring), so that runs observing
        alike share it and runs that differ never read each other's states."""
        path = None
        if cache_dir:
            path = cache_path(cache_dir, checkpoint, config, lm.context_tokens if lm is not None else 0,
                              lm.anchor if lm is not None else 0)
        return cls(lm, config, path)

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # a name of this process's own: runs sharing the file may save at the same time
        tmp = self.path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        with open(tmp, "wb") as fh:
            pickle.dump(self._store, fh, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(self.path)

    def get(self, pair_key: str, req: TabRequest) -> Observation:
        digest = hashlib.blake2b(req.file.encode("utf-8", "surrogatepass"), digest_size=12).digest()
        key = (pair_key, req.cursor, digest)
        obs = self._store.get(key)
        if obs is None:
            self.misses += 1
            obs = observe(req, self.lm, self.config)
            self._store[key] = obs
        else:
            self.hits += 1
        return obs.with_request(req)

    def __len__(self) -> int:
        return len(self._store)


def cache_path(cache_dir: str | Path, checkpoint: str | Path | None, config: ObserveConfig,
               context_tokens: int = 0, anchor: int = 0) -> Path:
    """A cache file named for the LM's weights and the observation settings (``anchor``:
    the LM's prompt anchoring, :meth:`specialists.tab.lm.TabLM._prompt`)."""
    key = (config, context_tokens) if not anchor else (config, context_tokens, anchor)
    h = hashlib.blake2b(repr(key).encode(), digest_size=8)
    if checkpoint:
        weights = sorted(Path(checkpoint).glob("*.safetensors"))
        for w in weights:
            if w.name.startswith("model"):
                h.update(w.read_bytes())
    return Path(cache_dir) / f"obs-{h.hexdigest()}.pkl"


def pair_key(pair: Pair) -> str:
    return f"{pair.repo}:{pair.commit}:{pair.path}"


KINDS = ("insert", "rewrite", "jump")


@dataclass
class Metrics:
    requests: int = 0
    shown: int = 0
    accepted: int = 0
    reward: float = 0.0
    chars_saved: int = 0
    chars_total: int = 0
    chars_kept: int = 0
    """Accepted characters still there after the kept window (``users.KeptReward.kept``)."""
    reward_kept: float = 0.0
    """Reward of what was kept (``users.KeptReward``), beside ``reward``; 0 unless ``run`` got one."""
    switched_off: int = 0
    tab_off: int = 0
    """Requests not made: the person's Tab was switched off (``Session.tab_off``)."""
    latencies_ms: list[float] = field(default_factory=list)
    by_kind: dict[str, dict[str, int]] = field(
        default_factory=lambda: {k: {"shown": 0, "accepted": 0, "chars_saved": 0} for k in KINDS})
    """Shows, accepts and characters saved per suggestion kind (insert, rewrite, jump)."""

    def add(self, outcome: Outcome) -> None:
        self.requests += 1
        self.shown += outcome.shown
        self.accepted += outcome.accepted
        self.reward += outcome.reward
        self.chars_saved += outcome.chars_saved
        self.switched_off += outcome.switched_off
        if outcome.kind is not None:
            counts = self.by_kind[outcome.kind]
            counts["shown"] += 1
            counts["accepted"] += outcome.accepted
            counts["chars_saved"] += outcome.chars_saved

    def summary(self) -> dict[str, float]:
        n = max(1, self.requests)
        lat = sorted(self.latencies_ms)

        def pct(q: float) -> float:
            return round(lat[min(len(lat) - 1, int(q * len(lat)))], 2) if lat else float("nan")

        return {"requests": self.requests, "show_rate": round(self.shown / n, 4),
                "accept_rate": round(self.accepted / max(1, self.shown), 4),
                "reward_per_request": round(self.reward / n, 4),
                "chars_saved_per_1000": round(1000 * self.chars_saved / max(1, self.chars_total), 2),
                "p50_ms": pct(0.5), "p99_ms": pct(0.99)}

    def kept_summary(self) -> dict[str, float]:
        """Beside :meth:`summary`: reward of what was kept per request, characters kept per
        1,000 keystrokes (the characters the edits need typed unaided), Tab switch-offs."""
        n = max(1, self.requests)
        return {"kept_reward_per_request": round(self.reward_kept / n, 4),
                "chars_kept_per_1000": round(1000 * self.chars_kept / max(1, self.chars_total), 2),
                "switched_off": self.switched_off, "tab_off": self.tab_off}

    def kind_summary(self) -> dict[str, dict[str, float]]:
        """Per kind: shows, accepts, accept rate, characters saved (and per 1,000 typed)."""
        return {k: {**v, "accept_rate": round(v["accepted"] / max(1, v["shown"]), 4),
                    "chars_saved_per_1000": round(1000 * v["chars_saved"] / max(1, self.chars_total), 2)}
                for k, v in self.by_kind.items()}


def run(pairs: Iterable[Pair], decide: Decider, cache: ObservationCache,
        reward: Any = None,
        on_step: Callable[[TabRequest, Observation, Suggestion | None, Outcome], None] | None = None,
        ask_after_edit: bool = False, world: Any = None, kept: Any = None) -> Metrics:
    """Replay ``pairs`` with ``decide`` choosing at each request; ``on_step`` sees each decision.
    ``ask_after_edit``: a request also when each hunk is done (where jumps are judged).
    ``world`` (a :class:`specialists.tab.users.World`): pair ``i`` is typed by its person
    ``i`` (None: the oracle); ``kept`` (a ``users.KeptReward``) also sums the kept reward.
    While a person's Tab is off the editor asks nothing: the decider is not asked and the
    request is not counted (``Metrics.tab_off``), as the HTTP simulator does."""
    m = Metrics()
    for i, pair in enumerate(pairs):
        person = world.person(i) if world is not None else None
        session = Session(pair, reward=reward, ask_after_edit=ask_after_edit, person=person)
        key = pair_key(pair)
        while (req := session.next_request()) is not None:
            if session.tab_off:
                session.respond(None)
                m.tab_off += 1
                continue
            obs = cache.get(key, req)
            sug = decide(req, obs)
            out = session.respond(sug)
            m.add(out)
            if kept is not None:
                m.reward_kept += kept.score(out)
                m.chars_kept += kept.kept(out)
            if on_step is not None:
                on_step(req, obs, sug, out)
        m.chars_total += session.total_chars
    return m


def measure_latency(requests: list[TabRequest], decide: Decider, lm: Any,
                    config: ObserveConfig, warmup: int = 5) -> list[float]:
    """Per-request wall time (features, LM, decision), one request at a time, no cache."""
    for req in requests[:warmup]:
        decide(req, observe(req, lm, config))
    out = []
    for req in requests:
        t0 = time.perf_counter()
        decide(req, observe(req, lm, config))
        out.append((time.perf_counter() - t0) * 1000)
    return out
