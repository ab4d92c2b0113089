"""Jumps (issue 15): candidates, the rule that shows them, the simulated user's judgement,
the per-kind figures and the HTTP answer."""

from __future__ import annotations

import pytest

from specialists.tab.context_copy import jump_candidates, replaced_word
from specialists.tab.data import Pair
from specialists.tab.features import ObserveConfig
from specialists.tab.harness import ObservationCache, run
from specialists.tab.jump import JumpRule, with_jumps
from specialists.tab.hunks import hunks_of
from specialists.tab.replay import Session
from specialists.tab.types import RecentEdit, Suggestion, TabRequest

# a rename carried down a file: three far-apart uses of ``total_size``
FAR = "\n" * 6
BEFORE = f"def f(total_size):\n    return total_size{FAR}\n\nx = total_size + 1{FAR}\ny = 2 * total_size\n"
AFTER = BEFORE.replace("total_size", "nbytes")


def pair(before: str = BEFORE, after: str = AFTER) -> Pair:
    return Pair(repo="toy", path="toy.py", language="python", before=before, after=after, commit="c0ffee")


def line_of(text: str, needle: str) -> tuple[int, int]:
    i = text.index(needle)
    start = text.rfind("\n", 0, i) + 1
    end = text.find("\n", i)
    return start, end


# -- candidates -----------------------------------------------------------------------------
@pytest.mark.parametrize("old,new,word", [
    ("x = total_size + 1", "x = size + 1", "total_size"),  # a rename: the whole old word
    ("f(a, b)", "f(a, b, c)", ""),  # only added to: nothing replaced
    ("foo", "foobar", "foo"),
    ("a.b", "a.c", ""),  # one letter is a word, but "b" is short: callers filter by length
])
def test_replaced_word(old: str, new: str, word: str) -> None:
    got = replaced_word(old, new)
    assert got == word or (word == "" and len(got) < 3)


def test_jump_candidate_is_the_next_occurrence_beyond_the_editable_region() -> None:
    # the first one is done, sent as an editor sends it: the changed middle only
    file = BEFORE.replace("total_size", "size", 1)
    cursor = file.index("size")
    edit = RecentEdit(old="total_", new="", offset=cursor)
    jumps = jump_candidates(file, cursor, [edit])
    assert jumps, "no jump candidate for a rename with uses further down"
    j = jumps[0]
    # line 2 (``return total_size``) is inside the editable region: a rewrite's job
    assert (j.start, j.end) == line_of(file, "x = total_size")
    assert "total_size".startswith(j.term) and j.edit_rank == 0 and j.at_edit_end and j.lines_away > 3


def test_jump_candidate_wraps_to_the_top_and_needs_an_occurrence() -> None:
    file = "a = old_name\n" + "\n" * 8 + "b = 1\nnew_name = 2\n"
    cursor = file.index("new_name") + len("new_name")
    edit = RecentEdit(old="old_name = 2", new="new_name = 2", offset=file.index("new_name"))
    j = jump_candidates(file, cursor, [edit])[0]
    assert (j.start, j.end) == line_of(file, "a = old_name") and j.lines_away < 0
    assert jump_candidates(file.replace("a = old_name", "a = 1"), cursor, [edit]) == []


# -- the rule -------------------------------------------------------------------------------
def request_after_first_rename(**kw) -> TabRequest:
    file = BEFORE.replace("total_size", "size", 1)
    cursor = file.index("size") + len("size")
    edit = RecentEdit(old="total_size", new="size", offset=cursor - len("size"))
    return TabRequest(file=kw.get("file", file), cursor=kw.get("cursor", cursor), language="python",
                      recent_edits=kw.get("edits", [edit]))


def test_jump_rule_gates() -> None:
    req = request_after_first_rename()
    sug = JumpRule().suggestion(req)
    assert sug is not None and sug.jump and sug.kind == "jump" and sug.text == ""
    assert (sug.start, sug.end) == line_of(req.file, "x = total_size")
    assert JumpRule(max_lines=0).suggestion(req) is None  # off
    assert JumpRule(max_lines=2).suggestion(req) is None  # too far
    # still typing: the last character typed is a trigger character
    typing = req.file[: req.cursor] + "_" + req.file[req.cursor :]
    edit = RecentEdit(old="total_size", new="size_", offset=req.recent_edits[0].offset)
    assert JumpRule().suggestion(request_after_first_rename(file=typing, cursor=req.cursor + 1, edits=[edit])) is None
    typed = RecentEdit(old="total_size", new="size_x", offset=edit.offset)  # ...and once past it
    req2 = request_after_first_rename(file=typing.replace("size_", "size_x", 1), cursor=req.cursor + 2, edits=[typed])
    assert JumpRule().suggestion(req2) is not None
    # half a change: the cursor's line has an open bracket
    open_line = req.file.replace("def f(size)", "def f(size", 1)
    assert JumpRule().suggestion(request_after_first_rename(file=open_line)) is None
    # not where the latest edit ends
    assert JumpRule().suggestion(request_after_first_rename(cursor=req.cursor - 1)) is None


# -- the simulated user ----------------------------------------------------------------------
def test_after_edit_requests_add_one_per_hunk() -> None:
    def count(**kw) -> int:
        s, n = Session(pair(), **kw), 0
        while s.next_request() is not None:
            s.respond(None)
            n += 1
        return n

    assert count(ask_after_edit=True) == count() + len(hunks_of(BEFORE, AFTER))


def drive(s: Session, decide) -> list:
    outcomes = []
    while (req := s.next_request()) is not None:
        outcomes.append((s.next_edit_at(), s.respond(decide(req))))
    return outcomes


def test_a_jump_to_the_next_edit_is_accepted_and_saves_the_move() -> None:
    rule = JumpRule()
    s = Session(pair(), ask_after_edit=True)
    plain = Session(pair(), ask_after_edit=True)
    got = drive(s, rule.suggestion)
    drive(plain, lambda req: None)
    jumps = [o for _, o in got if o.kind == "jump"]
    assert len(jumps) >= 2 and all(o.accepted and o.chars_saved == 0 and o.reward == 0.75 for o in jumps)
    assert s.jumps_accepted == len(jumps) and s.saved_chars == 0
    assert s.file == AFTER  # the replay still types every edit
    # each accepted jump replaced a move to the next hunk by the accept keystroke
    assert plain.clock - s.clock == pytest.approx(len(jumps) * (s.timing.move_to_hunk - s.timing.accept))


def test_a_jump_elsewhere_or_while_typing_is_rejected() -> None:
    s = Session(pair(), ask_after_edit=True)
    seen_after = seen_typing = False
    while (req := s.next_request()) is not None:
        at = s.next_edit_at()
        if at is not None:  # done with a hunk: a jump to another line is wrong
            start, end = line_of(req.file, "def f")
            assert not (start <= at <= end)
            assert s.judge(Suggestion(start, end, "", jump=True)) == (False, -1)
            assert s.judge(Suggestion(at, at + 1, "", jump=True))[0]  # ...and the right line is not
            seen_after = True
            out = s.respond(Suggestion(req.cursor, req.cursor, "x"))  # nothing is typed here
            assert out.shown and not out.accepted and out.kind == "insert" and out.reward == -0.25
        else:  # the next edit is at the cursor: a jump anywhere is rejected
            assert s.judge(Suggestion(0, len(req.file), "", jump=True)) == (False, -1)
            seen_typing = True
            s.respond(None)
    assert seen_after and seen_typing


# -- per-kind figures ------------------------------------------------------------------------
def test_metrics_count_shows_accepts_and_chars_per_kind() -> None:
    cache = ObservationCache(None, ObserveConfig(use_lm=False))
    rule = JumpRule()

    m = run([pair()], with_jumps(lambda req, obs: None, rule), cache, ask_after_edit=True)
    k = m.kind_summary()
    assert k["jump"]["shown"] >= 2 and k["jump"]["accepted"] == k["jump"]["shown"]
    assert k["jump"]["chars_saved"] == 0 and k["insert"]["shown"] == k["rewrite"]["shown"] == 0
    assert m.shown == k["jump"]["shown"] and m.accepted == k["jump"]["accepted"]

    def always_x(req, obs):
        return Suggestion(req.cursor, req.cursor, "n")

    m = run([pair()], always_x, cache, ask_after_edit=True)
    k = m.kind_summary()
    assert k["insert"]["shown"] == m.shown > 0 and k["jump"]["shown"] == 0
    assert k["insert"]["accepted"] == m.accepted > 0  # "n" starts "nbytes" after the deletion
    assert k["insert"]["chars_saved"] == m.chars_saved == m.accepted


# -- the HTTP answer -------------------------------------------------------------------------
class NothingPolicy:
    """The served policy, made to show nothing (so the jump rule decides)."""

    def __init__(self, policy) -> None:
        self._policy = policy

    def __getattr__(self, name):
        return getattr(self._policy, name)

    def act_many(self, obs_list, sample=True):
        from dataclasses import replace

        return [replace(a, index=0, suggestion=None) for a in self._policy.act_many(obs_list, sample)]


@pytest.fixture(scope="module")
def make_client(tiny_checkpoint):
    from fastapi.testclient import TestClient

    from router.api.tab import create_app
    from specialists.tab import TabSpecialist

    def make(**options) -> TestClient:
        s = TabSpecialist(checkpoint=str(tiny_checkpoint), context_tokens=48, **options)
        s.setup()
        s.policy = NothingPolicy(s.policy)
        return TestClient(create_app(s))
    return make


def test_http_answer_for_a_jump(make_client) -> None:
    body = jump_body()
    r = make_client().post("/v1/tab", json=body)
    assert r.status_code == 200, r.text
    s = r.json()["suggestion"]
    assert s is not None, r.json()
    assert s["kind"] == "jump" and s["text"] == "" and s["source"] in ("repeat", "rename")
    assert (s["range"]["start"], s["range"]["end"]) == line_of(body["file"], "x = total_size")
    r = make_client(jump_max_lines=0).post("/v1/tab", json=body)  # off
    assert r.json()["suggestion"] is None and r.json()["reason"] == "policy chose not to show"


def jump_body() -> dict:
    req = request_after_first_rename()
    body = {**req.to_json(), "file": "# header\n" + req.file, "cursor": req.cursor + 9}
    body["recent_edits"] = [{"old": "total_size", "new": "size", "offset": req.recent_edits[0].offset + 9}]
    return body


def test_while_the_loop_logs_a_rule_answer_is_shown_and_credited_to_nobody(make_client, tmp_path) -> None:
    """With ``log_features`` (the default config) jumps and fallback rewrites are shown too;
    the logged row names the rule, its feedback is stored and counted for its kind, and the
    trainer credits the policy's own choice ("nothing") with nothing's reward."""
    from specialists.tab.events import EventStore, Feedback, sqlite_url
    from specialists.tab.loop.trainer import reward_of
    from specialists.tab.replay import RewardConfig

    client = make_client(log_features=True)
    store = client.app.state.events = EventStore(sqlite_url(tmp_path))
    try:
        jump = client.post("/v1/tab", json=jump_body()).json()
        file = "a = old_name + 1\nb = old_name + 2\n"
        rewrite = client.post("/v1/tab", json={
            "file": file, "cursor": file.index("old_name"), "language": "python",
            "recent_edits": [{"old": "old_name", "new": "new_name", "offset": 0}]}).json()
        assert jump["suggestion"]["kind"] == "jump" and rewrite["suggestion"]["kind"] == "next_edit"
        assert store.record_feedback(Feedback(jump["request_id"], "accepted"))
        assert store.record_feedback(Feedback(rewrite["request_id"], "rejected"))
        events = {e.request_id: e for e in store.labelled(str(jump["policy_version"]))}
        j, w = events[jump["request_id"]], events[rewrite["request_id"]]
        assert (j.kind, j.rule, j.shown, j.outcome, j.action) == ("jump", "jump", True, "accepted", "0")
        assert (w.kind, w.rule, w.outcome) == ("next_edit", "rewrite", "rejected")
        reward = RewardConfig()
        assert not j.credited and reward_of(j, reward) == reward_of(w, reward) == reward.none
        [stats] = store.version_stats()
        assert stats["events"] == 2 and stats["show_rate"] == 0.0 and stats["reward_per_request"] == 0.0
        assert store.kind_stats() == [
            {"kind": "jump", "by": "jump", "shown": 1, "accepted": 1, "chars_accepted": 0},
            {"kind": "next_edit", "by": "rewrite", "shown": 1, "accepted": 0, "chars_accepted": 0}]
    finally:
        store.close()


# -- the rewrite fallback --------------------------------------------------------------------
def test_rewrite_at_cursor_only_where_the_rewrite_starts_at_the_cursor() -> None:
    from specialists.tab.features import observe
    from specialists.tab.jump import rewrite_at_cursor

    file = "a = old_name + 1\nb = old_name + 2\n"
    edits = [RecentEdit(old="old_name", new="new_name", offset=0)]
    at = file.index("old_name")
    obs = observe(TabRequest(file=file, cursor=at, language="python", recent_edits=edits), None,
                  ObserveConfig(use_lm=False))
    sug = rewrite_at_cursor(obs)
    assert sug == Suggestion(at, at + len("old"), "new") and sug.kind == "rewrite"  # the changed middle
    further = observe(TabRequest(file=file, cursor=at - 2, language="python", recent_edits=edits), None,
                      ObserveConfig(use_lm=False))
    assert any(c.source == "next_edit" for c in further.candidates) and rewrite_at_cursor(further) is None
    # the fallback comes before a jump, and only where the decider shows nothing
    req = TabRequest(file=file, cursor=at, language="python", recent_edits=edits)
    assert with_jumps(lambda r, o: None, JumpRule(), rewrites=True)(req, obs) == sug
    assert with_jumps(lambda r, o: None, JumpRule(), rewrites=False)(req, obs) is None
    mine = Suggestion(at, at, "x")
    assert with_jumps(lambda r, o: mine, JumpRule(), rewrites=True)(req, obs) is mine


def test_http_answer_for_a_fallback_rewrite(make_client) -> None:
    file = "a = old_name + 1\nb = old_name + 2\n"
    at = file.index("old_name")
    body = {"file": file, "cursor": at, "language": "python",
            "recent_edits": [{"old": "old_name", "new": "new_name", "offset": 0}]}
    r = make_client().post("/v1/tab", json=body).json()
    assert r["suggestion"] == {"range": {"start": at, "end": at + 3}, "text": "new", "kind": "next_edit",
                               "source": "next_edit"}, r
    assert r["confidence"] is None
    r = make_client(rewrite_fallback=False).post("/v1/tab", json=body).json()
    assert r["suggestion"] is None


def test_an_insertion_is_held_back_where_the_latest_edit_looks_finished() -> None:
    from specialists.tab.jump import edit_finished, held

    req = request_after_first_rename()
    assert edit_finished(req)
    insert, rewrite = Suggestion(req.cursor, req.cursor, "x"), Suggestion(req.cursor, req.cursor + 1, "x")
    assert held(insert, req) and not held(rewrite, req) and not held(None, req)
    typing = request_after_first_rename(cursor=req.cursor - 1)  # not at the edit's end
    assert not edit_finished(typing) and not held(Suggestion(typing.cursor, typing.cursor, "x"), typing)
    # held back, the jump is shown instead; without hold the insertion stands
    jump = with_jumps(lambda r, o: insert, JumpRule(), hold=True)(req, None)
    assert jump is not None and jump.kind == "jump"
    assert with_jumps(lambda r, o: insert, JumpRule(), hold=False)(req, None) is insert


def test_a_held_insertion_is_logged_as_the_rules_doing() -> None:
    """``hold_finished`` withholds the policy's insertion: the row keeps the policy's action
    and names the rule, so the trainer credits that action with nothing's reward."""
    from router.service.tab import action_record
    from specialists.base import Result

    meta = {"request_id": "r1", "policy_version": 7, "action": 3, "logprob": -0.2, "features": "{}"}
    held_row = action_record(Result(output=None, abstained=True, meta={**meta, "rule": "held"}))
    assert (held_row.action, held_row.shown, held_row.kind, held_row.rule) == ("3", False, None, "held")
    out = {"range": {"start": 0, "end": 0}, "text": "x", "kind": "completion", "source": "lm"}
    own = action_record(Result(output=out, meta=meta))
    assert (own.shown, own.kind, own.rule) == (True, "completion", None)
