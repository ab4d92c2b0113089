"""Tab ghost text in the browser: keystroke to ghost text, measured in the page.

Starts the app (the default config's Tab and apply specialists, a fresh data directory),
opens the playground in Chromium (Playwright), types code a character at a time at a
steady pace, accepting (Tab) a ghost text that is what it was about to type, and reads the
page's own measurements: for each ghost text shown, the time
from the keystroke that led to it to the moment it was drawn (debounce included). With
``--screenshots DIR`` it saves the playground and the dashboard there. JSON summary last.

    python benchmarks/playground.py [--chars 400] [--screenshots docs]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TEXT = ("def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n\n\n"
        "def volume(w, h, d):\n    return w * h * d\n\n\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chars", type=int, default=400, help="keystrokes to type")
    ap.add_argument("--delay-ms", type=float, default=120, help="time between keystrokes")
    ap.add_argument("--screenshots", type=Path, default=None)
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright

    from router.app import create_app
    from router.config import parse_config
    from router.serving import running

    chromium = os.environ.get("COMPLEMENT_CHROMIUM") or shutil.which("chromium")
    if not chromium:
        print("no Chromium: apt-get install chromium, or set COMPLEMENT_CHROMIUM", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as data:
        config = parse_config({"data_dir": data, "specialists": {
            "tab": {"class": "specialists.tab:TabSpecialist",
                    "options": {"sample": True, "log_features": True}},
            "apply": {"class": "specialists.apply.specialist:ApplySpecialist"}}}, env={})
        with running(create_app(config)) as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 1700})
            page.goto(url + "/")
            page.wait_for_function("window.complementEditor !== undefined")
            page.click(".cm-content")
            page.keyboard.press("Control+End")
            typed = (TEXT * (a.chars // len(TEXT) + 1))[: a.chars]
            i = 0
            while i < len(typed):
                ghost = page.query_selector(".cm-ghost")
                text = ghost.inner_text() if ghost is not None else ""
                if text and typed.startswith(text, i):  # what the person was about to type
                    page.keyboard.press("Tab")
                    i += len(text)
                    continue
                ch = typed[i]
                if ch == "\n":  # a raw newline: Enter would add the editor's own indentation
                    page.keyboard.insert_text(ch)
                    page.wait_for_timeout(a.delay_ms)
                else:
                    page.keyboard.type(ch, delay=a.delay_ms)
                i += 1
            page.wait_for_timeout(500)
            state = page.evaluate("window.complementTab")
            if a.screenshots:
                a.screenshots.mkdir(parents=True, exist_ok=True)
                page.click("#apply-run")
                page.wait_for_timeout(300)
                page.evaluate("refreshDashboard()")
                page.wait_for_timeout(500)
                page.screenshot(path=str(a.screenshots / "playground.png"))
                page.locator("#dashboard").screenshot(path=str(a.screenshots / "dashboard.png"))
            browser.close()
    lat = sorted(state["latencies"])
    p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))] if lat else None
    summary = {"keystrokes": a.chars, "ghosts_shown": state["shown"],
               "accepted": state["accepted"],
               "ghost_ms_p50": round(statistics.median(lat), 1) if lat else None,
               "ghost_ms_p95": round(p95, 1) if p95 is not None else None,
               "within_100_ms": round(sum(x <= 100 for x in lat) / len(lat), 3) if lat else None,
               "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                          f"Python {platform.python_version()}"}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
