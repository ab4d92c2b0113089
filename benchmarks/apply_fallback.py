"""The learned fallback's part of ``benchmarks/apply.py --fallback DIR`` (issue 16).

On every sketch the rules abstain on, run ``RegionFallback`` (the trained region model,
decoded speculatively, answers kept only when the checks pass) and, for reference, the same
cut and checks with the true region texts as the writer (``oracle``: the most this way of
recovering could give with a perfect model). Counts, per generator: abstains seen, recovered
(exact, byte for byte), answered but wrong whitespace-normalised (silent wrong), still
abstained; and the fallback's speed in the rules' unit (cl100k tokens of the expected file
per second of fallback time) next to the model's own decode rate.
"""

from __future__ import annotations

import difflib
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from specialists.apply.fallback import RegionFallback, checked_region_merge
from specialists.apply.regions import lines_of, region_target, regions

__all__ = ["FallbackMeter"]


def _normalise(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.split("\n") if line.strip()]


class FallbackMeter:
    def __init__(self, path: Path, threads: int = 1) -> None:
        self.fallback = RegionFallback.load(path, threads=threads)
        self.stats: dict[str, Counter[str]] = defaultdict(Counter)
        self.seconds = 0.0
        self.file_tokens = 0
        self.model_tokens = 0
        self.model_seconds = 0.0
        self.reasons: Counter[str] = Counter()

    def observe(self, case: Any, result: Any, tokens: int) -> None:
        if result.applied:
            return
        started = time.perf_counter()
        fb = self.fallback.apply(case.before, case.sketch, case.language, case.path)
        self.seconds += time.perf_counter() - started
        self.file_tokens += tokens
        self.model_tokens += fb.stats.get("model_tokens", 0)
        self.model_seconds += fb.stats.get("model_seconds", 0.0)
        oracle = self._oracle(case)
        exact = fb.applied and fb.merged == case.after
        wrong = fb.applied and _normalise(fb.merged or "") != _normalise(case.after)
        if not fb.applied:
            self.reasons[(fb.reason or "").split(":")[1].strip()[:60] if ":" in (fb.reason or "") else fb.reason or ""] += 1
        for group in ("all", f"generator={case.generator}", f"project={case.project}"):
            s = self.stats[group]
            s["abstains"] += 1
            s["answered"] += fb.applied
            s["recovered"] += exact
            s["recovered_ws"] += fb.applied and not wrong
            s["silent_wrong"] += wrong
            s["placed"] += oracle[0]
            s["oracle_recovered"] += oracle[1]

    def _oracle(self, case: Any) -> tuple[bool, bool]:
        regs = regions(case.before, case.sketch, case.language)
        if not regs:
            return False, False
        ops = difflib.SequenceMatcher(None, lines_of(case.before), lines_of(case.after),
                                      autojunk=False).get_opcodes()
        queue: list[str] = []
        for region in regs:
            got = region_target(case.before, case.after, region, ops)
            if got is None:
                return True, False
            queue.append(got[1])

        def writer(region_text: str, segment: str) -> tuple[str | None, dict[str, Any]]:
            return queue.pop(0), {"tokens": 0, "seconds": 0.0}

        res = checked_region_merge(case.before, case.sketch, case.language, case.path, None, writer)
        return True, res.applied and res.merged == case.after

    def summary(self, rules_tokens_per_s: float) -> dict[str, Any]:
        def row(s: Counter[str]) -> dict[str, Any]:
            n = s["abstains"]
            return {"abstains": n, "recovered": s["recovered"],
                    "recovered_share": round(s["recovered"] / n, 4) if n else None,
                    "answered": s["answered"], "silent_wrong": s["silent_wrong"],
                    "silent_wrong_rate_of_answered": round(s["silent_wrong"] / s["answered"], 4)
                    if s["answered"] else None,
                    "still_abstained": n - s["answered"],
                    "windows_found": s["placed"], "oracle_recovered": s["oracle_recovered"],
                    "oracle_share": round(s["oracle_recovered"] / n, 4) if n else None}

        out = {group: row(s) for group, s in sorted(self.stats.items())}
        tps = self.file_tokens / self.seconds if self.seconds else 0.0
        out["speed"] = {"fallback_file_tokens_per_s": round(tps, 1),
                        "rules_file_tokens_per_s": round(rules_tokens_per_s),
                        "ratio_fallback_to_rules": round(tps / rules_tokens_per_s, 5) if rules_tokens_per_s else None,
                        "model_tokens": self.model_tokens,
                        "model_tokens_per_s": round(self.model_tokens / self.model_seconds, 1)
                        if self.model_seconds else None,
                        "fallback_seconds": round(self.seconds, 1)}
        out["abstain_reasons"] = dict(self.reasons.most_common(8))
        return out

    @staticmethod
    def print_table(summary: dict[str, Any]) -> None:
        keys = ("abstains", "recovered", "recovered_share", "answered", "silent_wrong",
                "silent_wrong_rate_of_answered", "still_abstained", "windows_found", "oracle_recovered",
                "oracle_share")
        groups = [g for g in summary if g not in ("speed", "abstain_reasons")]
        print("\nlearned fallback on the rules' abstains", file=sys.stderr)
        print(f"{'':30s}" + "".join(f"{g[:20]:>22s}" for g in groups), file=sys.stderr)
        for key in keys:
            print(f"{key:30s}" + "".join(f"{str(summary[g][key]):>22s}" for g in groups), file=sys.stderr)
        print(f"speed: {summary['speed']}", file=sys.stderr)
        print(f"fallback abstain reasons: {summary['abstain_reasons']}", file=sys.stderr)
