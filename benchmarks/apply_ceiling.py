"""How many lazy sketches are two-way: another commit that the same generator, with the same
draws, turns into the very same sketch (issue 36's ceiling).

An applier sees the original file and the sketch, nothing else. Where a second commit —
a file other than the committed one, even up to whitespace — gives the byte-identical
sketch, the two are one input: whatever the applier answers, it is wrong for one of them,
and only a prior over which commit is more likely (a model of code, not a reading of the
sketch) can choose. This script finds such second commits and counts the sketches that
have one, per generator and label, beside what the default applier does with them.

Second commits tried for each sketch (every one must differ from the committed file beyond
whitespace, and parse where the committed file parses):

* every file the reading search finds (``specialists.apply.search``: the piecewise reading
  and its variants, the global alignment's earliest and latest optima, ...), and the rules'
  own answer;
* the commit with one of its hunks moved: the same lines deleted and written at another
  place of the original that deletes the same lines and has the same line above and below
  (at most ``--moves`` places a hunk, nearest first).

Each is written through the generator again from the same random state
(``benchmarks/apply.py``'s ``Case.remake``); a byte-identical sketch makes the sketch
two-way. Found alternatives are a lower bound: a second commit neither way proposes is not
looked for.

Reports per generator (and per label: unique, ambiguous): sketches, the share two-way, and
the default applier's exact / abstain / silent-wrong on the two-way and the other sketches;
then the ceiling this puts on issue 36's first line: a reader exact on every sketch that is
not two-way and abstaining on the rest reaches ``1 - two_way`` at no silent wrong; past that,
each further exact answer is a guess between readings the sketch does not tell apart. Last
line: JSON summary.

    python benchmarks/apply_ceiling.py DATA... [--generator all] [--per-project 150] [--seed 0]
"""

from __future__ import annotations

import argparse
import difflib
import json
import platform
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from apply import Case, cases, generator_names, load, normalise  # noqa: E402

from specialists.apply import apply_sketch  # noqa: E402
from specialists.apply.applier import warm  # noqa: E402
from specialists.apply.checks import has_parse_error  # noqa: E402
from specialists.apply.result import ApplyOptions  # noqa: E402
from specialists.apply.search import search  # noqa: E402


def moved_hunks(before: str, after: str, moves: int) -> Iterator[str]:
    """``after`` with one of the commit's hunks moved: its deleted lines (none for an
    insertion) taken at another place of ``before`` that holds the same lines with the same
    line above and below, and its new lines written there; the other hunks as committed.
    At most ``moves`` places a hunk, nearest the committed one first."""
    b = before.split("\n")
    a = after.split("\n")
    ops = [op for op in difflib.SequenceMatcher(None, b, a, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    edits = [(i1, i2, a[j1:j2]) for _, i1, i2, j1, j2 in ops]
    for n, (i1, i2, new) in enumerate(edits):
        width = i2 - i1
        above = b[i1 - 1] if i1 > 0 else None
        below = b[i2] if i2 < len(b) else None
        others = [e for m, e in enumerate(edits) if m != n]
        places = []
        for p in range(0, len(b) - width + 1):
            if p == i1 or b[p:p + width] != b[i1:i2]:
                continue
            if (b[p - 1] if p > 0 else None) != above:
                continue
            if (b[p + width] if p + width < len(b) else None) != below:
                continue
            # clear of the other hunks by a line, so that none of them changes meaning
            if any(p - 1 <= o2 and o1 <= p + width for o1, o2, _ in others):
                continue
            places.append(p)
        places.sort(key=lambda p: abs(p - i1))
        for p in places[:moves]:
            moved = sorted(others + [(p, p + width, new)], reverse=True)
            lines = list(b)
            for s1, s2, put in moved:
                lines[s1:s2] = put
            yield "\n".join(lines)


def alternatives(case: Case, answer: str | None, moves: int) -> list[str]:
    """Other commits to try: files the reading search finds, the rules' answer, moved hunks;
    each differs from the committed file beyond whitespace, at most once each."""
    found = search(case.before, case.sketch, case.language, ApplyOptions(), None, None)
    texts = [c.text for c in found.candidates]
    if answer is not None:
        texts.append(answer)
    texts += list(moved_hunks(case.before, case.after, moves))
    want = normalise(case.after)
    after_parses = has_parse_error(case.after, case.language) is False
    out: list[str] = []
    seen: set[str] = {case.after}
    for text in texts:
        if text in seen:
            continue
        seen.add(text)
        if normalise(text) == want:
            continue
        if after_parses and has_parse_error(text, case.language):
            continue
        out.append(text)
    return out


def two_way(case: Case, others: list[str]) -> int:
    """How many of ``others`` the generator, from the same draws, turns into this sketch."""
    assert case.remake is not None
    n = 0
    for text in others:
        try:
            again = case.remake(case.before, text)
        except Exception:  # a generator that cannot sketch this commit gives no sketch
            continue
        n += again == case.sketch
    return n


def outcome(case: Case, merged: str | None, applied: bool) -> str:
    if not applied or merged is None:
        return "abstain"
    if merged == case.after:
        return "exact"
    return "exact_ws" if normalise(merged) == normalise(case.after) else "wrong"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description="Count the lazy sketches that another commit turns into byte for byte "
                    "(the same generator, the same draws): a ceiling on exact answers at "
                    "no silent wrong (issue 36).")
    parser.add_argument("data", nargs="+", type=Path,
                        help="commit histories (*.jsonl.gz), or folders of them")
    parser.add_argument("--generator", default="all",
                        help="lines, frontier, outline (third), both (lines+frontier) or all")
    parser.add_argument("--per-project", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--moves", type=int, default=20,
                        help="at most this many other places to move each hunk to")
    parser.add_argument("--limit", type=int, default=0, help="stop after this many sketches")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.data if not p.exists()]
    if missing:
        parser.error(f"no such file or folder: {', '.join(missing)}")
    generators = generator_names(args.generator)
    unknown = set(generators) - {"lines", "frontier", "outline"}
    if unknown:
        parser.error(f"--generator {args.generator}: use lines, frontier, outline, both or all")

    warm()
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    started = time.perf_counter()
    n = 0
    for case in cases(load(args.data, args.per_project, args.seed), args.seed, generators):
        if case.remake is None:
            continue
        if case.remake(case.before, case.after) != case.sketch:
            raise SystemExit(f"the {case.generator} generator did not write the same sketch "
                             f"again from the same draws ({case.project} {case.path})")
        result = apply_sketch(case.before, case.sketch, language=case.language, path=case.path)
        got = outcome(case, result.merged, result.applied)
        ways = two_way(case, alternatives(case, result.merged if result.applied else None,
                                          args.moves))
        side = "two_way" if ways else "one_way"
        for group in (case.generator, f"{case.generator}/{case.label}"):
            counts[group]["n"] += 1
            counts[group][side] += 1
            counts[group][f"{side}:{got}"] += 1
        n += 1
        if n % 200 == 0:
            print(f"  {n} sketches, {time.perf_counter() - started:.0f} s", file=sys.stderr,
                  flush=True)
        if args.limit and n >= args.limit:
            break
    if not n:
        parser.error("no sketches: the histories hold no commit the generators could sketch")

    summary: dict[str, Any] = {"sketches": n, "seconds": round(time.perf_counter() - started, 1),
                               "machine": f"{platform.machine()}, {platform.python_version()}",
                               "per_project": args.per_project, "seed": args.seed,
                               "moves": args.moves, "groups": {}}
    print(f"{'group':<22} {'n':>6} {'two-way':>8} {'ceiling':>8}   applier on two-way "
          f"(exact/abstain/wrong)   applier on the rest")
    for group in sorted(counts):
        c = counts[group]
        share = c["two_way"] / c["n"]

        def rates(side: str) -> dict[str, float]:
            total = c[side] or 1
            return {k: round(c[f"{side}:{k}"] / total, 4)
                    for k in ("exact", "exact_ws", "abstain", "wrong")}
        row = {"n": c["n"], "two_way": round(share, 4),
               "ceiling_exact_at_no_wrong": round(1 - share, 4),
               "applier_on_two_way": rates("two_way"), "applier_on_rest": rates("one_way"),
               "two_way_n": c["two_way"]}
        summary["groups"][group] = row
        tw, rest = row["applier_on_two_way"], row["applier_on_rest"]
        print(f"{group:<22} {c['n']:>6} {share:>8.4f} {1 - share:>8.4f}   "
              f"{tw['exact']:.3f} / {tw['abstain']:.3f} / {tw['wrong']:.3f}"
              f"{'':>15}{rest['exact']:.3f} / {rest['abstain']:.3f} / {rest['wrong']:.3f}")
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
