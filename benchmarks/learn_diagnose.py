"""Why does PPO learn slowly from the shipped checkpoint? (issue 35, the noisy population)

    python benchmarks/learn_diagnose.py ../shared/data/commits --project httpx \\
        --population configs/users/noisy.yaml

The first collection turn of ``benchmarks/loop_learn.py`` (the same people, personal
features, requests after each hunk and date order; seed ``--seed``): ``--events`` events
the shipped policy draws on the project's *earlier* history — what the loop trains on; the
later history it is measured on is not read. On them it prints, as JSON:

* the policy's spread: entropy over the actions, "show nothing", the expected length of
  what it shows against the longest on offer, its mass on cuts over ``--long`` characters;
* reward by the length of the cut drawn;
* a LinUCB (``specialists.tab.loop.bandit``) fitted on the same events: how long its greedy
  picks are, and the probability the policy gives them;
* the value head against the rewards, and the advantages PPO computes from it;
* one PPO update (``loop_learn``'s settings) with its KL guard and without: steps run, KL,
  where the mass went;
* the state layer's saturation after an accepted, a rejected and any other last outcome
  (a feature constant when the scales were fitted arrives divided by 0.001).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data")
    p.add_argument("--project", required=True)
    p.add_argument("--population", required=True, metavar="FILE.yaml")
    p.add_argument("--events", type=int, default=4000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--long", type=int, default=12, help="a cut longer than this many characters is long")
    p.add_argument("--checkpoint", default="specialists/tab/checkpoint")
    p.add_argument("--cache-dir", default="runs/learn_cache")
    args = p.parse_args(argv)

    import numpy as np
    import torch

    import benchmarks.loop_learn as L
    from specialists.tab.data import load_split
    from specialists.tab.features import STATE_FEATURES, ObserveConfig
    from specialists.tab.harness import ObservationCache
    from specialists.tab.lm import TabLM
    from specialists.tab.loop.bandit import LinUCB
    from specialists.tab.policy import POLICY_STATE, Action, PPOConfig, Sample, TabPolicy
    from specialists.tab.users import KeptReward, PopulationError, load_population

    torch.set_num_threads(1)
    try:
        L.POPULATION = load_population(args.population)
    except PopulationError as exc:
        raise SystemExit(f"--population: {exc}") from exc
    L.MAX_PER_PAIR, L.ASK_AFTER_EDIT, L.PEOPLE, L.PERSONAL = 300, True, 16, True
    ckpt = Path(args.checkpoint)
    lm = TabLM(ckpt, threads=1).load()
    cache = ObservationCache.kept_in(args.cache_dir, lm, ObserveConfig(), ckpt)
    policy = TabPolicy.load(ckpt)
    policy.config.normalize_advantages = True
    policy._gen = torch.Generator().manual_seed(args.seed)
    reward = KeptReward()
    pairs = sorted(load_split(args.data, args.project, 0, seed=0), key=lambda q: q.date)
    earlier = pairs[: int(round(0.7 * len(pairs)))]
    world, tracker = L.new_world(), L.new_tracker()
    batch: list = []
    cursor = 0
    while len(batch) < args.events:
        chunk = [earlier[(cursor + i) % len(earlier)] for i in range(32)]
        cursor += 32
        batch += L.rollout(chunk, cache, L.policy_decider(policy, True), reward,
                           limit=args.events - len(batch), world=world, tracker=tracker)
    batch = batch[: args.events]
    if cache.misses:
        cache.save()

    obs = [s.obs for s in batch]
    rew = np.array([s.outcome.reward for s in batch])
    idx = np.array([s.index for s in batch])
    state, hidden, actions, mask = policy._tensors(obs)

    def spread(pol: TabPolicy) -> dict[str, float]:
        with torch.no_grad():
            logits, _ = pol.net(state, hidden, actions, mask)
        logp = torch.log_softmax(logits, -1)
        prob = logp.exp()
        has = mask.sum(1) > 0
        ent = -(prob * torch.where(prob > 0, logp, torch.zeros_like(logp))).sum(-1)
        expected, longest, long_mass = [], [], []
        for b, o in enumerate(obs):
            if len(o.rows):
                lens = np.array([len(o.suggestion(i).text) for i in range(len(o.rows))])
                ps = prob[b, 1: 1 + len(lens)].numpy()
                expected.append(float((ps * lens).sum() / max(ps.sum(), 1e-12)))
                longest.append(int(lens.max()))
                long_mass.append(float(ps[lens > args.long].sum() / max(ps.sum(), 1e-12)))
        return {"entropy": round(float(ent[has].mean()), 4), "p_show_nothing": round(float(prob[has, 0].mean()), 4),
                "expected_chars_when_shown": round(float(np.mean(expected)), 2),
                "longest_on_offer_chars": round(float(np.mean(longest)), 2),
                f"mass_over_{args.long}_chars_when_shown": round(float(np.mean(long_mass)), 4)}

    out: dict = {"events": len(batch), "requests_with_actions": int((mask.sum(1) > 0).sum()),
                 "actions_per_request": round(float(mask.sum(1).float()[mask.sum(1) > 0].mean()), 2),
                 "shipped": spread(policy)}
    drawn = np.array([len(o.suggestion(i - 1).text) if i > 0 else 0 for o, i in zip(obs, idx)])
    by_len = {}
    for lo, hi in ((1, 4), (5, 8), (9, 12), (13, 20), (21, 40), (41, 10_000)):
        m = (drawn >= lo) & (drawn <= hi)
        by_len[f"{lo}-{hi}"] = {"events": int(m.sum()),
                                "reward": round(float(rew[m].mean()), 4) if m.any() else None}
    out["reward_by_drawn_length"] = by_len

    bandit = LinUCB.like(policy, alpha=0.5, reward_none=reward.none)
    bandit.update([(s.obs, s.index, s.outcome.reward) for s in batch])
    picks = bandit.choose_many(obs, False)
    with torch.no_grad():
        logits, value = policy.net(state, hidden, actions, mask)
    prob = torch.softmax(logits, -1)
    shown = [(b, c.index) for b, c in enumerate(picks) if c.index > 0]
    p_pick = np.array([float(prob[b, i]) for b, i in shown])
    greedy = logits.argmax(-1).numpy()
    out["bandit_on_the_same_events"] = {
        "show_rate": round(len(shown) / len(obs), 4),
        "chars_when_shown": round(float(np.mean([len(obs[b].suggestion(i - 1).text) for b, i in shown])), 2),
        "policy_prob_of_its_pick_median": float(f"{np.median(p_pick):.3g}"),
        "policy_prob_of_its_pick_under_0.01": round(float((p_pick < 0.01).mean()), 4)}
    g_shown = [(b, i) for b, i in enumerate(greedy) if i > 0]
    out["shipped_greedy"] = {"show_rate": round(len(g_shown) / len(obs), 4),
                             "chars_when_shown": round(float(np.mean([len(obs[b].suggestion(i - 1).text)
                                                                       for b, i in g_shown])), 2)}
    v = value.numpy()
    adv = rew - v
    out["value_head"] = {"value_mean": round(float(v.mean()), 4), "reward_mean": round(float(rew.mean()), 4),
                         "correlation": round(float(np.corrcoef(v, rew)[0, 1]), 4),
                         "squared_error": round(float(((v - rew) ** 2).mean()), 4),
                         "reward_variance": round(float(rew.var()), 4),
                         "advantage_mean_shown": round(float(adv[idx > 0].mean()), 4),
                         "advantage_mean_nothing": round(float(adv[idx == 0].mean()), 4)}

    samples = [Sample(s.obs, Action(index=s.index, logprob=s.logprob, version=s.version), s.outcome.reward)
               for s in batch]
    for name, kl in (("ppo_update_guarded", 0.1), ("ppo_update_unguarded", 1e9)):
        pol = copy.deepcopy(policy)
        stats = pol.ppo_update(samples, PPOConfig(epochs=8, minibatches=4, clip=0.2, target_kl=kl, lr=3e-3,
                                                  seed=args.seed))
        out[name] = {"steps": stats["tab/steps"], "kl": round(stats["tab/kl"], 4), "after": spread(pol)}

    x = (state - policy.net.s_mean) / policy.net.s_std
    with torch.no_grad():
        pre = x[:, : len(STATE_FEATURES)] @ policy.net.state[0].weight[:, : len(STATE_FEATURES)].T \
            + policy.net.state[0].bias
    saturated = (pre.abs() > 4).float().mean(1).numpy()
    la, lr_ = POLICY_STATE.index("last_accepted"), POLICY_STATE.index("last_rejected")
    after_a, after_r = state[:, la].numpy() > 0, state[:, lr_].numpy() > 0
    out["state_layer_saturated_share"] = {
        "after_accept": {"requests": int(after_a.sum()), "units_saturated": round(float(saturated[after_a].mean()), 4)},
        "after_reject": {"requests": int(after_r.sum()), "units_saturated": round(float(saturated[after_r].mean()), 4)},
        "otherwise": {"requests": int((~after_a & ~after_r).sum()),
                      "units_saturated": round(float(saturated[~after_a & ~after_r].mean()), 4)},
        "scale_of_last_accepted": float(policy.net.s_std[la]), "scale_of_last_rejected": float(policy.net.s_std[lr_])}
    personal = np.stack([o.personal for o in obs])
    out["personal_inputs"] = {"mean": [round(float(m), 3) for m in personal.mean(0)],
                              "std": [round(float(s), 3) for s in personal.std(0)]}
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
