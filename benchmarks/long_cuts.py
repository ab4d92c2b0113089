"""What would serving one kind of person long suggestions be worth? (issue 35, line 2)

    python benchmarks/long_cuts.py ../shared/data/commits --project httpx \\
        --population configs/users/mixed-length.yaml --kind liner --min-chars 20

A diagnostic, told who is typing (no learner can be): on the project's later history (the
edits ``loop_learn.py`` measures on, with ``--measure-worlds`` draws of people), people of
``--kind`` are shown at most one cut of at least ``--min-chars`` characters a request,
everyone else nothing, by each of these rules:

* ``longest`` — the longest such cut;
* ``favourite`` — the shipped policy's favourite such cut (highest logit), and only where its
  logit is within ``margin`` of the policy's "show nothing" (each of ``--margins``; ``none``:
  always);
* ``rightness`` — the cut a rightness model rates most likely right, where that probability
  reaches each of ``--thresholds``;
* ``saved`` — the cut with the most characters expected saved (the model's probability times
  its length), where that expectation reaches each of ``--saved``.

The rightness model is ``--learner factored``'s (``specialists.tab.loop.factored``): a logistic
regression (or, ``--right-model net``, its small network) on the cut's action features, its
length, the action features times its length, and the request's state features, fitted on
the project's *earlier* history with every candidate of every request labelled by whether
the person went on to type it — labels a server can read for cuts it never showed, from
everyone, whatever they accept. What learning from every candidate could give that kind,
not what the loop does today.

Per rule it prints that kind's requests, the cuts shown and accepted, the precision
(accepted / shown), the mean reward of an accepted and of a dismissed one, and the reward
per request of that kind (kept reward, ``--reward``). The break-even precision is where the
accepted ones' reward pays for the dismissals.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import loop_learn as L  # noqa: E402


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", help="folder of mined pairs (e.g. ../shared/data/commits)")
    p.add_argument("--project", required=True, help="the project whose later history is replayed")
    p.add_argument("--population", required=True, help="a population YAML (configs/users/)")
    p.add_argument("--kind", required=True, help="the population's type shown the long cuts")
    p.add_argument("--min-chars", type=int, default=20, help="shortest cut shown")
    p.add_argument("--margins", default="none,-4,-2,0",
                   help="favourite: show where its logit − the 'nothing' logit ≥ margin (none: always)")
    p.add_argument("--thresholds", default="0.1,0.2,0.3",
                   help="rightness: show where the model's probability of right reaches each")
    p.add_argument("--saved", default="4,8,12,16",
                   help="saved: show where the characters expected saved (probability × length) reach each")
    p.add_argument("--collect-share", type=float, default=0.7, help="as loop_learn.py: the later history follows it")
    p.add_argument("--measure-worlds", type=int, default=1,
                   help="as loop_learn.py: draws of people the later history is replayed with")
    p.add_argument("--reward", choices=["kept", "accept"], default="kept")
    p.add_argument("--right-model", choices=["logistic", "net"], default="logistic",
                   help="the rightness model: the factored learner's logistic regression or its small network")
    p.add_argument("--checkpoint", default="specialists/tab/checkpoint")
    p.add_argument("--cache-dir", default="runs/learn_cache", help="loop_learn.py's observation cache")
    args = p.parse_args(argv)

    from specialists.tab.users import PopulationError, load_population

    try:
        L.POPULATION = load_population(args.population)
    except PopulationError as exc:
        raise SystemExit(f"--population: {exc}") from exc
    kinds = [t.name for t in L.POPULATION.types]
    if args.kind not in kinds:
        raise SystemExit(f"--kind {args.kind!r}: the population's types are {', '.join(kinds)}")
    try:
        margins = [None if m.strip() == "none" else float(m) for m in args.margins.split(",") if m.strip()]
    except ValueError:
        raise SystemExit(f"--margins {args.margins!r}: comma-separated numbers or 'none'") from None
    try:
        thresholds = [float(t) for t in args.thresholds.split(",") if t.strip()]
        saved = [float(t) for t in args.saved.split(",") if t.strip()]
    except ValueError:
        raise SystemExit(f"--thresholds {args.thresholds!r} / --saved {args.saved!r}: "
                         "comma-separated numbers") from None
    L.ASK_AFTER_EDIT = True
    L.MEASURE_WORLDS = max(1, args.measure_worlds)

    import torch

    from specialists.tab.features import ObserveConfig
    from specialists.tab.lm import TabLM
    from specialists.tab.policy import TabPolicy

    torch.set_num_threads(1)
    ckpt = Path(args.checkpoint)
    lm = TabLM(ckpt, threads=1).load()
    cache = L.ObservationCache.kept_in(args.cache_dir, lm, ObserveConfig(), ckpt)
    policy = TabPolicy.load(ckpt)
    reward = L.KeptReward() if args.reward == "kept" else L.RewardConfig()
    pairs = sorted(L.load_split(args.data, args.project, 0, seed=0), key=lambda q: q.date)
    k = int(round(args.collect_share * len(pairs)))
    earlier, later = pairs[:k], pairs[k:]
    if not later:
        raise SystemExit(f"--project {args.project}: no later history to replay")
    model = fit_rightness(earlier, cache, args.right_model) if (thresholds or saved) and earlier else None

    def decider(rule: str, margin: float | None) -> L.DecideMany:
        def decide(obs, who):
            logits = policy._head_numpy(*policy._arrays(obs))[0] if rule == "favourite" else None
            out = []
            for b, (o, kind) in enumerate(zip(obs, who)):
                pick = 0
                if kind == args.kind:
                    chars = {r: len(o.suggestion(r).text) for r in range(len(o.rows))}
                    rows = [r for r, n in chars.items() if n >= args.min_chars]
                    if rows and rule == "longest":
                        pick = 1 + max(rows, key=lambda r: chars[r])
                    elif rows and rule in ("rightness", "saved"):
                        prob = model.prob(o)
                        score = {r: prob[r] * (chars[r] if rule == "saved" else 1) for r in rows}
                        r = max(rows, key=lambda r: score[r])
                        if score[r] >= margin:
                            pick = r + 1
                    elif rows:
                        r = max(rows, key=lambda r: logits[b, r + 1])
                        if margin is None or logits[b, r + 1] - logits[b, 0] >= margin:
                            pick = r + 1
                out.append(L.Decision(pick))
            return out
        decide.by_kind = True  # type: ignore[attr-defined]
        return decide  # type: ignore[return-value]

    results = []
    rules = [("longest", None)] + [("favourite", m) for m in margins]
    if model is not None:
        rules += [("rightness", t) for t in thresholds] + [("saved", t) for t in saved]
        print(f"rightness model: fitted on {model.n} candidates of the earlier history, "
              f"{model.positives} right; mean log-loss {model.loss:.4f} (a constant: {model.base_loss:.4f})", flush=True)
    for rule, margin in rules:
        steps = L.measure_rollout(later, cache, decider(rule, margin), reward, L.Totals())
        mine = [s for s in steps if s.person == args.kind]
        shown = [s for s in mine if s.outcome.shown]
        took = [s.outcome.reward for s in shown if s.outcome.accepted]
        left = [s.outcome.reward for s in shown if not s.outcome.accepted]
        row = {"rule": rule, "margin": margin, "requests": len(mine), "shown": len(shown), "accepted": len(took),
               "precision": round(len(took) / max(1, len(shown)), 4),
               "reward_accepted": round(sum(took) / max(1, len(took)), 3),
               "reward_dismissed": round(sum(left) / max(1, len(left)), 3),
               "reward_per_request": round(sum(s.outcome.reward for s in mine) / max(1, len(mine)), 4)}
        results.append(row)
        print(" | ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    return results


class Rightness:
    """P(a cut is what the person types next), the factored learner's rightness model
    (:class:`specialists.tab.loop.factored.Logistic` on
    :func:`~specialists.tab.loop.factored.right_features`), with its fit's figures."""

    def __init__(self, model, n: int, positives: int, loss: float, base_loss: float) -> None:
        self.model, self.n, self.positives, self.loss, self.base_loss = model, n, positives, loss, base_loss

    def prob(self, obs) -> "np.ndarray":
        import numpy as np

        from specialists.tab.loop.factored import right_features

        return self.model.prob(right_features(obs)) if len(obs.rows) else np.zeros(0)


def fit_rightness(pairs, cache, kind: str = "logistic") -> Rightness:
    """Replay ``pairs`` showing nothing; label every candidate cut of every request by whether the
    person typed it next (:func:`~specialists.tab.loop.factored.typed_next`, what a server can
    read from the next requests' text; not ``Session.judge``, which also knows the hunk's path,
    and so rewrites)."""
    import numpy as np

    from specialists.tab.harness import pair_key
    from specialists.tab.loop.factored import Logistic, Net, right_features, typed_next
    from specialists.tab.replay import Session

    xs, ys = [], []
    for pair in pairs:
        session = Session(pair, ask_after_edit=True)
        key = pair_key(pair)
        while (req := session.next_request()) is not None:
            obs = cache.get(key, req)
            if len(obs.rows):
                xs.append(right_features(obs))
                ys.extend(typed_next(obs, session.remaining(), req.cursor))
            session.respond(None)
    x, y = np.concatenate(xs), np.asarray(ys, np.float64)
    model = Logistic(x.shape[1]).fit(x, y, steps=25) if kind == "logistic" else Net(x.shape[1]).fit(x, y)
    p = np.clip(model.prob(x), 1e-9, 1 - 1e-9)
    base = np.clip(y.mean(), 1e-9, 1 - 1e-9)
    loss = float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())
    base_loss = float(-(y * np.log(base) + (1 - y) * np.log(1 - base)).mean())
    return Rightness(model, len(y), int(y.sum()), loss, base_loss)


if __name__ == "__main__":
    main()
