"""Which cheap signals say where the next edit will be? (issue 15; development projects only)

    python benchmarks/tab_jump_signals.py ../shared/data/commits --projects attrs,click,flask,rich

Replays edits with a request when each hunk is done (``Session(ask_after_edit=True)``), no
policy, and asks of each signal: where it names a line, how often the person's next edit
(the next hunk's first changed character) is on it — a jump pays when that is above 25%
(+0.75 accepted, -0.25 rejected). Then the same for the jump rule's gates over *every*
request, since the rule cannot know which requests end a hunk. Prints a table per part;
the last line is JSON. No model runs; never point it at the held-out test projects.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specialists.tab.context_copy import _find_word, _line_at, jump_candidates, region_end  # noqa: E402
from specialists.tab.data import load_split  # noqa: E402
from specialists.tab.jump import JumpRule  # noqa: E402
from specialists.tab.replay import Session  # noqa: E402
from specialists.tab.types import TRIGGER_CHARS, Suggestion, TabRequest  # noqa: E402

IDENT = re.compile(r"[A-Za-z_]\w{2,}")


def _first_ident(file: str, text: str, start: int) -> tuple[int, int] | None:
    """The line of the nearest whole-word occurrence at or after ``start`` of any identifier of ``text``."""
    best = None
    for word in dict.fromkeys(IDENT.findall(text)):
        i = _find_word(file, word, start)
        if i >= 0 and (best is None or i < best):
            best = i
    return None if best is None else _line_at(file, best)


def signals(req: TabRequest) -> dict[str, tuple[int, int] | None]:
    """Each signal's guess (a region of the file) at a request, or None where it has none."""
    f, c = req.file, req.cursor
    edge = region_end(f, c, 3)  # the editable region's end: rewrites' territory
    out: dict[str, tuple[int, int] | None] = {}
    for n in (1, 3, 6, 12):
        out[f"the {n} lines after the editable region"] = (edge, region_end(f, edge, n))
    last = req.recent_edits[-1] if req.recent_edits else None
    out["next use of an identifier of the last edit's old text"] = (
        _first_ident(f, last.old, edge) if last else None)
    out["next use of an identifier of the last edit's new text"] = (
        _first_ident(f, last.new, edge) if last else None)
    jumps = jump_candidates(f, c, req.recent_edits)
    for kind in ("repeat", "rename"):
        j = next((j for j in jumps if j.kind == kind), None)
        out[f"jump candidate: {kind}"] = None if j is None else (j.start, j.end)
    return out


def _gates(req: TabRequest) -> tuple[bool, bool, bool, str] | None:
    """The rule's gates for its candidate (latest edit, at its end, below), or None without one."""
    edits = req.recent_edits[-1:]
    j = next((j for j in jump_candidates(req.file, req.cursor, edits) if j.at_edit_end and j.lines_away >= 0), None)
    if j is None:
        return None
    left = req.file[req.cursor - 1 : req.cursor]
    word_end = bool(left) and left not in TRIGGER_CHARS and not left.isspace()
    ls = req.file.rfind("\n", 0, req.cursor) + 1
    le = req.file.find("\n", req.cursor)
    line = req.file[ls : len(req.file) if le < 0 else le]
    balanced = all(line.count(a) == line.count(b) for a, b in ("()", "[]", "{}"))
    far = "0-9" if j.lines_away < 10 else "10-24" if j.lines_away < 25 else "25+"
    return word_end, balanced, bool(edits[0].new), far


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data")
    p.add_argument("--projects", default="attrs,click,flask,rich")
    p.add_argument("--per-project", type=int, default=150)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    pairs = load_split(args.data, args.projects, args.per_project, seed=args.seed)
    hits: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    gates: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    rule = JumpRule(25)
    done = 0
    for pair in pairs:
        s = Session(pair, ask_after_edit=True)
        while (req := s.next_request()) is not None:
            at = s.next_edit_at()
            if at is not None:  # a hunk is done and another follows
                done += 1
                for name, region in signals(req).items():
                    if region is not None:
                        hits[name][0] += 1
                        hits[name][1] += region[0] <= at <= region[1]
            g = _gates(req)
            if g is not None:
                j = next(j for j in jump_candidates(req.file, req.cursor, req.recent_edits[-1:])
                         if j.at_edit_end and j.lines_away >= 0)
                sug = Suggestion(j.start, j.end, "", jump=True)
                gates[g][0] += 1
                gates[g][1] += s.judge(sug)[0]
            shown = rule.suggestion(req)
            if shown is not None:
                gates[("rule",)][0] += 1
                gates[("rule",)][1] += s.judge(shown)[0]
            s.respond(None)
    print(f"{len(pairs)} edits of {args.projects}; {done} requests where a hunk is done and another follows\n")
    print("| signal (where a hunk is done) | names a line | next edit there | precision |\n|---|---|---|---|")
    for name, (n, ok) in hits.items():
        print(f"| {name} | {n} | {ok} | {ok / max(1, n):.3f} |")

    def total(pred) -> tuple[int, int]:
        sel = [v for k, v in gates.items() if len(k) == 4 and pred(*k)]
        return sum(n for n, _ in sel), sum(ok for _, ok in sel)

    rows = {
        "latest edit, at its end, target below (every request)": total(lambda w, b, n, f: True),
        "+ last character typed ends a word or bracket": total(lambda w, b, n, f: w),
        "+ the cursor's line balanced": total(lambda w, b, n, f: w and b),
        "+ the edit typed something": total(lambda w, b, n, f: w and b and n),
        "+ target within 9 lines": total(lambda w, b, n, f: w and b and n and f == "0-9"),
        "+ target within 24 lines": total(lambda w, b, n, f: w and b and n and f != "25+"),
        "the rule, reach 25 lines": tuple(gates[("rule",)]),
    }
    print("\n| jump gates (every request) | shown | accepted | precision |\n|---|---|---|---|")
    for name, (n, ok) in rows.items():
        print(f"| {name} | {n} | {ok} | {ok / max(1, n):.3f} |")
    out = {"projects": args.projects, "edits": len(pairs), "hunk_done_requests": done,
           "signals": {k: {"named": n, "hit": ok} for k, (n, ok) in hits.items()},
           "gates": {k: {"shown": n, "accepted": ok} for k, (n, ok) in rows.items()}}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
