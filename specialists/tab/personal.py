"""Personalisation the server computes itself (issue 35): per editor session and per project,
what this server showed and what came of it.

The Tab policy sees one request at a time; what it cannot see there is *who* is typing.
Published filters find that the strongest predictors of acceptance are the person's and the
project's own history (Copilot's filter weights the previous label most; CSAP, 2026, the
developer's and project's historical acceptance counts and ratios). :class:`Tracker` keeps
that history from the server's own record — the suggestions it showed, the outcomes reported
for them, and the times requests arrived — and turns it into :data:`PERSONAL_FEATURES`, which
the policy reads beside its state features (``Observation.personal``):

* per session: how many suggestions were shown lately (counts decay by ``decay`` per shown
  suggestion), the share accepted, the share of shown characters taken when accepted (a
  person who takes the first word takes little of a line; a wrong accept undone reports 0),
  the share of *long* suggestions (more than ``long_chars``) accepted, the dismissals in a
  row, seconds since the session's last request (the last keystroke that asked), the last
  shown suggestion's outcome, and the typing speed (characters per second between
  requests, a decayed mean);
* per project: shown, accept share and taken share, over every session of the project.

Ratios are smoothed towards a prior (one pseudo-count each way), so a new session reads as
"unknown" rather than as 0 or 1. Nothing here needs the client to say anything it does not
already send: the session and project are the request's, the clock is the server's.

The same class runs in the live specialist and in the in-process simulations
(``benchmarks/loop_learn.py``), so the policy trains on the features it is served with.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PERSONAL_FEATURES", "Tracker", "History"]

PERSONAL_FEATURES = [
    "s_log_shown", "s_accept_ratio", "s_taken_ratio", "s_long_accept_ratio", "s_log_dismiss_streak",
    "s_log_seconds_since_last", "s_last_accepted", "s_last_dismissed", "s_log_chars_per_s", "s_new",
    "p_log_shown", "p_accept_ratio", "p_taken_ratio",
]
"""The personal features, in the order :meth:`Tracker.features` returns them."""


@dataclass
class History:
    """Decayed counts of one session's (or one project's) shown suggestions."""

    shown: float = 0.0
    accepted: float = 0.0
    chars_shown: float = 0.0
    """Characters shown in suggestions that were accepted (the taken share's denominator)."""
    chars_taken: float = 0.0
    long_shown: float = 0.0
    long_accepted: float = 0.0
    streak: int = 0
    """Dismissals in a row."""
    last: str | None = None
    """``accepted`` or ``dismissed``: the last shown suggestion's outcome."""
    last_time: float | None = None
    last_pos: int | None = None
    speed: float | None = None
    """Decayed mean of log1p(characters per second) between requests."""
    requests: int = 0

    def add(self, accepted: bool, chars_shown: int, chars_taken: int, decay: float, long_chars: int) -> None:
        self.shown = decay * self.shown + 1.0
        self.accepted = decay * self.accepted + float(accepted)
        self.chars_shown *= decay
        self.chars_taken *= decay
        if accepted:
            self.chars_shown += max(0, chars_shown)
            self.chars_taken += min(max(0, chars_taken), max(0, chars_shown))
        self.long_shown *= decay
        self.long_accepted *= decay
        if chars_shown > long_chars:
            self.long_shown += 1.0
            self.long_accepted += float(accepted)
        self.streak = 0 if accepted else self.streak + 1
        self.last = "accepted" if accepted else "dismissed"


@dataclass
class Tracker:
    """Per session and per project history, kept in memory (least recently used dropped
    beyond ``max_keys``). ``request`` when a request arrives (returns its features, before
    this request's outcome), ``outcome`` when a shown suggestion's outcome is known."""

    decay: float = 0.9
    long_chars: int = 24
    max_keys: int = 10_000
    speed_decay: float = 0.8
    sessions: "OrderedDict[str, History]" = field(default_factory=OrderedDict)
    projects: "OrderedDict[str, History]" = field(default_factory=OrderedDict)

    def _get(self, table: "OrderedDict[str, History]", key: str) -> History:
        h = table.get(key)
        if h is None:
            h = table[key] = History()
            while len(table) > self.max_keys:
                table.popitem(last=False)
        else:
            table.move_to_end(key)
        return h

    def features(self, session: str, project: str, now: float) -> list[float]:
        """:data:`PERSONAL_FEATURES` for a request of ``session`` in ``project`` at ``now``
        (seconds, any origin that stays put), without recording anything."""
        s = self.sessions.get(session) or History()
        p = self.projects.get(project) or History()
        since = 0.0 if s.last_time is None else max(0.0, now - s.last_time)
        return [
            math.log1p(s.shown), _ratio(s.accepted, s.shown), _ratio(s.chars_taken, s.chars_shown),
            _ratio(s.long_accepted, s.long_shown), math.log1p(s.streak), math.log1p(since),
            float(s.last == "accepted"), float(s.last == "dismissed"),
            s.speed if s.speed is not None else 0.0, float(s.requests == 0),
            math.log1p(p.shown), _ratio(p.accepted, p.shown), _ratio(p.chars_taken, p.chars_shown),
        ]

    def request(self, session: str, project: str, now: float, position: int | None = None) -> list[float]:
        """A request arrives: its features (:meth:`features`), then the session's clock and
        typing speed move on (``position``: the cursor, for characters typed since the
        session's last request)."""
        x = self.features(session, project, now)
        s = self._get(self.sessions, session)
        self._get(self.projects, project)
        if s.last_time is not None and position is not None and s.last_pos is not None:
            dt = now - s.last_time
            moved = position - s.last_pos
            if dt > 0 and 0 < moved <= 400:  # typing forward, not a jump elsewhere
                v = math.log1p(moved / dt)
                s.speed = v if s.speed is None else self.speed_decay * s.speed + (1 - self.speed_decay) * v
        s.last_time, s.last_pos = now, position
        s.requests += 1
        return x

    def outcome(self, session: str, project: str, accepted: bool, chars_shown: int, chars_taken: int) -> None:
        """A shown suggestion's outcome (``chars_taken``: characters accepted; 0 for a dismissal)."""
        for h in (self._get(self.sessions, session), self._get(self.projects, project)):
            h.add(accepted, chars_shown, chars_taken, self.decay, self.long_chars)

    def snapshot(self, session: str) -> dict[str, Any]:
        """A session's raw history (for logs and tests)."""
        h = self.sessions.get(session)
        return {} if h is None else dict(h.__dict__)


def _ratio(num: float, den: float, prior: float = 0.5, weight: float = 1.0) -> float:
    """num / den smoothed towards ``prior`` by ``weight`` pseudo-counts each way."""
    return (num + prior * 2 * weight) / (den + 2 * weight)
