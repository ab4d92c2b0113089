"""What the policy and the baselines see of a request: state features, candidates, actions.

``observe`` turns a :class:`TabRequest` into an :class:`Observation`: the candidates (context
copy, next-edit, the LM's own), the actions — each a candidate cut at one point, so the
policy picks *which* and *how much* in one choice, or nothing — and their features.

``copilot_features`` are the hand features of GitHub Copilot's contextual filter
(``PRIOR_ART.md``), used by baseline (b) and, with the LM's hidden state, by the policy.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

from specialists.tab.context_copy import Candidate, Source, copy_candidates, next_edit_candidates
from specialists.tab.personal import PERSONAL_FEATURES
from specialists.tab.types import Suggestion, TabRequest

__all__ = ["Observation", "Draft", "draft", "finish", "observe", "observe_many", "to_features", "from_features", "copilot_features",
           "COPILOT_FEATURES", "dynamic_features", "cut_points", "line_cut", "ObserveConfig", "ACTION_FEATURES",
           "STATE_FEATURES", "PERSONAL_FEATURES", "state_vector"]

LANGS = ("python", "javascript", "typescript", "tsx", "go", "rust", "java")
CHARS = tuple(" \n\t()[]{}.,:;=+-*/\"'#_<>!&|%@") + ("alpha", "digit", "other")
SOURCES = ("file", "edit", "open_file", "lm", "next_edit")
_SEGMENT = re.compile(r"\s+|\w+|[^\w\s]")


def _char_class(ch: str) -> str:
    if ch in CHARS:
        return ch
    if ch.isalpha():
        return "alpha"
    if ch.isdigit():
        return "digit"
    return "other"


def _named(prefix: str, values: tuple[str, ...]) -> list[str]:
    return [f"{prefix}={v!r}" if len(v) == 1 else f"{prefix}={v}" for v in values]


#: Names of ``copilot_features`` in order: the filter's hand features (PRIOR_ART.md).
COPILOT_FEATURES: list[str] = [
    "last_accepted", "whitespace_right", "log_seconds_since_last", "log_prefix_last_line",
    "log_prefix_last_line_rstrip", "log_document_length", "log_cursor_offset",
    "relative_cursor", *_named("lang", LANGS + ("other",)), *_named("last_char", CHARS),
    *_named("last_nonspace", CHARS),
]


def copilot_features(req: TabRequest) -> list[float]:
    """The contextual filter's inputs for one request, in ``COPILOT_FEATURES`` order."""
    doc, cur = req.file, req.cursor
    left = doc[:cur]
    line_end = doc.find("\n", cur)
    right_of_cursor = doc[cur : len(doc) if line_end < 0 else line_end]
    last_line = left[left.rfind("\n") + 1 :]
    since = req.seconds_since_last
    x = [
        1.0 if req.last_outcome == "accepted" else 0.0,
        1.0 if not right_of_cursor.strip() else 0.0,
        math.log1p(since) if since is not None else 0.0,
        math.log1p(len(last_line)),
        math.log1p(len(last_line.rstrip())),
        math.log1p(len(doc)),
        math.log1p(cur),
        cur / len(doc) if doc else 0.0,
    ]
    lang = req.language if req.language in LANGS else "other"
    x += [1.0 if lang == v else 0.0 for v in LANGS + ("other",)]
    last = _char_class(left[-1]) if left else None
    x += [1.0 if last == v else 0.0 for v in CHARS]
    stripped = left.rstrip()
    nonspace = _char_class(stripped[-1]) if stripped else None
    x += [1.0 if nonspace == v else 0.0 for v in CHARS]
    return x


#: Features that depend on the policy's own past (recomputed during rollouts, never cached).
DYNAMIC_FEATURES = ["last_accepted", "last_rejected", "last_none", "first_request",
                    "log_seconds_since_last"]


def dynamic_features(req: TabRequest) -> list[float]:
    since = req.seconds_since_last
    return [float(req.last_outcome == "accepted"), float(req.last_outcome == "rejected"),
            float(req.last_outcome == "none"), float(req.last_outcome is None),
            math.log1p(since) if since is not None else 0.0]


STATIC_STATE = [n for n in COPILOT_FEATURES if n not in ("last_accepted", "log_seconds_since_last")] + [
    "n_candidates", "n_copy", "has_lm", "n_recent_edits", "log_right_line", "at_line_start"]
STATE_FEATURES = STATIC_STATE + DYNAMIC_FEATURES

ACTION_FEATURES = [
    *_named("src", SOURCES), "rank", "log_match", "log_votes", "log_occurrences", "log_distance",
    "log_cut_chars", "cut_segments", "cut_fraction", "cut_lines", "cut_at_line_end", "cut_at_end",
    "lp_sum", "lp_mean", "lp_min", "lp_next", "lp_scored", "lp_unscored", "log_len",
    "right_overlap", "closing_only", "agree_lm", "agree_copy", "rewrite_offset", "is_rewrite",
]


@dataclass
class ObserveConfig:
    min_match: int = 4
    max_copy: int = 3
    max_lines: int = 3
    max_chars: int = 160
    max_cuts: int = 12
    use_lm: bool = True
    copy: bool = True
    """Context-copy and next-edit candidates (off: the LM alone, as baselines a/b/c/e run)."""
    lm_generate: str = "no_copy"
    """When the LM writes its own line: ``always``, or ``no_copy`` — only when context copy
    found nothing. The trained policy almost never picked the LM's line over a copy
    candidate (9 of 1,693 shows on dev), and decoding is the one sequential part of a
    request: skipping it there halves the worst-case latency."""


@dataclass
class Observation:
    """Everything the policy needs about one request; all but ``dynamic`` is cacheable."""

    static: Any  # (S_static,) float32
    hidden: Any  # (C,) float32, empty without an LM
    actions: Any  # (A, F) float32
    rows: Any  # (A, 2) int32: candidate index, characters of it shown
    candidates: list[Candidate]
    cursor: int
    dynamic: Any = None  # (S_dyn,) float32: the policy's own past, refreshed per request
    personal: Any = None
    """(P,) float32: the session's and project's history (:mod:`specialists.tab.personal`),
    set per request by whoever keeps it; None reads as zeros (no personal input)."""
    hits: Any = None
    """(H,) float32: how this session's recent cuts fared against what was typed
    (:class:`specialists.tab.loop.factored.Hits`), read only by the factored learner's
    rightness model; None: not kept (that model then reads no such input)."""
    dismissed: Any = None
    """Per action row, the lengths of this session's recent suggestions, shown and dismissed,
    that the row's cut carries on (:class:`specialists.tab.loop.factored.Dismissals`); None:
    not kept."""

    def suggestion(self, i: int) -> Suggestion:
        """Action row ``i`` as the edit it shows."""
        cand, cut = (int(v) for v in self.rows[i])
        c = self.candidates[cand]
        if c.is_rewrite:
            return Suggestion(c.start, c.end, c.text)
        return Suggestion(self.cursor, self.cursor, c.text[:cut])

    def with_request(self, req: TabRequest) -> "Observation":
        """A copy whose dynamic features are this request's (for a cached observation)."""
        import numpy as np

        return replace(self, dynamic=np.array(dynamic_features(req), dtype=np.float32))

    def with_hits(self, values: Any) -> "Observation":
        """A copy whose ``hits`` are ``values`` (:meth:`~specialists.tab.loop.factored.Hits.request`)."""
        import numpy as np

        return replace(self, hits=None if values is None else np.asarray(values, dtype=np.float32))

    def with_dismissed(self, values: Any) -> "Observation":
        """A copy whose ``dismissed`` are ``values`` (:meth:`~specialists.tab.loop.factored.Dismissals.request`)."""
        return replace(self, dismissed=values)

    def with_personal(self, values: Any) -> "Observation":
        """A copy whose personal features are ``values`` (:meth:`personal.Tracker.request`)."""
        import numpy as np

        return replace(self, personal=None if values is None else np.asarray(values, dtype=np.float32))


def state_vector(obs: Observation) -> Any:
    """The policy's state input: static, dynamic, then personal features (zeros without)."""
    import numpy as np

    p = obs.personal
    if p is None or len(p) != len(PERSONAL_FEATURES):
        p = np.zeros(len(PERSONAL_FEATURES), dtype=np.float32)
    return np.concatenate([obs.static, obs.dynamic, p]).astype(np.float32, copy=False)


def cut_points(text: str, max_cuts: int = 12) -> list[int]:
    """Where a candidate may be cut: after each word, space run or symbol of its first line
    that has content, then at the end of each later line."""
    cuts: list[int] = []
    first_nl = text.find("\n")
    head_end = len(text) if first_nl < 0 else first_nl
    if not text[:head_end].strip():  # the first line is empty: cut in the next one
        nxt = text.find("\n", head_end + 1)
        head_end = len(text) if nxt < 0 else nxt
    for m in _SEGMENT.finditer(text, 0, head_end):
        if text[: m.end()].strip() and not m.group().isspace():
            cuts.append(m.end())
    cuts = cuts[:max_cuts]
    pos = head_end
    while pos < len(text):
        nl = text.find("\n", pos + 1)
        end = len(text) if nl < 0 else nl
        if text[pos:end].strip():
            cuts.append(end)
        pos = end
    return sorted(set(cuts))


def line_cut(text: str) -> int:
    """The end of the first line with content: the whole-line suggestion (0: none)."""
    start = 0
    while True:
        nl = text.find("\n", start)
        end = len(text) if nl < 0 else nl
        if text[start:end].strip():
            return end
        if nl < 0:
            return 0
        start = nl + 1


def _sources(req: TabRequest, open_files: list[str]) -> list[Source]:
    srcs = [Source("file", req.file, exclude_end=req.cursor)]
    for e in req.recent_edits:
        for text in (e.old, e.new):
            if len(text) >= 4:
                srcs.append(Source("edit", text))
    srcs += [Source("open_file", t) for t in open_files if t]
    return srcs


def _lp_stats(c: Candidate, cut: int) -> tuple[float, float, float, float, float, float]:
    lps = [lp for lp, end in zip(c.token_logprobs, c.token_ends) if end <= cut]
    nxt = next((lp for lp, end in zip(c.token_logprobs, c.token_ends) if end > cut), 0.0)
    scored_to = c.token_ends[-1] if c.token_ends else 0
    if not lps:
        return 0.0, 0.0, 0.0, float(nxt), 0.0, 1.0 if cut > scored_to else 0.0
    return (float(sum(lps)), float(sum(lps) / len(lps)), float(min(lps)), float(nxt),
            float(len(lps)), 1.0 if cut > scored_to else 0.0)


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _action_row(c: Candidate, rank: int, cut: int, req: TabRequest, right_line: str,
                others: list[Candidate], lm_text: str) -> list[float]:
    shown = c.text[:cut]
    lp = _lp_stats(c, cut)
    rest_line = c.text[cut:].split("\n", 1)[0]
    agree_copy = sum(1 for o in others if o is not c and o.source != "lm" and o.text.startswith(shown))
    return [
        *[1.0 if c.source == s else 0.0 for s in SOURCES],
        float(rank), math.log1p(c.match_len), math.log1p(c.votes), math.log1p(c.occurrences),
        math.log1p(c.distance), math.log1p(cut), float(len(_SEGMENT.findall(shown))),
        cut / max(1, len(c.text)), float(shown.count("\n")),
        1.0 if cut == len(c.text) or c.text[cut : cut + 1] == "\n" else 0.0,
        1.0 if cut == len(c.text) else 0.0,
        lp[0] / 10.0, lp[1], lp[2], lp[3], math.log1p(lp[4]), lp[5], math.log1p(len(c.text)),
        1.0 if right_line.strip() and rest_line.strip() == right_line.strip() else 0.0,
        1.0 if shown.strip() and not shown.strip().strip(")]};,") else 0.0,
        _common_prefix(shown, lm_text) / max(1, len(shown)) if lm_text else 0.0,
        math.log1p(agree_copy),
        math.log1p(abs(c.start - req.cursor)), 1.0 if c.is_rewrite else 0.0,
    ]


@dataclass
class Draft:
    """A request's candidates before the LM has looked at them: the first half of
    :func:`observe`, so that several requests can share one LM call between the halves."""

    req: TabRequest
    copies: list[Candidate]
    rewrites: list[Candidate]
    generate: bool
    """Whether the LM should write its own line (``ObserveConfig.lm_generate``)."""

    @property
    def left(self) -> str:
        return self.req.file[: self.req.cursor]


def draft(req: TabRequest, config: ObserveConfig | None = None,
          open_files: list[str] | None = None) -> Draft:
    """Context-copy and next-edit candidates for one request."""
    cfg = config or ObserveConfig()
    copies: list[Candidate] = []
    rewrites: list[Candidate] = []
    if cfg.copy:
        copies = copy_candidates(req.file[: req.cursor], _sources(req, open_files or []), req.cursor,
                                 min_match=cfg.min_match, max_candidates=cfg.max_copy,
                                 max_lines=cfg.max_lines, max_chars=cfg.max_chars)
        rewrites = next_edit_candidates(req.file, req.cursor, req.recent_edits)
    return Draft(req, copies, rewrites, generate=cfg.lm_generate == "always" or not copies)


def observe(req: TabRequest, lm: Any = None, config: ObserveConfig | None = None,
            open_files: list[str] | None = None) -> Observation:
    """Candidates, actions and features for one request (``lm``: a :class:`TabLM` or None)."""
    return observe_many([req], lm, config, [open_files or []])[0]


def observe_many(reqs: list[TabRequest], lm: Any = None, config: ObserveConfig | None = None,
                 open_files: list[list[str]] | None = None) -> list[Observation]:
    """:func:`observe` for concurrent requests, with one LM call for all of them."""
    cfg = config or ObserveConfig()
    drafts = [draft(r, cfg, files) for r, files in zip(reqs, open_files or [[] for _ in reqs])]
    hidden_size = getattr(lm, "hidden_size", 0) if lm is not None else 0
    if lm is None or not cfg.use_lm:
        return [finish(d, None, hidden_size, cfg) for d in drafts]
    analyses = lm.analyze_many([(d.left, d.copies, d.generate) for d in drafts])
    return [finish(d, a, hidden_size, cfg) for d, a in zip(drafts, analyses)]


def finish(d: Draft, analysis: Any, hidden_size: int, cfg: ObserveConfig) -> Observation:
    """The second half of :func:`observe`: actions and features once the LM has scored the
    copy candidates (``analysis``: an :class:`LMAnalysis`, or None without an LM)."""
    import numpy as np

    req, left = d.req, d.left
    hidden = np.zeros(hidden_size, dtype=np.float32)
    lm_cand = None
    if analysis is not None:
        hidden = analysis.hidden.astype(np.float32)
        lm_cand = analysis.lm_candidate
    cands = d.copies + ([lm_cand] if lm_cand is not None else []) + d.rewrites
    n_copy = len(d.copies)
    line_end = req.file.find("\n", req.cursor)
    right_line = req.file[req.cursor : len(req.file) if line_end < 0 else line_end]
    lm_text = lm_cand.text if lm_cand is not None else ""
    rows: list[tuple[int, int]] = []
    feats: list[list[float]] = []
    for i, c in enumerate(cands):
        if c.is_rewrite:
            cuts = [len(c.text)]
        elif c.source == "lm":
            cuts = sorted({e for e in c.token_ends if c.text[:e].strip()})
        else:
            cuts = cut_points(c.text, cfg.max_cuts)
        for cut in cuts:
            rows.append((i, cut))
            feats.append(_action_row(c, i, cut, req, right_line, cands, lm_text))
    copilot = copilot_features(req)
    static_names = STATIC_STATE
    cp = dict(zip(COPILOT_FEATURES, copilot))
    extra = {"n_candidates": float(len(cands)), "n_copy": float(n_copy), "has_lm": float(lm_cand is not None),
             "n_recent_edits": float(len(req.recent_edits)), "log_right_line": math.log1p(len(right_line)),
             "at_line_start": 1.0 if not left[left.rfind("\n") + 1 :].strip() else 0.0}
    static = np.array([cp[n] if n in cp else extra[n] for n in static_names], dtype=np.float32)
    actions = np.array(feats, dtype=np.float32).reshape(len(rows), len(ACTION_FEATURES))
    return Observation(static=static, hidden=hidden, actions=actions,
                       rows=np.array(rows, dtype=np.int32).reshape(len(rows), 2), candidates=cands,
                       cursor=req.cursor, dynamic=np.array(dynamic_features(req), dtype=np.float32))


# -- observations as the event store keeps them (the online loop trains on these) --------
# Candidates and their texts are not needed to compute a gradient (the action index names
# the row), so only ``static``, ``hidden``, ``actions``, ``dynamic`` and ``personal`` are
# stored, rounded to float32 precision (events without ``personal``, older ones, read as
# zeros).
_ARRAYS = ("static", "hidden", "actions", "dynamic", "personal")


def to_features(obs: Any) -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {}
    for name in _ARRAYS:
        value = getattr(obs, name)
        out[name] = [] if value is None else np.asarray(value, dtype=np.float32).tolist()
    out["n_actions"] = len(obs.rows)
    return out


def features_json(obs: Any) -> str:
    """:func:`to_features` written as JSON text (what the event store keeps), straight from
    the arrays: float32 values in their shortest form, which read back to the same float32s.
    About ten times cheaper than ``json.dumps(to_features(obs))`` per keystroke (issue 17)."""
    import numpy as np
    import orjson

    out: dict[str, Any] = {}
    for name in _ARRAYS:
        value = getattr(obs, name)
        out[name] = [] if value is None else np.ascontiguousarray(value, dtype=np.float32)
    out["n_actions"] = len(obs.rows)
    return orjson.dumps(out, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def from_features(features: dict[str, Any], n_action_features: int) -> Any:
    """An Observation whose arrays are the stored ones (no candidates: training only)."""
    import numpy as np

    n = int(features.get("n_actions", 0))
    actions = np.asarray(features["actions"], dtype=np.float32).reshape(n, n_action_features)
    rows = np.zeros((n, 2), dtype=np.int32)
    return Observation(static=np.asarray(features["static"], dtype=np.float32),
                       hidden=np.asarray(features["hidden"], dtype=np.float32),
                       actions=actions, rows=rows, candidates=[], cursor=0,
                       dynamic=np.asarray(features["dynamic"], dtype=np.float32),
                       personal=np.asarray(features["personal"], dtype=np.float32)
                       if features.get("personal") else None)
