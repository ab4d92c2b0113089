"""Does the Tab loop learn where it is deployed? (issue 15)

    python benchmarks/loop_learn.py DATA --project requests --seeds 0,1,2 --turns 8 \\
        --events-per-turn 4000 --start shipped,always_show --learner ppo,bandit,ppo_stale

One held-out project (no training step has seen it): its pairs sorted by ``date``; the
first ``--collect-share`` of them are the history the simulated users type while the loop
collects, the rest its *later* history, on which every deployed version is measured.

Per seed, start and learner, turn 0 deploys the start; each turn then

1. measures the deployed version on every request of the later history, with its greedy
   (deterministic) decisions: reward per request and its standard error across requests,
   show and accept rates;
2. collects ``--events-per-turn`` events on the earlier history, the deployed version
   sampling its actions (the next pairs of a seeded cycle over that history);
3. updates: ``ppo`` — :meth:`TabPolicy.ppo_update` on this turn's events only (the
   function the live loop's trainer calls: PPO-clip, epochs, KL guard, learned value
   baseline, Adam state and advantage scale carried across versions); ``ppo_stale`` — the
   same on ``--stale-events-per-turn`` new events plus those of the last
   ``--max-staleness`` versions, importance-weighted towards the current policy and clipped
   at ``--is-clip``; ``bandit`` — LinUCB (``specialists.tab.loop.bandit``) over the same
   features and actions, refitted on every event so far, greedy when measured; ``ppo_q`` —
   ``ppo`` with that same ridge regression of reward as a control variate
   (``ppo_update(q_values=...)``): fitted on every earlier turn's events and, cross-fitted,
   the other half of this turn's (``cross_fitted_values``), it estimates the reward of every
   action of each request, so the update reaches the actions the policy seldom samples
   while the gradient stays unbiased (``--q-ridge``: its ridge).

Starts: ``shipped`` — the checkpoint's policy; ``always_show`` — a supervised head (same
network, fresh weights) fitted by cross-entropy to the ensemble default's line (the longest
context-copy match to its line end, else the LM's line: ``baselines.default_candidate``),
with label smoothing ``--bc-smoothing`` spread over the other actions, and its value head to
that rule's rewards, on the *training* projects (``--bc-projects``): it shows nearly always.

``--collect-order dated`` has the users type the earlier history in date order (as time
passes where the loop runs) instead of a seeded shuffle; ``--ask-after-edit`` adds the
request when each hunk is done, as the deployed loop's simulated users make it.
``--explore ε`` (policy-gradient learners) mixes a share ε of other draws into collection —
uniform over the request's actions, or (``--explore-to value``) the cut that would save the
most if right — each logged with the probability that drew it (``TabPolicy.act_many``);
measuring stays greedy. It did not help (BENCHMARKS.md, issue 35, "Line 2, continued").

Collection is in-process (``harness.ObservationCache``: the LM is frozen, so its features
are computed once per state; sessions are stepped in lockstep so the head runs batched).
``--lm pg,pg_sft`` (with ``ppo`` or ``ppo_stale``): the LM's own weights learn too, after
each turn's policy update, from that turn's events, with their own Adam optimizer
(``--lm-lr``; :class:`LMLearner`): ``pg`` — policy gradient on the LM's own lines the policy
showed (advantage = reward − the policy's value of the state); ``pg_sft`` — that plus the
log-likelihood of the line the user typed where no suggestion was accepted. Each trained
LM version's observations are computed afresh (:class:`FreshCache`); ``frozen`` (the
default) is the LM of the shared cache. Labelled ``ppo+lm_pg`` etc. in the rows.

Prints one row per turn and a JSON summary last with the issue's checks computed: per
seed, last − first > 2 × pooled SE (sqrt(SE_first² + SE_last²), each SE across requests);
PPO against the bandit on the last turn; stale reuse against on-policy in new events
needed. Writes the curves (``--curve``) and everything measured (``--out``).

Every row also carries a second reading of the same figures, with the *edit* as the unit
(one edit's requests are alike, so counting them as independent draws makes one version's
SE too small): ``edit_se``, the version's own SE so; and ``paired_gain`` / ``paired_se``,
its gain over turn 0 and that gain's SE, paired by edit — every version replays the same
later-history edits, so what two versions do alike on an edit cancels
(:func:`paired_gain`). The summary's ``paired_passes`` is gain > 2 × ``paired_se``; the
issue's bar stays the per-request pooled one.

With people who switch Tab off (``patience``), reward per request leaves out the requests
Tab off did not make; ``reward_per_ask`` counts them at 0 (``rewards.per_ask``; per kind too,
and the rise checked on it as ``passes_per_ask``). For a population of several kinds the
setup also measures, per kind, the shipped policy with that kind shown nothing — a policy
told who is typing (:func:`kind_decider`): what personalising for that kind alone could
add. ``--measure-worlds K`` measures every version on K draws of people (world 0 the
people who collect), each (world, edit) a unit. ``--gate-edits N`` gates each
policy-gradient update as the product's loop does (:func:`offline_gate`): the N latest
earlier edits are kept out of collection, and a candidate worse there than the deployed
version by more than ``--gate-margin`` (95% interval, paired by edit) is held back.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import random
import sys
import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from specialists.tab.data import Pair, load_split  # noqa: E402
from specialists.tab.features import Observation  # noqa: E402
from specialists.tab.harness import ObservationCache, pair_key  # noqa: E402
from specialists.tab.loop.gate import paired_se  # noqa: E402
from specialists.tab.loop.lm_learner import LMLearner, Step, target_logps  # noqa: E402
from specialists.tab.replay import RewardConfig, Session  # noqa: E402
from specialists.tab.rewards import per_ask  # noqa: E402
from specialists.tab.users import KeptReward  # noqa: E402


@dataclass
class Decision:
    index: int
    logprob: float = 0.0
    version: int = 0
    value: float = 0.0


DecideMany = Callable[[Sequence[Observation]], list[Decision]]


LEARNERS = ("ppo", "ppo_stale", "ppo_q", "bandit", "factored")
"""``--learner``'s names (see its help)."""
STARTS = ("shipped", "always_show")
"""``--start``'s names."""

MAX_PER_PAIR = 300
"""Requests replayed per edit at most (``--max-requests-per-pair``): one edit of requests'
history asks 7,340 times, and would otherwise be half of what is measured."""

ASK_AFTER_EDIT = False
"""``--ask-after-edit``: sessions also ask when each hunk is done
(``Session(ask_after_edit=True)``), as the deployed loop's simulated users
(``specialists.tab.loop.simulate``) and an editor do; off by default, the protocol the
shipped policy was trained on and the earlier figures in BENCHMARKS.md were measured with."""


POPULATION: Any = None
"""``--population``: a :class:`specialists.tab.users.Population`; each edit is typed by the
person its key names (the same person whenever it comes round). None: the oracle."""
PEOPLE = 16
"""``--people``: how many people the population's world draws."""
MEASURE_WORLDS = 1
"""``--measure-worlds``: each version is measured on the later history typed by this many
draws of people (world seeds 0, 1, ...; world 0 is the people who collect), every (world,
edit) a unit of the per-edit figures."""
PERSONAL = False
"""``--personal``: the policy reads the personal features (``specialists.tab.personal``),
kept per person (the editor session) and project as the server keeps them."""
DISMISSALS = False
"""``--dismissals`` (factored): each request carries, per cut, the suggestions its session was
shown and dismissed that the cut carries on (:class:`specialists.tab.loop.factored.Dismissals`),
evidence on its rightness read through the session's taste."""
HITS = False
"""``--hits`` (factored): each request carries how its session's recent cuts fared against
what was then typed (:class:`specialists.tab.loop.factored.Hits`), an input of the rightness
model, kept per edit session as the server would keep it."""


def new_world(seed: int = 0) -> Any:
    """The population's people with fresh state (patience, random stream): each measurement
    gets one, so that every version meets the same people making the same draws; a learning
    run's collection gets one for the whole run (people's state carries on). ``seed``: which
    draw of people (0: those who collect)."""
    from specialists.tab.users import World

    return World(POPULATION, seed=seed, people=PEOPLE) if POPULATION is not None else None


def measure_rollout(pairs: Sequence[Pair], cache: ObservationCache, decide: DecideMany,
                    reward: RewardConfig, totals: Totals, serving: str = "personal") -> list[Step]:
    """The greedy replay of ``pairs`` every version is measured by: once per draw of people
    (``--measure-worlds``), each with fresh people and a fresh server record; a step's
    ``pair`` is its (world, edit) unit, ``world * len(pairs) + edit``. ``serving`` (a decider
    that reads who asks): ``personal`` — the server's per-session record where the run is
    personal (:func:`new_tastes`); ``global`` — none; ``told`` — a record per kind of person,
    the reference that knows who types (``--serve-also``)."""
    from specialists.tab.loop.factored import Tastes

    steps: list[Step] = []
    by_session = getattr(decide, "by_session", False)
    for w in range(MEASURE_WORLDS if POPULATION is not None else 1):
        tastes = None if not by_session or serving == "global" else Tastes() if serving == "told" else new_tastes()
        part = rollout(pairs, cache, decide, reward, world=new_world(w), tracker=new_tracker(), totals=totals,
                       tastes=tastes, told=serving == "told")
        for step in part:
            step.pair += w * len(pairs)
        steps += part
    return steps


def new_tracker() -> Any:
    from specialists.tab.personal import Tracker

    return Tracker() if PERSONAL else None


def new_tastes() -> Any:
    """The per-session record of right cuts shown and taken (``--learner factored``), kept
    only where the policy is personal (``--personal``), as :func:`new_tracker`."""
    from specialists.tab.loop.factored import Tastes

    return Tastes() if PERSONAL else None


def person_id(key: str) -> int:
    """The person (the editor session) who types the edit with this key."""
    return zlib.crc32(key.encode()) % PEOPLE


@dataclass
class Totals:
    """What a rollout adds up beside its steps: the characters its edits needed, typed or
    accepted (up to where each stopped: the unit of characters kept per 1,000 keystrokes),
    and the requests not made while a person's Tab was off."""

    keystrokes: int = 0
    tab_off: int = 0
    tab_off_by_kind: dict[str, int] = field(default_factory=dict)
    """``tab_off`` per kind of person (the population's ``type``)."""


def kind_of(session: Session) -> str:
    """The kind (the population's ``type``) of the person typing ``session``; "" for the oracle."""
    return session.person.kind if session.person is not None else ""  # type: ignore[attr-defined]


def rollout(pairs: Sequence[Pair], cache: ObservationCache, decide: DecideMany,
            reward: RewardConfig, limit: int = 0,
            prompt_of: Callable[[str], tuple[list[int], str]] | None = None,
            typed: bool = False, world: Any = None, tracker: Any = None,
            totals: Totals | None = None, labels: bool = False, tastes: Any = None,
            told: bool = False) -> list[Step]:
    """Replay ``pairs`` in lockstep (one batched decision per round), each for its first
    ``MAX_PER_PAIR`` requests; ``limit``: stop once that many steps are taken (the last
    round may overshoot; the caller cuts). ``world``: its people type the edits (None: a
    fresh one of ``--population``, or the oracle); while a person's Tab is off no request
    is made (no step). ``tracker`` (a :class:`specialists.tab.personal.Tracker`): each
    observation gets its person's and project's personal features, on a clock per person
    that runs on with each of their sessions, and each shown outcome is recorded as the
    server records the feedback (accepted, characters accepted).

    For an LM that learns (``--lm``): ``prompt_of`` (:meth:`TabLM._prompt`) keeps the LM's
    prompt at every step it can learn from — its own line shown, or (``typed``) a
    suggestion not accepted where the user went on to type something on the line, which
    ``Step.typed`` then holds (the rest of the line the person typed next).

    ``labels`` (``--learner factored``): each step's ``right`` holds, per cut, whether the
    person typed it next (:func:`specialists.tab.loop.factored.typed_next`). A decider that
    reads who asks (``by_session``, :func:`factored_decider`) gets each request's person and
    ``tastes`` (a :class:`~specialists.tab.loop.factored.Tastes`, or None), which records
    each right cut shown and whether it was accepted; ``told``: that record is kept per kind
    of person and the decider is told each request's kind (the reference that knows who types)."""
    from specialists.tab.loop.factored import Dismissals, Hits, typed_next

    if world is None:
        world = new_world()
    hits = Hits() if HITS else None  # each session's record of how its cuts fared (--hits)
    dismissals = Dismissals() if DISMISSALS else None  # and of what it dismissed (--dismissals)
    ids = [person_id(pair_key(p)) for p in pairs]
    sessions = [(Session(p, reward=reward, ask_after_edit=ASK_AFTER_EDIT,
                         person=world.person(pid) if world is not None else None), pair_key(p))
                for p, pid in zip(pairs, ids)]

    def key_of(i: int) -> str:  # whose record a request reads: its person's, or (told) its kind's
        return kind_of(sessions[i][0]) if told else str(ids[i])

    clocks: dict[int, float] = {}  # each person's own clock, across their sessions
    seen = [0.0] * len(sessions)  # each session's clock when last read
    active = list(range(len(sessions)))
    steps: list[Step] = []
    rounds = 0
    while active and rounds < MAX_PER_PAIR:
        rounds += 1
        live, reqs = [], []
        for i in active:
            session = sessions[i][0]
            while (req := session.next_request()) is not None and session.tab_off:
                session.respond(None)  # Tab is off: the editor asks nothing
                if totals is not None:
                    totals.tab_off += 1
                    kind = kind_of(session)
                    totals.tab_off_by_kind[kind] = totals.tab_off_by_kind.get(kind, 0) + 1
            if req is not None:
                live.append(i)
                reqs.append(req)
            elif totals is not None:
                totals.keystrokes += session.typed_chars + session.saved_chars
        active = live
        if not active:
            break
        keys = [sessions[i][1] for i in active]
        obs = cache.get_many(keys, reqs) if isinstance(cache, FreshCache) else \
            [cache.get(k, r) for k, r in zip(keys, reqs)]
        if tracker is not None:
            for j, (i, req) in enumerate(zip(active, reqs)):
                session = sessions[i][0]
                clocks[ids[i]] = clocks.get(ids[i], 0.0) + session.clock - seen[i]
                seen[i] = session.clock
                obs[j] = obs[j].with_personal(tracker.request(str(ids[i]), session.pair.repo,
                                                              clocks[ids[i]], req.cursor))
        # each request's place and what is to come there, read by the session records (--hits, --dismissals)
        wheres = [(sessions[i][0].place, sessions[i][0].remaining()) for i in active] \
            if hits is not None or dismissals is not None else []
        for j, (i, where) in enumerate(zip(active, wheres)):
            if hits is not None:
                obs[j] = obs[j].with_hits(hits.request(i, *where, obs[j]))
            if dismissals is not None:
                obs[j] = obs[j].with_dismissed(dismissals.request(i, *where, obs[j]))
        if getattr(decide, "by_kind", False):  # a reference that knows who types (kind_decider)
            decided = decide(obs, [kind_of(sessions[i][0]) for i in active])  # type: ignore[call-arg]
        elif getattr(decide, "by_session", False):  # the server's own per-session record
            decided = decide(obs, [key_of(i) for i in active], tastes)  # type: ignore[call-arg]
        else:
            decided = decide(obs)
        for j, (i, req, o, d) in enumerate(zip(active, reqs, obs, decided)):
            sug = o.suggestion(d.index - 1) if d.index > 0 else None
            session = sessions[i][0]
            line = session.remaining().split("\n", 1)[0] if typed else ""
            right = typed_next(o, session.remaining(), req.cursor) if labels or tastes is not None else None
            step = Step(o, d.index, d.logprob, d.version, session.respond(sug), value=d.value, pair=i)
            if dismissals is not None and sug is not None and step.outcome.shown and not step.outcome.accepted:
                dismissals.dismissed(i, *wheres[j], sug, req.cursor)
            step.right = right  # type: ignore[attr-defined]
            if tastes is not None and sug is not None and step.outcome.shown and right[d.index - 1]:
                tastes.record(key_of(i), len(sug.text), step.outcome.accepted)
            step.person = kind_of(session)  # type: ignore[attr-defined]
            if tracker is not None and step.outcome.shown and sug is not None:
                tracker.outcome(str(ids[i]), session.pair.repo, step.outcome.accepted, len(sug.text),
                                step.outcome.chars_saved)
            if prompt_of is not None:
                if step.lm_shown or (line.strip() and not step.outcome.accepted):
                    step.prompt = prompt_of(req.file[: req.cursor])
                    step.typed = line
            steps.append(step)
        if limit and len(steps) >= limit:
            break
    if totals is not None:  # the sessions cut short (MAX_PER_PAIR, limit) count as far as they got
        for i in active:
            totals.keystrokes += sessions[i][0].typed_chars + sessions[i][0].saved_chars
    return steps


class FreshCache(ObservationCache):
    """Observations of one LM version, in memory only (``--lm``: the LM learns, so a state's
    features hold only until its next update); a round's misses share one LM call
    (:func:`~specialists.tab.features.observe_many`)."""

    def get_many(self, keys: Sequence[str], reqs: Sequence[Any]) -> list[Observation]:
        import hashlib

        from specialists.tab.features import observe_many

        full = [(k, r.cursor, hashlib.blake2b(r.file.encode("utf-8", "surrogatepass"), digest_size=12).digest())
                for k, r in zip(keys, reqs)]
        todo = {}
        for key, req in zip(full, reqs):
            if key not in self._store and key not in todo:
                todo[key] = req
        self.misses += len(todo)
        self.hits += len(full) - len(todo)
        if todo:
            for key, obs in zip(todo, observe_many(list(todo.values()), self.lm, self.config)):
                self._store[key] = obs
        return [self._store[key].with_request(req) for key, req in zip(full, reqs)]


def typed_lines(lm: Any, pairs: Sequence[Pair], n: int, max_target: int = 16) -> list[tuple]:
    """A fixed sample of ``n`` requests of ``pairs`` (no suggestion shown: the person types
    everything) as (prompt ids, the typed line's tokens, 1, None): the LM's fit to this
    history, whatever the policy does (``lm_nll`` in the rows)."""
    eos = lm.model.config.eos_token_id or 0
    out = []
    for pair in pairs:
        session = Session(pair)
        steps = 0
        while (req := session.next_request()) is not None and steps < MAX_PER_PAIR:
            steps += 1
            line = session.remaining().split("\n", 1)[0]
            if line.strip():
                out.append((req.file[: req.cursor], line))
            session.respond(None)
    pick = random.Random("typed").sample(out, min(n, len(out)))
    items = []
    for left, line in pick:
        ids, tail = lm._prompt(left)
        target = lm.tokenizer.encode(tail + line).ids[:max_target]
        if target:
            items.append(((list(ids) or [eos])[-(int(lm.net.max_positions) - 1 - len(target)):], target, 1.0, None))
    return items


def mean_nll(lm: Any, items: Sequence[tuple], batch: int = 64) -> float:
    """Mean negative log-likelihood per token of ``items`` (:func:`typed_lines`) under the LM now."""
    import torch

    if not items:
        return float("nan")
    total, count = 0.0, 0
    with torch.no_grad():
        for b in range(0, len(items), batch):
            picked, _ = target_logps(lm.model, items[b : b + batch])
            total -= float(picked.sum())
            count += picked.numel()
    return total / count


def policy_decider(policy: Any, sample: bool, explore: float = 0.0, explore_to: str = "uniform") -> DecideMany:
    def decide(obs: Sequence[Observation]) -> list[Decision]:
        return [Decision(a.index, a.logprob, a.version, a.value)
                for a in policy.act_many(obs, sample=sample, explore=explore, explore_to=explore_to)]
    return decide


def kind_decider(base: DecideMany, silent: str) -> DecideMany:
    """A reference no learner can be, for it knows who is typing: people of kind ``silent``
    are shown nothing, everyone else what ``base`` shows. With ``base`` the shipped policy it
    bounds what personalising for that kind alone could add to the checkpoint."""
    def decide(obs: Sequence[Observation], kinds: Sequence[str]) -> list[Decision]:
        return [Decision(0) if kind == silent else d for d, kind in zip(base(obs), kinds)]
    decide.by_kind = True  # type: ignore[attr-defined]
    return decide  # type: ignore[return-value]


def factored_decider(model: Any, explore: bool) -> DecideMany:
    """``--learner factored``'s choices; it reads each request's person and the server's
    per-session record (``rollout``'s ``tastes``; None: global). ``explore``: Thompson draws
    of the taken shares. A personal version is also *measured* with them (``learn``): its
    per-session shares are learnt while it serves, from nobody's record at the start of a
    measurement, so drawing is how it serves; a global version has nothing to learn while it
    serves and is measured greedy, like every other learner."""
    def decide(obs: Sequence[Observation], sessions: Sequence[str], tastes: Any) -> list[Decision]:
        return [Decision(i) for i in model.choose_many(obs, explore, sessions, tastes)]
    decide.by_session = True  # type: ignore[attr-defined]
    return decide  # type: ignore[return-value]


def serving_figures(model: Any, pairs: Sequence[Pair], cache: ObservationCache, reward: RewardConfig,
                    draws: bool) -> dict[str, dict]:
    """``--serve-also``: the last factored version (its rightness model, its kinds of taste) served
    other ways to the same people, beside the run's own measurement and without changing the
    run (:meth:`FactoredCuts.aside`): ``global`` — everyone's taste, no per-session record;
    ``as_kind{k}`` — everyone served as of kind k (kinds from fewest right long cuts taken to
    most): single global policies, one per kind, each serving its kind as well as a policy
    told who types would; ``as_mixture`` — everyone served as a person of no record (the
    kinds weighted by their shares): the single policy best for a person drawn at random, as
    the learner reads the kinds; ``told`` — each person served by their kind's record (knows who
    types; ``draws`` as the personal version serves). Per serving: reward per request over
    everyone and per kind (:func:`per_person`, with its per-edit sums for pairing)."""
    out: dict[str, dict] = {}
    with model.aside():
        kinds = len(model.kind_curves())
        modes = [("global", None, "global")] + [(f"as_kind{k}", k, "global") for k in range(kinds)] + \
            ([("as_mixture", "mixture", "global")] if kinds > 1 else []) + [("told", None, "told")]
        for name, kind, serving in modes:
            model.serve_as = kind
            totals = Totals()
            steps = measure_rollout(pairs, cache, factored_decider(model, draws and serving == "told"), reward,
                                    totals, serving=serving)
            out[name] = {"everyone": round(measure(steps)["reward"], 5), **per_person(steps, totals)}
    return out


def bandit_decider(bandit: Any, explore: bool) -> DecideMany:
    def decide(obs: Sequence[Observation]) -> list[Decision]:
        return [Decision(c.index) for c in bandit.choose_many(obs, explore)]
    return decide


def measure(steps: list[Step], totals: Totals | None = None) -> dict[str, float]:
    """Reward per request and its SE across requests, show and accept rates; with ``totals``
    also characters kept (``users.KeptReward.kept``) per 1,000 keystrokes the edits needed,
    Tab switch-offs and the requests Tab off did not make."""
    n = len(steps)
    rewards = [s.outcome.reward for s in steps]
    mean = sum(rewards) / max(1, n)
    sd = math.sqrt(sum((r - mean) ** 2 for r in rewards) / max(1, n - 1))
    shown = sum(s.outcome.shown for s in steps)
    accepted = sum(s.outcome.accepted for s in steps)
    out = {"requests": n, "reward": mean, "se": sd / math.sqrt(max(1, n)), "show_rate": shown / max(1, n),
           "accept_rate": accepted / max(1, shown)}
    if totals is not None:
        kept = KeptReward()
        out["kept_per_1000"] = 1000 * sum(kept.kept(s.outcome) for s in steps) / max(1, totals.keystrokes)
        out["switched_off"] = sum(s.outcome.switched_off for s in steps)
        out["tab_off"] = totals.tab_off
        out["reward_per_ask"], out["se_per_ask"] = per_ask(rewards, totals.tab_off)
    return out


def per_person(steps: Sequence[Step], totals: Totals | None = None) -> dict[str, dict[str, float]]:
    """Per kind of person (the population's ``type``): requests, reward per request and its
    SE with the *edit* as the unit (one person types each edit), show rate, switch-offs, and
    the reward and requests per edit; with ``totals`` also the requests Tab off did not make
    (``tab_off``) and the reward per request asked (``rewards.per_ask``)."""
    kinds: dict[str, list[Step]] = {}
    for s in steps:
        kinds.setdefault(getattr(s, "person", ""), []).append(s)
    out: dict[str, dict[str, Any]] = {}
    for kind, ss in sorted(kinds.items()):
        edits = per_edit(ss)
        gain, se = paired_gain(None, edits)
        out[kind or "oracle"] = {"requests": len(ss), "reward": round(gain, 5), "edit_se": round(se, 5),
                                 "edits": len(edits),
                                 # reward summed and requests counted per edit: two versions (or
                                 # two runs: every measurement meets the same people) compare
                                 # paired by edit (benchmarks/personal_compare.py)
                                 "per_edit": {str(e): [round(r, 4), n] for e, (r, n) in sorted(edits.items())},
                                 "show_rate": round(sum(s.outcome.shown for s in ss) / max(1, len(ss)), 4),
                                 "switched_off": sum(s.outcome.switched_off for s in ss)}
        if totals is not None:
            off = totals.tab_off_by_kind.get(kind, 0)
            ask, ask_se = per_ask([s.outcome.reward for s in ss], off)
            out[kind or "oracle"].update(tab_off=off, reward_per_ask=round(ask, 5), se_per_ask=round(ask_se, 5))
    return out


def per_edit(steps: Sequence[Step]) -> dict[int, tuple[float, int]]:
    """Reward summed and requests counted per replayed edit (``Step.pair``)."""
    out: dict[int, tuple[float, int]] = {}
    for s in steps:
        r, n = out.get(s.pair, (0.0, 0))
        out[s.pair] = (r + s.outcome.reward, n + 1)
    return out


def aligned(after: dict[int, tuple[float, int]], before: dict[int, tuple[float, int]]
            ) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
    """Two versions' per-edit (reward sum, requests) as paired lists over every edit either
    saw, an edit one of them did not see counting as (0, 0) there."""
    edits = sorted(set(after) | set(before))
    return [after.get(e, (0.0, 0)) for e in edits], [before.get(e, (0.0, 0)) for e in edits]


def paired_gain(before: dict[int, tuple[float, int]] | None,
                after: dict[int, tuple[float, int]]) -> tuple[float, float]:
    """Reward per request of ``after`` minus ``before`` (0 when None) and its standard error
    with the *edit* as the unit, both versions measured on the same edits: the loop gate's
    paired estimator (:func:`specialists.tab.loop.gate.paired_se`, the delta method for a
    difference of two ratio estimators), an edit one of them did not see counting as
    (0, 0) there; NaN for the error of a single edit."""
    gain, se, _, _ = paired_se(*aligned(after, before or {}))
    return gain, se if math.isfinite(se) else float("nan")


# -- the always-show start --------------------------------------------------------------
def default_row(obs: Observation) -> int:
    """The action (as ``Action.index``) that shows the ensemble default's line: that
    candidate at the line's end, or at its longest cut within the line; 0 when none."""
    from specialists.tab.baselines import default_candidate

    pick = default_candidate(obs)
    if pick is None:
        return 0
    cand, cut = pick
    ci = next((i for i, c in enumerate(obs.candidates) if c is cand), -1)
    best, best_cut = 0, -1
    for r, (c, k) in enumerate(obs.rows):
        if int(c) == ci and best_cut < int(k) <= cut:
            best, best_cut = r + 1, int(k)
    return best


def always_show_start(shipped: Any, pairs: Sequence[Pair], cache: ObservationCache, seed: int,
                      steps: int, smoothing: float, reward: RewardConfig) -> tuple[Any, dict]:
    """A fresh head of the shipped architecture fitted to always show the ensemble default."""
    import torch

    from specialists.tab.policy import PolicyConfig, TabPolicy

    data = rollout(pairs, cache, lambda obs: [Decision(default_row(o)) for o in obs], reward)
    policy = TabPolicy(PolicyConfig(**asdict(shipped.config)), seed=seed)
    policy.fit_normalizer([s.obs for s in data])
    state, hidden, actions, mask = policy._tensors([s.obs for s in data])
    target = torch.tensor([s.index for s in data])
    rewards = torch.tensor([s.outcome.reward for s in data], dtype=torch.float32)
    valid = torch.cat([torch.ones(len(data), 1, dtype=torch.bool), mask], dim=1)
    dist = valid.float() * smoothing / valid.sum(1, keepdim=True).clamp(min=1)
    dist[torch.arange(len(data)), target] += 1 - smoothing
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(policy.net.parameters(), lr=3e-3)
    policy.net.train()
    for _ in range(steps):
        rows = torch.randint(0, len(data), (min(256, len(data)),), generator=gen)
        logits, value = policy.net(state[rows], hidden[rows], actions[rows], mask[rows])
        logp = torch.log_softmax(logits, dim=-1)
        ce = -(dist[rows] * torch.where(valid[rows], logp, torch.zeros_like(logp))).sum(-1).mean()
        loss = ce + 0.5 * ((value - rewards[rows]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    policy.net.eval()
    with torch.no_grad():
        logits, _ = policy.net(state, hidden, actions, mask)
        agree = (logits.argmax(-1) == target).float().mean().item()
        p_show = 1 - torch.softmax(logits, -1)[:, 0].mean().item()
    policy.opt = torch.optim.Adam(policy.net.parameters(), lr=policy.config.lr)  # RL starts afresh
    info = {"bc_events": len(data), "bc_agree": round(agree, 4), "bc_mean_p_show": round(p_show, 4),
            "bc_rule_show_rate": round(sum(s.index > 0 for s in data) / len(data), 4)}
    return policy, info


def offline_gate(pairs: Sequence[Pair], cache: ObservationCache, candidate: Any, deployed: Any,
                 reward: RewardConfig, margin: float) -> dict[str, Any]:
    """The simulated loop's gate on held-out earlier edits: both versions replay ``pairs``
    greedily, typed by the same people (world 0, a fresh server record each), paired by edit
    (:func:`specialists.tab.loop.gate.paired_difference`), and judged by the product's gates'
    own rule (:func:`specialists.tab.loop.gate.verdict`: the 95% interval's low end at least
    ``-margin``)."""
    from specialists.tab.loop.gate import paired_difference, verdict

    def units(policy: Any) -> dict[int, tuple[float, int]]:
        return per_edit(rollout(pairs, cache, policy_decider(policy, False), reward, world=new_world(0),
                                tracker=new_tracker()))

    diff, low, high, _, _ = paired_difference(*aligned(units(candidate), units(deployed)))
    passed, _ = verdict(diff, low, high, margin, f"{len(pairs)} paired edits")
    return {"passed": passed, "difference": round(diff, 5), "ci": [round(low, 5), round(high, 5)]}


# -- one learning run -------------------------------------------------------------------
def learn(start: Any, learner: str, seed: int, args: argparse.Namespace, collect_pool: list[Pair],
          measure_pairs: list[Pair], cache: ObservationCache, reward: RewardConfig,
          log: Callable[[dict], None], lm_variant: str = "frozen", lm_start: dict | None = None,
          nll_items: Sequence[tuple] = (), gate_pairs: Sequence[Pair] = ()) -> list[dict]:
    """One learning run. ``lm_variant`` ``pg`` / ``pg_sft``: the LM (``cache.lm``) learns
    too (:class:`LMLearner`), from ``lm_start`` (its shipped weights, restored at the end);
    every version after the first is then observed afresh (:class:`FreshCache`).
    ``gate_pairs`` (``--gate-edits``): each policy-gradient update is a candidate that ships
    only past the gate (:func:`offline_gate`); one held back leaves the deployed version as it
    was, to collect and be updated again next turn."""
    import torch

    from specialists.tab.loop.bandit import LinUCB, cross_fitted_values
    from specialists.tab.policy import PPOConfig, Sample

    torch.manual_seed(seed)
    lm_learner: LMLearner | None = None
    label = learner
    if lm_variant != "frozen":
        if learner == "bandit" or lm_start is None:
            raise SystemExit("--lm pg / pg_sft: with ppo or ppo_stale, and the LM's start weights")
        cache.lm.model.load_state_dict(lm_start)
        cache.lm.weights_changed()
        lm_learner = LMLearner(cache.lm, lm_variant, args.lm_lr, sft=args.lm_sft, l2=args.lm_l2, kl=args.lm_kl,
                               clip=args.lm_clip, batch=args.lm_batch, seed=seed, sft_max=args.lm_sft_max)
        label = f"{learner}+lm_{lm_variant}" + (f"_kl{args.lm_kl:g}" if args.lm_kl else "")
    prompt_of = cache.lm._prompt if lm_learner is not None else None
    policy = copy.deepcopy(start)
    policy._gen = torch.Generator().manual_seed(seed)
    version0 = policy.version
    bandit = LinUCB.like(policy, alpha=args.alpha, reward_none=reward.none) if learner == "bandit" else None
    # ppo_q: the regression of reward on the same features, every event so far (the control variate)
    q_model = LinUCB.like(policy, alpha=0.0, ridge=args.q_ridge, reward_none=reward.none) \
        if learner == "ppo_q" else None
    from specialists.tab.loop.factored import FactoredCuts

    factored = FactoredCuts.for_reward(reward, prior=args.taste_prior, taste=args.taste, spread=args.taste_spread,
                                       right_model=args.right_model, calibrate=args.calibrate,
                                       seed=seed) if learner == "factored" else None
    stale = learner == "ppo_stale"
    per_turn = args.stale_events_per_turn if stale and args.stale_events_per_turn else args.events_per_turn
    ppo = PPOConfig(epochs=args.epochs, minibatches=args.minibatches, clip=args.clip,
                    target_kl=args.target_kl, lr=args.lr, seed=seed,
                    max_staleness=args.max_staleness if stale else 0, is_clip=args.is_clip)
    order = list(collect_pool)  # sorted by date
    if args.collect_order == "shuffled":
        random.Random(f"{seed}:collect").shuffle(order)
    cursor = 0
    world, tracker = new_world(), new_tracker()  # the people who collect, and the server's record of them
    tastes = new_tastes() if factored is not None else None
    kept: list[list[Sample]] = []  # the last turns' samples (ppo_stale)
    rows: list[dict] = []
    events_so_far = 0
    for turn in range(args.turns + 1):
        t0 = time.monotonic()
        # the LM's weights of this version: the shipped ones (turn 0, or frozen) are in the
        # shared cache; a trained version's observations are computed afresh
        here = cache if lm_learner is None or turn == 0 else FreshCache(cache.lm, cache.config)
        # the version as it serves: greedy, but a personal factored one draws (factored_decider)
        greedy = bandit_decider(bandit, False) if bandit is not None and turn > 0 else \
            factored_decider(factored, PERSONAL and args.serve_draws) if factored is not None and turn > 0 else \
            policy_decider(policy, False)
        totals = Totals()
        measured = measure_rollout(measure_pairs, here, greedy, reward, totals)
        edits = per_edit(measured)
        if turn == 0:
            edits0 = edits
        gain, gain_se = paired_gain(edits0, edits)
        row: dict[str, Any] = {"start": args._start, "learner": label, "seed": seed, "turn": turn,
                               "events": events_so_far,
                               **{k: round(v, 5) for k, v in measure(measured, totals).items()},
                               "edit_se": round(paired_gain(None, edits)[1], 5),
                               "paired_gain": round(gain, 5), "paired_se": round(gain_se, 5),
                               "lm_shown": sum(s.lm_shown for s in measured),
                               "lm_accepted": sum(s.lm_shown and s.outcome.accepted for s in measured),
                               "personal": PERSONAL}
        if POPULATION is not None:
            row["per_person"] = per_person(measured, totals)
        if args.serve_also and factored is not None and turn == args.turns:  # the version compared
            row["serving"] = serving_figures(factored, measure_pairs, here, reward, PERSONAL and args.serve_draws)
        if lm_learner is not None:
            row["measure_seconds"] = round(time.monotonic() - t0, 2)
        if nll_items:
            row["lm_nll"] = round(mean_nll(cache.lm, nll_items), 4)
        if turn == args.turns:
            row["seconds"] = round(time.monotonic() - t0, 2)
            rows.append(row)
            log(row)
            break
        # collect on the earlier history with the deployed version, exploring
        explore = (bandit_decider(bandit, True) if bandit is not None and turn > 0 else
                   factored_decider(factored, True) if factored is not None and turn > 0 else
                   policy_decider(policy, True, args.explore, args.explore_to))
        batch: list[Step] = []
        while len(batch) < per_turn:
            chunk = [order[(cursor + i) % len(order)] for i in range(args.batch_sessions)]
            cursor += args.batch_sessions
            batch += rollout(chunk, here, explore, reward, limit=per_turn - len(batch),
                             prompt_of=prompt_of, typed=lm_variant == "pg_sft", world=world, tracker=tracker,
                             labels=factored is not None, tastes=tastes)
        batch = batch[:per_turn]
        events_so_far += len(batch)
        col = measure(batch)
        row.update({"collect_reward": round(col["reward"], 5), "collect_se": round(col["se"], 5),
                    "collect_show": round(col["show_rate"], 4), "collect_accept": round(col["accept_rate"], 4)})
        if bandit is not None:
            bandit.update([(s.obs, s.index, s.outcome.reward) for s in batch])
        elif factored is not None:
            stats = factored.update([(s.obs, s.right, s.index, s.outcome.accepted, s.outcome.chars_kept)
                                     for s in batch], tastes)
            row.update({k: round(v, 5) for k, v in stats.items()})
        else:
            from specialists.tab.policy import Action

            samples = [Sample(s.obs, Action(index=s.index, logprob=s.logprob, version=s.version),
                              s.outcome.reward) for s in batch]
            kept = (kept + [samples])[-(ppo.max_staleness + 1):]
            q_values = None
            if q_model is not None:  # each estimate from a model that did not see its event
                examples = [(s.obs, s.index, s.outcome.reward) for s in batch]
                q_values = cross_fitted_values(q_model, examples)
                q_model.update(examples)
            deployed = copy.deepcopy(policy) if gate_pairs else None
            stats = policy.ppo_update([x for part in kept for x in part], ppo, q_values=q_values)
            if deployed is not None:
                verdict = offline_gate(gate_pairs, here, policy, deployed, reward, args.gate_margin)
                row["gate"] = verdict
                if not verdict["passed"]:
                    policy = deployed  # held back: the deployed version (and its optimiser state) stays
            for k in ("kl", "grad_norm", "clip_frac", "entropy", "epochs", "is_weight", "is_clipped"):
                row[k] = round(stats[f"tab/{k}"], 5)
            row["trained_on"] = sum(len(p) for p in kept)
            if lm_learner is not None:  # after the policy's update, the LM's, on this turn's events
                row.update(lm_learner.update(batch))
        row["seconds"] = round(time.monotonic() - t0, 2)
        rows.append(row)
        log(row)
    held = sum(1 for r in rows if not r.get("gate", {"passed": True})["passed"])
    assert policy.version - version0 == (0 if bandit is not None or factored is not None else args.turns - held)
    if lm_learner is not None:
        cache.lm.model.load_state_dict(lm_start)  # the shared cache's LM again
        cache.lm.weights_changed()
    return rows


# -- the checks -----------------------------------------------------------------
def rise(first: dict, last: dict) -> dict[str, Any]:
    """Issue 35's line 1 for one run: its last version's reward per request over its first's
    (turn 0, the frozen start), passing when the gain is over 2 × the two SEs pooled
    (also read by ``benchmarks/rise_check.py``)."""
    pooled = math.sqrt(first["se"] ** 2 + last["se"] ** 2)
    out = {"first": first["reward"], "last": last["reward"], "gain": round(last["reward"] - first["reward"], 5),
           "pooled_se": round(pooled, 5), "passes": last["reward"] - first["reward"] > 2 * pooled,
           # the same gain, paired by edit (both versions replay the same edits) and with the
           # edit as the unit: a second reading, not the bar
           "paired_se": last.get("paired_se"),
           "paired_passes": last.get("paired_se") is not None and last["paired_gain"] > 2 * last["paired_se"]}
    if "reward_per_ask" in first and "reward_per_ask" in last:  # the requests Tab off did not make at 0
        ask_pooled = math.sqrt(first["se_per_ask"] ** 2 + last["se_per_ask"] ** 2)
        gain_ask = last["reward_per_ask"] - first["reward_per_ask"]
        out.update(first_per_ask=first["reward_per_ask"], last_per_ask=last["reward_per_ask"],
                   gain_per_ask=round(gain_ask, 5), pooled_se_per_ask=round(ask_pooled, 5),
                   passes_per_ask=gain_ask > 2 * ask_pooled)
    return out


def checks(rows: list[dict], args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    runs: dict[tuple, list[dict]] = {}
    for r in rows:
        runs.setdefault((r["start"], r["learner"], r["seed"]), []).append(r)
    rises = {f"{start}/{learner}/seed{seed}": rise(rs[0], rs[-1]) for (start, learner, seed), rs in sorted(runs.items())}
    out["rise"] = rises

    def mean_curve(start: str, learner: str) -> list[float]:
        per_seed = [rs for (s, lrn, _), rs in runs.items() if s == start and lrn == learner]
        if not per_seed:
            return []
        return [sum(rs[t]["reward"] for rs in per_seed) / len(per_seed) for t in range(len(per_seed[0]))]

    done: dict[str, Any] = {}
    for start in args.starts:
        for pg in ("ppo", "ppo_q"):  # the policy-gradient learners; ppo_q's keys name it
            tag = "" if pg == "ppo" else f"_{pg}"
            pg_runs = {k: v for k, v in rises.items() if k.startswith(f"{start}/{pg}/")}
            if pg_runs:
                done[f"1_rise_{start}{tag}"] = all(v["passes"] for v in pg_runs.values()) and len(pg_runs) >= 3 \
                    and args.turns >= 6
            curve, bandit = mean_curve(start, pg), mean_curve(start, "bandit")
            if curve and bandit:
                done[f"2_{pg}_minus_bandit_last_{start}"] = round(curve[-1] - bandit[-1], 5)
                done[f"2_{pg}_beats_bandit_{start}"] = curve[-1] > bandit[-1]
                # per seed: the learner's last version against the bandit's, each measured on the
                # same edits and people (pooled per-request SE, as the rise's bar)
                per_seed = {}
                for (s0, lrn, seed), rs in runs.items():
                    other = runs.get((s0, "bandit", seed))
                    if s0 == start and lrn == pg and other:
                        a, b = rs[-1], other[-1]
                        per_seed[f"seed{seed}"] = {pg: a["reward"], "bandit": b["reward"],
                                                   "diff": round(a["reward"] - b["reward"], 5),
                                                   "pooled_se": round(math.sqrt(a["se"] ** 2 + b["se"] ** 2), 5)}
                done[f"2_{pg}_vs_bandit_per_seed_{start}"] = per_seed
            if curve:  # the frozen checkpoint is turn 0 (every measurement meets the same people)
                done[f"4_{pg}_last_minus_frozen_{start}"] = round(curve[-1] - curve[0], 5)
        ppo, stale = mean_curve(start, "ppo"), mean_curve(start, "ppo_stale")
        if ppo and stale:
            target = ppo[-1]

            def events_to_reach(curve: list[float], per_turn: int) -> int | None:
                t = next((i for i, v in enumerate(curve) if v >= target), None)
                return None if t is None else t * per_turn

            e_ppo = events_to_reach(ppo, args.events_per_turn)
            e_stale = events_to_reach(stale, args.stale_events_per_turn or args.events_per_turn)
            done[f"3_target_{start}"] = round(target, 5)
            done[f"3_events_ppo_{start}"] = e_ppo
            done[f"3_events_stale_{start}"] = e_stale
            done[f"3_stale_fewer_events_{start}"] = e_stale is not None and e_ppo is not None and e_stale < e_ppo
            if target <= ppo[0]:
                done[f"3_note_{start}"] = "on-policy PPO ends no higher than it starts: no rise to reach"
            done[f"3_stale_last_{start}"] = round(stale[-1], 5)
    out["done_when"] = done
    return out


def mean_table(rows: list[dict]) -> str:
    """Per start, learner and turn: the mean over seeds of the later-history reward (± the
    pooled SE of that mean), show and accept rates, and the update's KL and clip fraction."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["start"], r["learner"], r["turn"]), []).append(r)
    lines = ["| start | learner | turn | new events | reward / request (± SE) | chars kept / 1,000 | show | accept "
             "| KL | clip frac | seeds |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (start, learner, turn), rs in groups.items():
        n = len(rs)

        def avg(key: str) -> float | None:
            vals = [r[key] for r in rs if r.get(key) not in (None, "")]
            return sum(vals) / len(vals) if vals else None

        se = math.sqrt(sum(r["se"] ** 2 for r in rs)) / n
        kl, cf = avg("kl"), avg("clip_frac")
        kpt = avg("kept_per_1000")
        lines.append(f"| {start} | {learner} | {turn} | {rs[0]['events']:,} | {avg('reward'):+.4f} (± {se:.4f}) | "
                     f"{'' if kpt is None else f'{kpt:.1f}'} | {avg('show_rate'):.3f} | {avg('accept_rate'):.3f} | "
                     f"{'' if kl is None else f'{kl:.3f}'} | {'' if cf is None else f'{cf:.3f}'} | {n} |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path, starts: list[str], learners: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(starts), figsize=(5.2 * len(starts), 6.4), dpi=80, squeeze=False)
    colors = {"ppo": "C0", "ppo_stale": "C2", "ppo_q": "C1", "bandit": "C3"}
    for j, start in enumerate(starts):
        for learner in learners:
            seeds = sorted({r["seed"] for r in rows if r["start"] == start and r["learner"] == learner})
            for key, ax in (("reward", axes[0][j]), ("show_rate", axes[1][j])):
                curves = []
                for seed in seeds:
                    rs = [r for r in rows if r["start"] == start and r["learner"] == learner and r["seed"] == seed]
                    xs = [r["events"] / 1000 for r in rs]
                    ys = [r[key] for r in rs]
                    curves.append((xs, ys, [r["se"] for r in rs]))
                    ax.plot(xs, ys, color=colors.get(learner, "k"), lw=0.6, alpha=0.35)
                if curves:
                    xs = curves[0][0]
                    mean = [sum(c[1][t] for c in curves) / len(curves) for t in range(len(xs))]
                    if key == "reward":
                        se = [math.sqrt(sum(c[2][t] ** 2 for c in curves)) / len(curves) for t in range(len(xs))]
                        ax.errorbar(xs, mean, yerr=[2 * s for s in se], color=colors.get(learner, "k"),
                                    lw=1.6, capsize=2, label=learner)
                    else:
                        ax.plot(xs, mean, color=colors.get(learner, "k"), lw=1.6, label=learner)
        axes[0][j].set_title(f"start: {start} — reward / request, later history (greedy)", fontsize=9)
        axes[1][j].set_title("show rate, later history", fontsize=9)
        for ax in (axes[0][j], axes[1][j]):
            ax.set_xlabel("new events collected (thousands)")
            ax.grid(alpha=0.3)
        axes[0][j].legend(fontsize=7)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    global MAX_PER_PAIR, ASK_AFTER_EDIT, POPULATION, PEOPLE, PERSONAL, MEASURE_WORLDS, HITS, DISMISSALS
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="directory of NAME.jsonl.gz commit files")
    p.add_argument("--project", required=True, help="the held-out project (DATA/NAME.jsonl.gz) deployed on")
    p.add_argument("--collect-share", type=float, default=0.7, help="earliest share of its pairs users type")
    p.add_argument("--pairs", type=int, default=0, help="a seeded sample of this many pairs first (0: all)")
    p.add_argument("--measure-pairs", type=int, default=0, help="cap on later-history pairs measured (0: all)")
    p.add_argument("--collect-from", choices=["earlier", "later"], default="earlier",
                   help="later: collect on the measured history itself — an in-sample upper bound "
                        "on what the update can find there, not a deployable setting")
    p.add_argument("--collect-order", choices=["shuffled", "dated"], default="shuffled",
                   help="the order the users type the earlier history in: a seeded shuffle, or by date "
                        "(oldest first, as time passes where the loop is deployed), each cycling")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds: each a run of its own (people, sampling, shuffles)")
    p.add_argument("--turns", type=int, default=8, help="collect → update turns per run (the curve has turns + 1 points)")
    p.add_argument("--events-per-turn", type=int, default=4000, help="labelled events collected per turn")
    p.add_argument("--stale-events-per-turn", type=int, default=0,
                   help="new events per turn for ppo_stale (0: --events-per-turn)")
    p.add_argument("--start", default="shipped,always_show",
                   help="comma-separated starting policies: shipped (the checkpoint's), always_show "
                        "(a head fitted to show nearly always)")
    p.add_argument("--learner", default="ppo,bandit,ppo_stale",
                   help="comma-separated: ppo (on-policy PPO-clip), ppo_stale (also the last "
                        "--max-staleness versions' events, importance-weighted), ppo_q (PPO with a "
                        "ridge reward model as control variate), bandit (LinUCB on the same features), "
                        "factored (P(right) from every cut's typed-next label × P(taken | right, length, "
                        "personal history) by Thompson sampling: specialists.tab.loop.factored)")
    p.add_argument("--epochs", type=int, default=4, help="PPO epochs over a turn's events")
    p.add_argument("--minibatches", type=int, default=4, help="PPO minibatches per epoch")
    p.add_argument("--clip", type=float, default=0.2, help="PPO's probability-ratio clip")
    p.add_argument("--target-kl", type=float, default=0.02,
                   help="an update stops once its KL from the previous version passes this")
    p.add_argument("--lr", type=float, default=1e-3, help="the policy head's Adam learning rate")
    p.add_argument("--normalize-advantages", action="store_true",
                   help="scale advantages by their running std, carried across versions")
    p.add_argument("--max-staleness", type=int, default=2, help="ppo_stale: how many earlier versions' events")
    p.add_argument("--is-clip", type=float, default=1.0, help="ppo_stale: clip of a stale event's importance weight")
    p.add_argument("--alpha", type=float, default=0.5, help="LinUCB's exploration weight")
    p.add_argument("--taste", choices=["bands", "curve", "mixture"], default="bands",
                   help="factored: a session's taken share by length band, as a curve in log length, or "
                        "as one of a few kinds of such curves read from the collecting sessions (mixture)")
    p.add_argument("--serve-draws", action=argparse.BooleanOptionalAction, default=True,
                   help="factored, --personal: serve (and so measure) by Thompson draws of each session's taste "
                        "(off: its posterior mean, greedy; collection always draws)")
    p.add_argument("--right-model", choices=["logistic", "net"], default="logistic",
                   help="factored: P(right) by a logistic regression or a small network (two hidden layers)")
    p.add_argument("--hits", action=argparse.BooleanOptionalAction, default=False,
                   help="factored: the rightness model also reads how the session's recent cuts fared against what "
                        "was typed next (specialists.tab.loop.factored.Hits); off by default, as the earlier figures ran")
    p.add_argument("--dismissals", action=argparse.BooleanOptionalAction, default=False,
                   help="factored: a suggestion the session was shown and dismissed is evidence against the cuts that "
                        "carry it on, as much as the session's taste says (one who takes right lines dismissed a wrong "
                        "one); off by default, as the earlier figures ran")
    p.add_argument("--calibrate", type=float, default=0.0, metavar="SHARE",
                   help="factored: calibrate P(right) on this share of the latest rows, predicted by a model fitted "
                        "on the rows before them (a logistic regression on its logit and the cut's log length); "
                        "0: none, as the earlier figures ran")
    p.add_argument("--serve-also", action=argparse.BooleanOptionalAction, default=False,
                   help="factored, --personal, --population: measure the last version also served globally "
                        "(everyone's taste), as each kind of taste for everyone (one global policy per kind), as a "
                        "person of no record (the kinds by their shares) and told who types, to the same people; "
                        "the run itself is unchanged (its last row's 'serving')")
    p.add_argument("--taste-prior", type=float, default=2.0,
                   help="factored, bands: pseudo-counts of a session's taken share at the share over everyone")
    p.add_argument("--taste-spread", type=float, default=1.5,
                   help="factored, curve (and mixture): prior standard deviation of a session's (a kind's) curve weights about everyone's")
    p.add_argument("--explore-to", choices=["uniform", "value"], default="uniform",
                   help="--explore's draws: uniform over the actions, or the cut that would save the most "
                        "if right (the policy's logit + log of its length)")
    p.add_argument("--explore", type=float, default=0.0,
                   help="policy-gradient learners: the share of collected draws not taken from the policy "
                        "(--explore-to says where; TabPolicy.act_many's explore; measuring stays greedy)")
    p.add_argument("--q-ridge", type=float, default=1.0,
                   help="ppo_q: the ridge of its regression of reward (the control variate)")
    p.add_argument("--bc-projects", default="train", help="projects the always-show start is fitted on")
    p.add_argument("--bc-per-project", type=int, default=20, help="always_show start: edits per project fitted on")
    p.add_argument("--bc-steps", type=int, default=400, help="always_show start: fitting steps")
    p.add_argument("--bc-smoothing", type=float, default=0.1, help="always_show start: label smoothing")
    p.add_argument("--max-requests-per-pair", type=int, default=MAX_PER_PAIR,
                   help="replay each edit's first N requests only")
    p.add_argument("--ask-after-edit", action=argparse.BooleanOptionalAction, default=ASK_AFTER_EDIT,
                   help="a request also when each hunk is done, as the deployed loop's users ask (default off: "
                        "the protocol the shipped policy was trained on)")
    p.add_argument("--batch-sessions", type=int, default=32, help="sessions stepped together in collection")
    p.add_argument("--lm", default="frozen",
                   help="the LM per run, comma-separated: frozen (the cache's), pg (policy gradient on "
                        "the shown LM lines), pg_sft (that plus the user's typed line); see LMLearner")
    p.add_argument("--lm-lr", type=float, default=1e-4, help="the LM's Adam learning rate (pg, pg_sft)")
    p.add_argument("--lm-sft", type=float, default=0.5, help="pg_sft: weight of the typed line's mean log-likelihood")
    p.add_argument("--lm-l2", type=float, default=0.0, help="pull towards the previous LM weights (0: none)")
    p.add_argument("--lm-clip", type=float, default=1.0, help="the LM update's gradient-norm clip")
    p.add_argument("--lm-kl", type=float, default=0.0,
                   help="weight of KL(the run's start LM || new) at the trained positions (0: none)")
    p.add_argument("--lm-batch", type=int, default=32, help="sequences per LM step")
    p.add_argument("--lm-sft-max", type=int, default=1000,
                   help="pg_sft: typed lines per update at most (a seeded sample of the turn's)")
    p.add_argument("--lm-nll-lines", type=int, default=400,
                   help="typed lines of the later history the LM's fit (lm_nll) is measured on")
    p.add_argument("--population", default=None, metavar="FILE.yaml",
                   help="simulated people of this population type the edits (configs/users/; default: the oracle)")
    p.add_argument("--people", type=int, default=16, help="people drawn from --population")
    p.add_argument("--gate-edits", type=int, default=0,
                   help="as the product's loop does, gate each policy-gradient update: this many of the "
                        "latest earlier-history edits are kept out of collection, and a candidate ships only "
                        "if, replayed on them, it is not worse than the deployed version by more than "
                        "--gate-margin (95%% interval, paired by edit); 0: every update ships")
    p.add_argument("--gate-margin", type=float, default=0.005,
                   help="the gate's margin, reward per request (the live loop's default)")
    p.add_argument("--measure-worlds", type=int, default=1,
                   help="measure every version on the later history typed by this many draws of "
                        "--people people (world seeds 0, 1, ...; 0 is the people who collect): more "
                        "people of each kind measured, for a tighter per-kind comparison")
    p.add_argument("--reward", choices=["accept", "kept"], default="accept",
                   help="accept: +0.75/-0.25 of the accept key; kept: users.KeptReward, of what was kept")
    p.add_argument("--personal", action=argparse.BooleanOptionalAction, default=False,
                   help="the policy (and the bandit) read the personal features the server keeps per "
                        "session and project (specialists.tab.personal); off: they read zeros")
    p.add_argument("--checkpoint", default="specialists/tab/checkpoint", help="the Tab checkpoint (the shipped start)")
    p.add_argument("--cache-dir", default="runs/learn_cache",
                   help="where computed observations are kept between runs (the first run is the slow one)")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--warm-only", action="store_true", help="compute the observations of both histories, then stop")
    p.add_argument("--out", default="benchmarks/out/loop_learn.json", help="the JSON of every row and check")
    p.add_argument("--curve", default="benchmarks/out/loop_learn_curve.png",
                   help="where the learning curve is drawn (the tracked PNGs are named with --curve)")
    args = p.parse_args(argv)
    args.starts = [s for s in args.start.split(",") if s]
    learners = [s for s in args.learner.split(",") if s]
    unknown = [x for x in learners if x not in LEARNERS] + [x for x in args.starts if x not in STARTS]
    if unknown or not learners or not args.starts:
        p.error(f"--learner takes {', '.join(LEARNERS)} and --start {', '.join(STARTS)} "
                f"(comma-separated); got {', '.join(unknown) or 'none'}")
    lm_variants = [s for s in args.lm.split(",") if s]
    if args.gate_edits and lm_variants != ["frozen"]:
        p.error("--gate-edits gates the policy's updates only; with --lm the LM's would ship ungated")
    if args.gate_edits < 0:
        p.error("--gate-edits must be 0 (no gate) or more")
    if (args.hits or args.dismissals or args.calibrate) and "factored" not in learners:
        p.error("--hits, --dismissals and --calibrate are inputs of the factored learner: add factored to --learner")
    if args.serve_also and ("factored" not in learners or not args.personal or not args.population):
        p.error("--serve-also measures a personal factored version other ways: it needs --learner factored, "
                "--personal and --population")
    if not 0.0 <= args.calibrate < 1.0:
        p.error(f"--calibrate {args.calibrate}: a share of the rightness rows, at least 0 and under 1")
    if not 0.0 <= args.explore <= 1.0:
        p.error(f"--explore {args.explore}: a share of draws, between 0 and 1")
    seeds = [int(s) for s in args.seeds.split(",") if s]
    MAX_PER_PAIR = args.max_requests_per_pair
    ASK_AFTER_EDIT = args.ask_after_edit
    PEOPLE = max(1, args.people)
    MEASURE_WORLDS = max(1, args.measure_worlds)
    PERSONAL = args.personal
    HITS = args.hits
    DISMISSALS = args.dismissals
    if args.population:
        from specialists.tab.users import PopulationError, load_population

        try:
            POPULATION = load_population(args.population)
        except PopulationError as exc:
            raise SystemExit(f"--population: {exc}") from exc

    import torch

    from specialists.tab.features import ObserveConfig
    from specialists.tab.lm import TabLM
    from specialists.tab.policy import TabPolicy

    torch.set_num_threads(args.threads)
    t_start = time.time()
    ckpt = Path(args.checkpoint)
    lm = TabLM(ckpt, threads=args.threads).load()
    config = ObserveConfig()
    cache = ObservationCache.kept_in(args.cache_dir, lm, config, ckpt)
    shipped = TabPolicy.load(ckpt)
    lm_start = {k: v.detach().clone() for k, v in lm.model.state_dict().items()}
    if args.normalize_advantages:
        shipped.config.normalize_advantages = True
    reward = RewardConfig() if args.reward == "accept" else KeptReward()

    pairs = sorted(load_split(args.data, args.project, args.pairs, seed=0), key=lambda q: q.date)
    k = int(round(args.collect_share * len(pairs)))
    collect_pool, later = pairs[:k], pairs[k:]
    if args.measure_pairs and len(later) > args.measure_pairs:
        later = sorted(random.Random("measure").sample(later, args.measure_pairs), key=lambda q: q.date)
    if args.collect_from == "later":
        collect_pool = list(later)
    gate_pairs: list[Pair] = []
    if args.gate_edits:  # the latest earlier edits, kept out of collection for the gate to replay
        if args.gate_edits >= len(collect_pool):
            raise SystemExit(f"--gate-edits {args.gate_edits}: the earlier history has only "
                             f"{len(collect_pool)} pairs to collect on")
        collect_pool, gate_pairs = collect_pool[:-args.gate_edits], collect_pool[-args.gate_edits:]
    info: dict[str, Any] = {"project": args.project, "collect_from": args.collect_from,
                            "gate_pairs": len(gate_pairs),
                            "collect_pairs": len(collect_pool),
                            "collect_dates": [collect_pool[0].date[:10], collect_pool[-1].date[:10]],
                            "measure_pairs": len(later), "measure_dates": [later[0].date[:10], later[-1].date[:10]]}
    ref = {}
    for name, dec in (("never_show", lambda obs: [Decision(0) for _ in obs]),
                      ("always_ensemble", lambda obs: [Decision(default_row(o)) for o in obs])):
        totals = Totals()
        ref[name] = {k2: round(v, 5) for k2, v in
                     measure(measure_rollout(later, cache, dec, reward, totals), totals).items()}
    kinds = [t.name for t in POPULATION.types] if POPULATION is not None else []
    for kind in kinds if len(kinds) > 1 else []:  # what knowing who types could add
        totals = Totals()
        steps = measure_rollout(later, cache, kind_decider(policy_decider(shipped, False), kind), reward, totals)
        ref[f"shipped_but_never_show_{kind}"] = {
            **{k2: round(v, 5) for k2, v in measure(steps, totals).items()},
            "per_person": {name: {k2: v for k2, v in row.items() if k2 != "per_edit"}
                           for name, row in per_person(steps, totals).items()}}
    info["reference"] = ref
    if cache.misses:  # runs in parallel share the file: write only what is new
        cache.save()
    if args.warm_only:
        for i in range(0, len(collect_pool), 20):
            rollout(collect_pool[i:i + 20], cache, lambda obs: [Decision(default_row(o)) for o in obs], reward)
            cache.save()
            print(f"warm: {i + 20} of {len(collect_pool)} pairs, {len(cache)} states", file=sys.stderr, flush=True)
        return info
    nll_items = typed_lines(lm, later, args.lm_nll_lines) if lm_variants != ["frozen"] else []
    if nll_items:
        info["lm_nll_lines"] = len(nll_items)
    print(json.dumps({"setup": info, "seconds": round(time.time() - t_start, 1)}), file=sys.stderr, flush=True)

    rows: list[dict] = []
    bc_info: dict[str, Any] = {}
    cols = ["start", "learner", "seed", "turn", "events", "reward", "se", "edit_se", "paired_gain", "paired_se",
            "show_rate", "accept_rate", "kept_per_1000", "switched_off", "tab_off", "reward_per_ask",
            "collect_reward", "collect_se", "kl", "grad_norm", "clip_frac", "entropy", "epochs", "seconds"]
    if lm_variants != ["frozen"]:
        cols += ["lm_nll", "lm_shown", "lm_accepted", "lm_pg", "lm_sft", "lm_loss", "lm_kl", "lm_grad_norm", "lm_drift",
                 "lm_seconds", "measure_seconds"]
    print(" | ".join(cols))

    def log(row: dict) -> None:
        print(" | ".join(str(row.get(c, "")) for c in cols), flush=True)

    bc_pairs = load_split(args.data, args.bc_projects, args.bc_per_project, seed=0) \
        if "always_show" in args.starts else []
    if args.project in {q.repo for q in bc_pairs}:
        raise SystemExit(f"{args.project} is among --bc-projects: the start must not have seen it")
    for seed in seeds:
        for start_name in args.starts:
            if start_name == "shipped":
                start = shipped
            else:  # always_show (the starts were checked with the arguments)
                start, bc_info[str(seed)] = always_show_start(shipped, bc_pairs, cache, seed, args.bc_steps,
                                                              args.bc_smoothing, reward)
                start.config.normalize_advantages = shipped.config.normalize_advantages
            args._start = start_name
            for learner in learners:
                for variant in lm_variants:
                    rows += learn(start, learner, seed, args, collect_pool, later, cache, reward, log,
                                  gate_pairs=gate_pairs,
                                  lm_variant=variant, lm_start=lm_start, nll_items=nll_items)
            if cache.misses:
                cache.save()

    result = checks(rows, args)
    args.curve and plot(rows, Path(args.curve), args.starts, list(dict.fromkeys(r["learner"] for r in rows)))
    print(mean_table(rows))
    summary = {"setup": info, "always_show_fit": bc_info, **result,
               "args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
               "cache_misses": cache.misses, "minutes": round((time.time() - t_start) / 60, 2),
               "machine": f"{platform.machine()}, {os.cpu_count()} cores, no GPU", "curve": args.curve}
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({**summary, "rows": rows}, indent=1) + "\n")
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
