"""Edit replay, the simulated user's accept rule, and the reward."""

from __future__ import annotations

from pathlib import Path

import pytest

from specialists.tab.data import Pair, load_split
from specialists.tab.hunks import hunks_of
from specialists.tab.replay import RewardConfig, Session, replay_text
from specialists.tab.types import Suggestion

BEFORE = """import os


def load(path):
    with open(path) as fh:
        return fh.read()


def save(path, text):
    with open(path, "w") as fh:
        fh.write(text)
"""

AFTER = """import os
import sys


def load(path, encoding="utf-8"):
    with open(path, encoding=encoding) as fh:
        return fh.read()


def save(path, text):
    with open(path, "w") as fh:
        fh.write(text)
    print("saved", path, file=sys.stderr)
"""

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "commits"


def pair(before: str = BEFORE, after: str = AFTER) -> Pair:
    return Pair(repo="toy", path="toy.py", language="python", before=before, after=after, commit="c0ffee")


def test_replay_reproduces_after() -> None:
    assert replay_text(pair()) == AFTER


@pytest.mark.parametrize("before,after", [
    ("a\nb\nc\n", "a\nc\n"),  # a pure deletion
    ("a\nc\n", "a\nb\nc\n"),  # a pure insertion
    ("x = 1\n", "y = 2\n"),  # a whole-line replacement
    ("", "print('hi')\n"),  # from an empty file
    ("one\ntwo\nthree\nfour\n", "ONE\ntwo\nthree\nFOUR\nfive\n"),  # several hunks
    ("def f():\n    pass\n", "def f():\n    pass\n\n\ndef g():\n    pass\n"),
])
def test_replay_hand_made(before: str, after: str) -> None:
    assert replay_text(pair(before, after)) == after


def test_session_without_suggestions_ends_at_after() -> None:
    s = Session(pair())
    n = 0
    while (req := s.next_request()) is not None:
        assert 0 <= req.cursor <= len(req.file)
        s.respond(None)
        n += 1
    assert n > 5
    assert s.file == AFTER
    assert s.saved_chars == 0
    assert s.typed_chars == s.total_chars == sum(len(h.new) for h in hunks_of(BEFORE, AFTER))


@pytest.mark.skipif(not DATA.exists(), reason="shared edit data not present")
def test_replay_reproduces_real_edits() -> None:
    pairs = load_split(DATA, "dev", limit_per_project=60)
    for p in pairs:
        assert replay_text(p) == p.after
        s = Session(p)
        while s.next_request() is not None:
            s.respond(None)
        assert s.file == p.after


def _oracle(s: Session, req) -> Suggestion | None:
    """Suggest the rest of the current line of what the person is about to type."""
    rem = s.remaining()
    line = rem.split("\n", 1)[0]
    return Suggestion(req.cursor, req.cursor, line) if line.strip() else None


def test_accepting_skips_ahead_and_still_reaches_after() -> None:
    s = Session(pair())
    accepted = 0
    while (req := s.next_request()) is not None:
        if s._pending[1] == -1:  # before a deletion: let the person delete
            s.respond(None)
            continue
        out = s.respond(_oracle(s, req))
        accepted += out.accepted
        if out.shown:
            assert out.accepted
    assert s.file == AFTER
    assert accepted > 0
    assert 0 < s.saved_chars <= s.total_chars
    assert s.typed_chars + s.saved_chars == s.total_chars


def _first_typing_request(s: Session):
    while (req := s.next_request()) is not None:
        if s._pending[1] >= 0 and s.remaining().strip():
            return req
        s.respond(None)
    raise AssertionError("no typing request")


def test_accept_rule_prefix() -> None:
    s = Session(pair())
    req = _first_typing_request(s)
    rem = s.remaining()
    assert s.judge(Suggestion(req.cursor, req.cursor, rem[:3]))[0]
    assert not s.judge(Suggestion(req.cursor, req.cursor, rem[:3] + "#"))[0]  # not a prefix
    assert not s.judge(Suggestion(req.cursor, req.cursor, ""))[0]  # nothing
    assert not s.judge(Suggestion(req.cursor + 1, req.cursor + 1, rem[:3]))[0]  # wrong place
    assert not s.judge(None)[0]
    out = s.respond(Suggestion(req.cursor, req.cursor, rem[:3]))
    assert out.accepted and out.chars_saved == 3 and out.reward == 0.75


def test_accept_rule_blank_text_is_rejected() -> None:
    p = pair("a = 1\n", "a = 1\n\n\nb = 2\n")
    s = Session(p)
    req = s.next_request()
    assert s.remaining().startswith("\n")
    out = s.respond(Suggestion(req.cursor, req.cursor, "\n"))
    assert out.shown and not out.accepted and out.reward == -0.25


def test_accept_rule_next_edit_rewrite() -> None:
    before = "total = price * qty\nprint(price)\n"
    after = "total = cost * qty\nprint(price)\n"
    s = Session(pair(before, after))
    req = s.next_request()  # before deleting "price" on line 1
    assert s._pending[1] == -1
    start = req.cursor
    # the region's real next state: accepted, and the whole hunk is done
    good = Suggestion(start, start + len("price"), "cost")
    assert s.judge(good) == (True, len("cost"))
    bad = Suggestion(start, start + len("price"), "costs")
    assert not s.judge(bad)[0]
    elsewhere = Suggestion(before.index("print(") + 6, before.index("print(") + 11, "cost")
    assert not s.judge(elsewhere)[0]
    out = s.respond(good)
    assert out.accepted and out.chars_saved == 4
    while s.next_request() is not None:
        s.respond(None)
    assert s.file == after


def test_a_rewrite_that_makes_the_next_hunk_is_accepted_when_a_hunk_is_done() -> None:
    """At the request made when a hunk is done, a rewrite whose result is the file with the
    next hunk made whole is accepted (the next-edit model's answer); the hunk is then skipped,
    its characters saved, and the replay still ends at the final file."""
    s = Session(pair(), ask_after_edit=True)
    plain = Session(pair(), ask_after_edit=True)
    made = 0
    while (req := s.next_request()) is not None:
        at = s.next_edit_at()
        if at is None:
            if s._pending[1] >= 0 and s.remaining().strip():  # typing: the next hunk is no answer here
                nh = s.hunks[s._pending[0] + 1] if s._pending[0] + 1 < len(s.hunks) else None
                if nh is not None:
                    assert not s.judge(Suggestion(nh.start, nh.start + len(nh.old), nh.new))[0]
            s.respond(None)
            continue
        nh = s.hunks[s._pending[0] + 1]
        start = req.file.rfind("\n", 0, max(nh.start - 1, 0)) + 1  # the lines around the next hunk
        end = req.file.find("\n", nh.start + len(nh.old)) + 1 or len(req.file)
        region = req.file[start:end]
        right = region[: nh.start - start] + nh.new + region[nh.start - start + len(nh.old):]
        assert not s.judge(Suggestion(start, end, right + "x"))[0]  # not the next state
        assert not s.judge(Suggestion(start, end, region))[0]  # changes nothing
        out = s.respond(Suggestion(start, end, right))
        assert out.accepted and out.kind == "rewrite" and out.chars_saved == len(nh.new) and out.reward == 0.75
        made += 1
    while plain.next_request() is not None:
        plain.respond(None)
    assert made >= 2 and s.file == AFTER
    assert s.typed_chars + s.saved_chars == s.total_chars and s.saved_chars > 0
    assert s.clock < plain.clock  # no move to those hunks, nothing typed there


def test_reward() -> None:
    r = RewardConfig()
    assert r(shown=False, accepted=False) == 0.0
    assert r(shown=True, accepted=False) == -0.25
    assert r(shown=True, accepted=True, chars=10) == 0.75
    scaled = RewardConfig(per_char=0.01, per_char_cap=50)
    assert scaled(True, True, 10) == pytest.approx(0.85)
    assert scaled(True, True, 500) == pytest.approx(1.25)  # capped
    assert scaled(True, False, 10) == -0.25
    custom = RewardConfig(accept=1.0, reject=-0.5, none=-0.01)
    assert custom(False, False) == -0.01 and custom(True, False) == -0.5


def test_request_serialises_round_trip() -> None:
    from specialists.tab.types import TabRequest

    s = Session(pair())
    while (req := s.next_request()) is not None:
        assert TabRequest.from_json(req.to_json()) == req
        s.respond(None)


def test_must_answer_before_next_request() -> None:
    s = Session(pair())
    s.next_request()
    with pytest.raises(RuntimeError):
        s.next_request()
