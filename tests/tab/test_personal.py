"""Personalisation the server computes itself (issue 35): the tracker's features, the shipped
policy's decisions unchanged by the new inputs, and a person's Tab-off requests not asked."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from specialists.tab.data import Pair
from specialists.tab.personal import PERSONAL_FEATURES, Tracker
from specialists.tab.replay import Session, Suggestion
from specialists.tab.users import World, parse_population

REPO = Path(__file__).resolve().parents[2]


def feats(t: Tracker, session: str = "s", project: str = "p", now: float = 0.0) -> dict[str, float]:
    x = t.features(session, project, now)
    assert len(x) == len(PERSONAL_FEATURES)
    return dict(zip(PERSONAL_FEATURES, x))


# -- the tracker -----------------------------------------------------------------------------
def test_a_new_session_reads_unknown() -> None:
    f = feats(Tracker())
    assert f["s_new"] == 1.0 and f["s_log_shown"] == 0.0
    assert f["s_accept_ratio"] == f["p_accept_ratio"] == f["s_taken_ratio"] == 0.5  # the prior
    assert f["s_last_accepted"] == f["s_last_dismissed"] == 0.0


def test_accepts_and_dismissals_move_the_ratios_and_the_streak() -> None:
    t = Tracker()
    for i in range(6):
        t.request("s", "p", float(i))
        t.outcome("s", "p", accepted=True, chars_shown=10, chars_taken=10)
    taker = feats(t, now=6.0)
    assert taker["s_accept_ratio"] > 0.8 and taker["s_taken_ratio"] > 0.9
    assert taker["s_last_accepted"] == 1.0 and taker["s_log_dismiss_streak"] == 0.0 and taker["s_new"] == 0.0
    for i in range(3):
        t.request("s", "p", 10.0 + i)
        t.outcome("s", "p", accepted=False, chars_shown=10, chars_taken=0)
    f = feats(t, now=13.0)
    assert f["s_accept_ratio"] < taker["s_accept_ratio"]
    assert f["s_log_dismiss_streak"] == pytest.approx(math.log1p(3))
    assert f["s_last_dismissed"] == 1.0 and f["s_last_accepted"] == 0.0
    # decayed: recent outcomes weigh more than old ones
    t2 = Tracker()
    for acc in [False] * 3 + [True] * 6:
        t2.request("s", "p", 0.0)
        t2.outcome("s", "p", accepted=acc, chars_shown=10, chars_taken=10 * acc)
    assert feats(t2)["s_accept_ratio"] > feats(t)["s_accept_ratio"]


def test_partial_takers_and_wrong_accepts_show_in_the_taken_ratio() -> None:
    t = Tracker()
    for _ in range(5):
        t.outcome("word", "p", accepted=True, chars_shown=40, chars_taken=4)  # the first word
        t.outcome("whole", "p", accepted=True, chars_shown=40, chars_taken=40)
        t.outcome("undo", "q", accepted=True, chars_shown=20, chars_taken=0)  # undone: 0 reported
    assert feats(t, "word")["s_taken_ratio"] < 0.2 < 0.9 < feats(t, "whole")["s_taken_ratio"]
    assert feats(t, "undo", "q")["s_taken_ratio"] < 0.1
    assert feats(t, "word")["s_accept_ratio"] == feats(t, "whole")["s_accept_ratio"]


def test_long_suggestions_have_their_own_ratio() -> None:
    t = Tracker(long_chars=24)
    for _ in range(5):
        t.outcome("s", "p", accepted=True, chars_shown=10, chars_taken=10)
        t.outcome("s", "p", accepted=False, chars_shown=60, chars_taken=0)
    f = feats(t)
    assert f["s_long_accept_ratio"] < 0.2 and 0.4 < f["s_accept_ratio"] < 0.6


def test_time_since_last_and_typing_speed_come_from_the_servers_clock() -> None:
    t = Tracker()
    t.request("s", "p", now=100.0, position=50)
    assert feats(t, now=102.5)["s_log_seconds_since_last"] == pytest.approx(math.log1p(2.5))
    t.request("s", "p", now=102.0, position=60)  # 10 characters in 2 s
    slow = feats(t, now=102.0)["s_log_chars_per_s"]
    assert slow == pytest.approx(math.log1p(5.0))
    fast = Tracker()
    fast.request("s", "p", now=0.0, position=0)
    fast.request("s", "p", now=1.0, position=20)
    assert feats(fast, now=1.0)["s_log_chars_per_s"] > slow
    t.request("s", "p", now=103.0, position=5000)  # a jump elsewhere is not typing
    assert feats(t, now=103.0)["s_log_chars_per_s"] == pytest.approx(slow)


def test_project_history_is_shared_by_its_sessions_and_sessions_are_apart() -> None:
    t = Tracker()
    for s in ("a", "b", "c"):
        t.outcome(s, "proj", accepted=False, chars_shown=10, chars_taken=0)
    other = feats(t, "new-session", "proj")
    assert other["s_new"] == 1.0 and other["s_accept_ratio"] == 0.5
    assert other["p_accept_ratio"] < 0.3 and other["p_log_shown"] > 0
    assert feats(t, "new-session", "elsewhere")["p_log_shown"] == 0.0


def test_the_tracker_forgets_the_least_recently_used_beyond_its_cap() -> None:
    t = Tracker(max_keys=3)
    for s in "abcd":
        t.outcome(s, "p", accepted=True, chars_shown=5, chars_taken=5)
    assert set(t.sessions) == {"b", "c", "d"} and feats(t, "a")["s_new"] == 1.0


# -- the shipped policy decides as before ----------------------------------------------------
def _real_observations(limit: int = 160) -> list:
    """Observations of the shipped LM on edits replayed from this repository's own code."""
    from specialists.tab.features import observe
    from specialists.tab.lm import TabLM
    from specialists.tab.specialist import DEFAULT_CHECKPOINT

    lm = TabLM(DEFAULT_CHECKPOINT, context_tokens=64).load()
    out = []
    for rel in ("specialists/tab/personal.py", "specialists/tab/users.py"):
        after = (REPO / rel).read_text()
        cut = after.index("\ndef ", len(after) // 2)
        end = after.find("\n\n", cut + 1)
        end = len(after) if end < 0 else end
        session = Session(Pair(repo="complement", path=rel, language="python",
                               before=after[:cut] + after[end:], after=after, commit="0" * 40))
        while (req := session.next_request()) is not None and len(out) < limit:
            out.append(observe(req, lm))
            session.respond(None)
    return out


def test_the_shipped_policy_makes_the_same_decisions_whatever_the_personal_features() -> None:
    """The shipped checkpoint was saved before the personal inputs: it loads with their
    weights at zero and acts exactly as its own network, with its original 89 inputs, does."""
    import torch
    from safetensors.torch import load_file

    from specialists.tab.policy import PolicyConfig, TabPolicy, _net
    from specialists.tab.specialist import DEFAULT_CHECKPOINT

    policy = TabPolicy.load(DEFAULT_CHECKPOINT)
    obs = _real_observations()
    assert len(obs) > 100 and sum(len(o.rows) > 0 for o in obs) > 50
    rng = np.random.default_rng(0)
    personal = [o.with_personal(rng.normal(size=len(PERSONAL_FEATURES)) * 3) for o in obs]

    # the original network: the saved weights as they are, the request's features only
    saved = load_file(str(DEFAULT_CHECKPOINT / "policy.safetensors"))
    n_old = saved["state.0.weight"].shape[1]
    old = _net(PolicyConfig(**{**policy.config.__dict__, "n_state": n_old}))
    old.load_state_dict(saved)
    old.eval()
    state, hidden, actions, mask = policy._tensors(obs)
    with torch.no_grad():
        old_logits, _ = old(state[:, :n_old], hidden, actions, mask)
    greedy_old = old_logits.argmax(-1).tolist()

    plain = policy.act_many(obs, sample=False)
    with_personal = policy.act_many(personal, sample=False)
    assert [a.index for a in plain] == [a.index for a in with_personal] == greedy_old
    assert any(a.index > 0 for a in plain) and any(a.index == 0 for a in plain)
    # to the bit in the acting path; sampled draws are the same draws too
    la, _ = policy._head_numpy(*policy._arrays(obs))
    lb, _ = policy._head_numpy(*policy._arrays(personal))
    assert np.array_equal(la, lb)
    finite = np.isfinite(la)
    assert np.allclose(la[finite], old_logits.numpy()[finite], atol=1e-5)
    policy._gen.manual_seed(7)
    draws = [a.index for a in policy.act_many(obs)]
    policy._gen.manual_seed(7)
    assert [a.index for a in policy.act_many(personal)] == draws


def test_an_update_on_personal_features_moves_their_weights(tmp_path) -> None:
    """Zero at the start is not frozen: one PPO update on rewards that depend on a personal
    feature gives its weights a gradient; saved and loaded, the policy keeps them."""
    from specialists.tab.policy import POLICY_STATE, PPOConfig, Sample, TabPolicy
    from specialists.tab.specialist import DEFAULT_CHECKPOINT

    policy = TabPolicy.load(DEFAULT_CHECKPOINT)
    obs = [o for o in _real_observations(60) if len(o.rows)][:40]
    samples = []
    for i, o in enumerate(obs):
        x = np.zeros(len(PERSONAL_FEATURES), np.float32)
        x[1] = 1.0 if i % 2 else 0.0  # s_accept_ratio: shows pay only where it is high
        o = o.with_personal(x)
        a = policy.act(o)
        samples.append(Sample(o, a, (0.5 if i % 2 else -0.5) if a.index else 0.0))
    w0 = policy.net.state[0].weight.detach().clone()
    policy.ppo_update(samples, PPOConfig(epochs=2, target_kl=10.0))
    moved = (policy.net.state[0].weight.detach() - w0)[:, -len(PERSONAL_FEATURES):]
    assert moved.abs().sum() > 0
    policy.save(tmp_path / "p")
    back = TabPolicy.load(tmp_path / "p")
    assert back.config.n_state == len(POLICY_STATE)
    assert np.array_equal(back.net.state[0].weight.detach().numpy(), policy.net.state[0].weight.detach().numpy())


def test_after_a_shown_suggestion_the_personal_features_still_move_the_policy() -> None:
    """The shipped head reads the last outcome through a normalizer that makes it +-1,000, so
    after any shown suggestion every unit of its state layer is saturated and passes no
    gradient: the personal columns of that layer cannot learn there. Their own layer (zero
    at first) can: a few PPO updates on rewards that depend on a personal feature change the
    decisions between requests that differ only in it, on those requests (with the state
    layer's columns alone, the two kinds' show rates stay equal to the fourth decimal)."""
    import torch

    from specialists.tab.features import DYNAMIC_FEATURES
    from specialists.tab.policy import PPOConfig, Sample, TabPolicy
    from specialists.tab.specialist import DEFAULT_CHECKPOINT

    torch.manual_seed(0)
    policy = TabPolicy.load(DEFAULT_CHECKPOINT)
    assert float(policy.net.personal.weight.detach().abs().sum()) == 0.0  # the shipped decisions
    after_accept = np.zeros(len(DYNAMIC_FEATURES), np.float32)
    after_accept[DYNAMIC_FEATURES.index("last_accepted")] = 1.0
    base = [o for o in _real_observations(80) if len(o.rows)][:40]
    obs = [dataclasses.replace(o, dynamic=after_accept) for o in base]

    def person(o, keeps: bool):
        x = np.zeros(len(PERSONAL_FEATURES), np.float32)
        x[PERSONAL_FEATURES.index("s_accept_ratio")] = 0.9 if keeps else 0.1
        return o.with_personal(x)

    state, hidden, _, _ = policy._tensors([person(o, True) for o in obs])
    with torch.no_grad():
        pre = policy.net.state[0]((state - policy.net.s_mean) / policy.net.s_std)
    assert float((pre.abs() > 5).float().mean()) > 0.9  # saturated: tanh' < 2e-4

    def p_show(keeps: bool) -> float:  # greedy: no draws taken from the policy's generator
        return float(np.mean([a.prob_show for a in policy.act_many([person(o, keeps) for o in obs], sample=False)]))

    assert p_show(True) == p_show(False)
    policy._gen.manual_seed(0)
    for _ in range(6):  # each request twice, once as each kind: showing pays to one, costs the other
        samples = []
        for keeps in (True, False):
            for o in obs:
                ob = person(o, keeps)
                a = policy.act(ob)
                samples.append(Sample(ob, a, (1.0 if keeps else -1.0) if a.index else 0.0))
        policy.ppo_update(samples, PPOConfig(epochs=4, target_kl=10.0, lr=3e-3))  # the loop's lr
    # 0.41 here; 0.02 to 0.62 over eight seeds of the draws (the two kinds equal in all eight
    # with the personal layer frozen)
    assert p_show(True) > p_show(False) + 0.01
    # the state layer's personal columns got (almost) nothing: their units were saturated
    column = policy.net.state[0].weight.detach()[:, -len(PERSONAL_FEATURES):]
    assert float(policy.net.personal.weight.detach().abs().sum()) > 100 * float(column.abs().sum())


# -- Tab off: no request is made ---------------------------------------------------------------
def _impatient_world() -> World:
    pop = parse_population({"name": "t", "people": [
        {"type": "t", "traits": {"patience": {"rejections": 2, "off_requests": 3}}}]})
    return World(pop, seed=0, people=1)


def test_in_process_tab_off_requests_are_not_asked_of_the_policy() -> None:
    from specialists.tab.harness import ObservationCache, run

    before = "import os\n"
    after = before + "\n\ndef load(path, encoding):\n    with open(path, encoding=encoding) as fh:\n" \
                     "        return fh.read().strip()\n"
    the_pair = Pair(repo="toy", path="toy.py", language="python", before=before, after=after, commit="c0ffee")
    asked = []

    def wrong(req, obs):
        asked.append(req.cursor)
        return Suggestion(req.cursor, req.cursor, "zzz_not_it()")

    m = run([the_pair], wrong, ObservationCache(None), world=_impatient_world())
    # every third-plus request: asked twice, dismissed twice (switch off), three not made, ...
    total = len(asked) + m.tab_off
    assert m.tab_off > 0 and m.requests == len(asked) and m.shown == len(asked)
    assert m.switched_off == len(asked) // 2
    # the same person without a policy call while off: what the HTTP simulator does
    s = Session(the_pair, person=_impatient_world().person(0))
    made = off = 0
    while s.next_request() is not None:
        if s.tab_off:
            s.respond(None)
            off += 1
            continue
        made += 1
        s.respond(Suggestion(0, 0, "zzz_not_it()"))
    assert (made, off) == (len(asked), m.tab_off) and made + off == total


def test_typing_speed_trait_sets_the_clock() -> None:
    before, after = "x = 1\n", "x = 1\nvalue = compute(alpha, beta)\n"
    the_pair = Pair(repo="toy", path="t.py", language="python", before=before, after=after, commit="c0ffee")

    def clock(traits: dict) -> float:
        pop = parse_population({"name": "t", "people": [{"type": "t", "traits": traits}]})
        s = Session(the_pair, person=World(pop).person(0))
        while s.next_request() is not None:
            s.respond(None)
        return s.clock

    slow, fast = clock({"typing": {"per_char": 0.5}}), clock({"typing": {"per_char": 0.05}})
    assert slow > fast and clock({}) == clock({"typing": {"per_char": 0.18}})


# -- the live specialist keeps the same history and logs it with each decision ---------------
def test_the_live_specialist_computes_and_logs_personal_features() -> None:
    import json

    from specialists.tab import TabSpecialist

    spec = TabSpecialist(log_features=True)
    spec.setup()
    # a request the shipped policy shows something at (greedy: the same each time), found by
    # replaying an edit of this repository's code in another session
    after = (REPO / "specialists/tab/personal.py").read_text()
    cut = after.index("\ndef ", len(after) // 2)
    session = Session(Pair(repo="complement", path="p.py", language="python", before=after[:cut],
                           after=after, commit="0" * 40))
    while (req := session.next_request()) is not None:
        body = {k: v for k, v in req.to_json().items() if k != "request_id"}
        if spec.answer({**body, "session": "probe"}).output is not None:
            break
        session.respond(None)
    assert req is not None, "the replay must reach a request the policy shows at"
    body["session"] = "ed-1"
    first = spec.answer({**body, "seq": 1})
    assert first.output is not None
    logged = dict(zip(PERSONAL_FEATURES, json.loads(first.meta["features"])["personal"]))
    assert logged["s_new"] == 1.0
    assert spec.record_outcome(first.meta["request_id"], "rejected") is True
    assert spec.record_outcome(first.meta["request_id"], "rejected") is False  # once
    assert spec.record_outcome("not-shown-here", "accepted") is False
    second = spec.answer({**body, "seq": 2})
    after = dict(zip(PERSONAL_FEATURES, json.loads(second.meta["features"])["personal"]))
    assert after["s_new"] == 0.0 and after["s_last_dismissed"] == 1.0
    assert after["s_log_dismiss_streak"] == pytest.approx(math.log1p(1))
    # no session: no history, the features read as zeros (the policy's input without them)
    anon = spec.answer({k: v for k, v in body.items() if k != "session"})
    assert json.loads(anon.meta["features"])["personal"] == []


def test_stored_features_keep_the_personal_ones_and_older_events_read_as_zeros() -> None:
    import json

    from specialists.tab.features import ACTION_FEATURES, features_json, from_features, state_vector

    obs = _real_observations(3)[-1]
    x = np.arange(len(PERSONAL_FEATURES), dtype=np.float32) / 7
    stored = json.loads(features_json(obs.with_personal(x)))
    back = from_features(stored, len(ACTION_FEATURES))
    assert np.array_equal(back.personal, x) and np.array_equal(state_vector(back)[-len(x):], x)
    del stored["personal"]  # an event logged before the personal features
    old = from_features(stored, len(ACTION_FEATURES))
    assert old.personal is None and not state_vector(old)[-len(x):].any()


def test_a_version_saved_before_the_personal_layer_loads_and_trains_on(tmp_path) -> None:
    """A loop's version saved before the personal inputs had their own layer (its weights and
    Adam state without it) loads with that layer at zero, acts as saved, and the next update
    continues its optimizer and moves the new layer."""
    import torch
    from safetensors.torch import load_file, save_file

    from specialists.tab.policy import OPTIMIZER_FILE, PPOConfig, Sample, TabPolicy
    from specialists.tab.specialist import DEFAULT_CHECKPOINT

    policy = TabPolicy.load(DEFAULT_CHECKPOINT)
    obs = [o.with_personal(np.full(len(PERSONAL_FEATURES), 0.5, np.float32))
           for o in _real_observations(60) if len(o.rows)][:30]
    policy.ppo_update([Sample(o, policy.act(o), 0.1) for o in obs], PPOConfig(epochs=1, target_kl=10.0))
    policy.save(tmp_path / "v1")
    # what the code before the layer wrote: no personal.weight, Adam over one parameter fewer
    weights = load_file(str(tmp_path / "v1" / "policy.safetensors"))
    weights.pop("personal.weight")
    save_file(weights, str(tmp_path / "v1" / "policy.safetensors"))
    opt = torch.load(tmp_path / "v1" / OPTIMIZER_FILE, weights_only=True)
    last = max(opt["param_groups"][-1]["params"])
    opt["state"].pop(last)
    opt["param_groups"][-1]["params"] = [i for i in opt["param_groups"][-1]["params"] if i != last]
    torch.save(opt, tmp_path / "v1" / OPTIMIZER_FILE)

    back = TabPolicy.load(tmp_path / "v1")
    assert float(back.net.personal.weight.detach().abs().sum()) == 0.0
    la, _ = back._head_numpy(*back._arrays(obs))
    with torch.no_grad():
        lb, _ = back.net(*back._tensors(obs))
    finite = np.isfinite(la)
    assert np.allclose(la[finite], lb.numpy()[finite], atol=1e-5)
    assert back.opt.state_dict()["state"].keys() == opt["state"].keys()  # Adam's moments carried on
    back.ppo_update([Sample(o, back.act(o), 0.1) for o in obs], PPOConfig(epochs=1, target_kl=10.0))
    assert float(back.net.personal.weight.detach().abs().sum()) > 0.0


def test_the_personal_inputs_are_scaled_once_while_their_weights_are_zero() -> None:
    """The shipped checkpoint reads the personal inputs unscaled; the first update standardises
    them on its batch (no decision changes: their weights are zero) and no later one does."""
    import torch

    from specialists.tab.policy import PPOConfig, Sample, TabPolicy
    from specialists.tab.specialist import DEFAULT_CHECKPOINT

    torch.manual_seed(0)
    policy = TabPolicy.load(DEFAULT_CHECKPOINT)
    rng = np.random.default_rng(0)
    obs = [o.with_personal(rng.uniform(0.3, 0.7, len(PERSONAL_FEATURES)))
           for o in _real_observations(60) if len(o.rows)][:30]
    s0 = len(policy.net.s_mean) - len(PERSONAL_FEATURES)
    assert not policy.scale_personal([o.with_personal(None) for o in obs])  # nothing to scale on
    before, _ = policy._head_numpy(*policy._arrays(obs))
    assert policy.scale_personal(obs)
    after, _ = policy._head_numpy(*policy._arrays(obs))
    assert np.array_equal(before, after)
    std = policy.net.s_std[s0:].numpy()
    assert np.allclose(std, np.stack([o.personal for o in obs]).std(0), rtol=1e-4)
    policy.ppo_update([Sample(o, policy.act(o), 0.1 if i % 2 else -0.1) for i, o in enumerate(obs)],
                      PPOConfig(epochs=1, target_kl=10.0))
    moved = [o.with_personal(o.personal + 0.2) for o in obs]
    assert not policy.scale_personal(moved)  # the weights have moved: the scales stay
    assert np.array_equal(policy.net.s_std[s0:].numpy(), std)
