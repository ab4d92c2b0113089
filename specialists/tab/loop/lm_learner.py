"""The Tab LM's own weights learning where it is deployed (issue 15): :class:`LMLearner`
updates them from replayed sessions' :class:`Step` records, after the policy's update.

``benchmarks/loop_learn.py --lm pg,pg_sft`` measures it (BENCHMARKS.md, "Session 11");
``tests/tab/test_lm_learns.py`` checks that one update moves a rewarded line's
log-probability and refreshes the LM's caches. Heavy imports (torch) are deferred to the
calls that need them.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from typing import Any, Sequence

from specialists.tab.features import Observation
from specialists.tab.replay import Outcome

__all__ = ["LMLearner", "Step", "target_logps"]


@dataclass
class Step:
    """One request of a replayed session: what the deciding policy saw and did, and what
    the simulated user did with it."""

    obs: Observation
    index: int
    logprob: float
    version: int
    outcome: Outcome
    value: float = 0.0
    """The deciding policy's value of the state (the LM update's baseline)."""
    prompt: tuple[list[int], str] | None = None
    """The LM's prompt ids and re-spelled tail at this request (only where the LM learns
    from the step)."""
    typed: str = ""
    """What the simulated user went on to type on this line (``pg_sft``'s target)."""
    pair: int = -1
    """Which replayed edit asked: the unit the paired, edit-clustered statistics take
    (:func:`specialists.tab.loop.gate.paired_se`)."""

    @property
    def lm_shown(self) -> bool:
        """Was the shown suggestion the LM's own line?"""
        return self.index > 0 and self.obs.candidates[int(self.obs.rows[self.index - 1][0])].source == "lm"



def target_logps(model: Any, chunk: Sequence[tuple[list[int], list[int], float, Any]],
                 full: bool = False) -> tuple[Any, ...]:
    """Each target token's log-probability after its prompt, (prompt, target, weight, _) per
    row, one right-padded pass (the output head at the target positions only): the
    log-probabilities and each one's weight, flat (``full``: and the whole next-token
    distributions at those positions, (N, V) log-probabilities)."""
    import torch

    seqs = [ids + t for ids, t, _, _ in chunk]
    T = max(len(q) for q in seqs)
    input_ids = torch.tensor([q + [0] * (T - len(q)) for q in seqs])
    attn = torch.tensor([[1] * len(q) + [0] * (T - len(q)) for q in seqs])
    hidden = model.transformer(input_ids=input_ids, attention_mask=attn).last_hidden_state
    at_b, at_t, tok, w = [], [], [], []
    for r, (ids, t, weight, _) in enumerate(chunk):
        for j, tk in enumerate(t):  # position len(ids)+j-1 predicts target token j
            at_b.append(r)
            at_t.append(len(ids) + j - 1)
            tok.append(tk)
            w.append(weight)
    logp = torch.log_softmax(model.lm_head(hidden[torch.tensor(at_b), torch.tensor(at_t)]).float(), -1)
    picked = logp.gather(1, torch.tensor(tok)[:, None])[:, 0]
    return (picked, torch.tensor(w), logp) if full else (picked, torch.tensor(w))


class LMLearner:
    """The LM's own weights learning where it is deployed, after each turn's policy update,
    from that turn's events, with its own Adam optimizer:

    - ``pg``: policy gradient on the suggestions the LM wrote and the policy showed —
      maximise A · log p_LM(suggestion tokens | prompt), A = reward − the deciding
      policy's value of the state (its learned baseline); the suggestion is re-spelled
      from the prompt's tail, as the LM scores every candidate;
    - ``pg_sft``: the same, plus ``sft`` × the mean token log-likelihood of what the user
      went on to type on the line wherever no suggestion was accepted (the person's own
      text: a supervised target, not a reward).

    Gradients clipped at ``clip``; ``kl`` > 0 adds kl × KL(start ‖ new) of the next-token
    distributions at the trained positions, the start being the LM the run began with (a
    guard: unguarded ``pg`` pushed the rejected lines' log-probabilities down without bound
    and the LM collapsed, BENCHMARKS.md; a KL to the *previous* version would be no guard
    here, since an update is mostly one step, where its gradient is zero); ``l2`` > 0 pulls
    the weights towards the previous version's. After each update the LM's fast pass and reuse caches
    are rebuilt (:meth:`TabLM.weights_changed`)."""

    def __init__(self, lm: Any, variant: str, lr: float, sft: float = 0.5, l2: float = 0.0, kl: float = 0.0,
                 clip: float = 1.0, batch: int = 32, max_target: int = 16, seed: int = 0,
                 sft_max: int = 0) -> None:
        import torch

        if variant not in ("pg", "pg_sft"):
            raise ValueError(f"unknown LM variant {variant!r}: pg or pg_sft")
        self.lm, self.variant, self.sft, self.l2, self.kl, self.clip = lm, variant, sft, l2, kl, clip
        self.batch, self.max_target, self.sft_max = batch, max_target, sft_max
        self.params = [q for q in lm.model.parameters() if q.requires_grad]
        self.opt = torch.optim.Adam(self.params, lr=lr)
        self.gen = torch.Generator().manual_seed(seed)
        self.start = [q.detach().clone() for q in self.params]
        self.ref = copy.deepcopy(lm.model).eval() if kl > 0 else None  # the LM the run started from

    def _items(self, steps: Sequence[Step]) -> list[tuple[list[int], list[int], float, str]]:
        """(prompt ids, target ids, weight, kind): a target's log-likelihood enters the loss
        times ``weight`` (pg: its advantage; sft: ``sft`` / its length)."""
        import torch

        eos = self.lm.model.config.eos_token_id or 0
        room = int(self.lm.net.max_positions) - 1
        out = []
        for s in steps:
            if s.prompt is None:
                continue
            ids, tail = s.prompt
            ids = list(ids) or [eos]
            if s.lm_shown:
                text = s.obs.suggestion(s.index - 1).text
                target = self.lm.tokenizer.encode(tail + text).ids[: self.max_target]
                if target:
                    out.append((ids, target, s.outcome.reward - s.value, "pg"))
            if self.variant == "pg_sft" and s.typed.strip() and not s.outcome.accepted:
                target = self.lm.tokenizer.encode(tail + s.typed).ids[: self.max_target]
                if target:
                    out.append((ids, target, self.sft / len(target), "sft"))
        pg = [x for x in out if x[3] == "pg"]
        sft = [x for x in out if x[3] == "sft"]
        if self.sft_max and len(sft) > self.sft_max:  # the LM step's cost is mostly these
            keep = sorted(torch.randperm(len(sft), generator=self.gen)[: self.sft_max].tolist())
            sft = [sft[i] for i in keep]
        return [(ids[-(room - len(t)):], t, w, k) for ids, t, w, k in pg + sft]

    def update(self, steps: Sequence[Step]) -> dict[str, float]:
        import torch

        t0 = time.monotonic()
        items = self._items(steps)
        n_pg = sum(k == "pg" for *_, k in items)
        n_sft = len(items) - n_pg
        stats = {"lm_pg": n_pg, "lm_sft": n_sft, "lm_grad_norm": 0.0, "lm_steps": 0, "lm_loss": 0.0}
        if items:
            model = self.lm.model
            model.eval()  # no dropout: the gradient of the policy the LM is
            prev = [q.detach().clone() for q in self.params] if self.l2 > 0 else None
            ref = self.ref
            kls: list[float] = []
            order = torch.randperm(len(items), generator=self.gen).tolist()
            norms = []
            for b in range(0, len(order), self.batch):
                chunk = [items[i] for i in order[b : b + self.batch]]
                if ref is None:
                    picked, w = target_logps(model, chunk)
                    loss = -(w * picked).sum() / len(chunk)
                else:  # + kl x KL(start || new) over the next-token distributions there
                    picked, w, logp = target_logps(model, chunk, full=True)
                    with torch.no_grad():
                        _, _, old = target_logps(ref, chunk, full=True)
                    kl = (old.exp() * (old - logp)).sum(-1).mean()
                    loss = -(w * picked).sum() / len(chunk) + self.kl * kl
                    kls.append(float(kl.detach()))
                if prev is not None:
                    loss = loss + self.l2 * sum(((q - p0) ** 2).sum() for q, p0 in zip(self.params, prev))
                self.opt.zero_grad()
                loss.backward()
                norms.append(float(torch.nn.utils.clip_grad_norm_(self.params, self.clip)))
                self.opt.step()
                stats["lm_loss"] += float(loss.detach()) * len(chunk) / len(items)
            stats["lm_grad_norm"] = round(sum(norms) / len(norms), 4)
            stats["lm_loss"] = round(stats["lm_loss"], 5)
            stats["lm_steps"] = len(norms)
            if kls:
                stats["lm_kl"] = round(sum(kls) / len(kls), 5)
            self.lm.weights_changed()
        with torch.no_grad():
            stats["lm_drift"] = round(math.sqrt(sum(float(((q - q0) ** 2).sum()) for q, q0 in zip(self.params, self.start))), 4)
        stats["lm_seconds"] = round(time.monotonic() - t0, 2)
        return stats
