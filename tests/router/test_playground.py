"""The playground in a real browser (Playwright driving the system's Chromium): type, see
Tab ghost text, press Tab, see it accepted and the feedback stored; merge a sketch; the
dashboard charts the requests the test made and the accept rate moves."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from router.app import create_app
from router.config import parse_config
from tests.conftest import running

CHROMIUM = os.environ.get("COMPLEMENT_CHROMIUM") or next(
    (p for p in (shutil.which("chromium"), shutil.which("chromium-browser"),
                 shutil.which("google-chrome")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=(
    "no Chromium installed (`apt-get install chromium`; .ci/run installs it), or set "
    "COMPLEMENT_CHROMIUM to a Chromium executable"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    tmp = tmp_path_factory.mktemp("playground")
    evals = tmp / "evals"
    evals.mkdir()
    (evals / "edit.json").write_text(json.dumps({
        "suite": "edit-heldout", "created": "2026-12-01T18:49:00+00:00",
        "summary": {"routes": {"cascade": {"n": 180, "exact": 0.9833, "cost_usd": 0.017128}}}}))
    os.environ["COMPLEMENT_EVAL_DIR"] = str(evals)
    config = parse_config({
        "data_dir": str(tmp / "data"), "events": {"feedback_timeout_s": 600},
        "specialists": {
            "tab": {"class": "specialists.tab:TabSpecialist",
                    "options": {"sample": True, "log_features": True}},
            "apply": {"class": "specialists.apply.specialist:ApplySpecialist"}}}, env={})
    app = create_app(config)
    try:
        with running(app) as url:
            yield url, app
    finally:
        os.environ.pop("COMPLEMENT_EVAL_DIR", None)
        shutil.rmtree(evals, ignore_errors=True)


@pytest.fixture(scope="module")
def page(served: tuple[str, Any]) -> Iterator[Any]:
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            page.goto(served[0] + "/")
            page.wait_for_function("window.complementEditor !== undefined")
            yield page
        finally:
            browser.close()


ANSWER_S = 30.0
"""How long a keystroke's answer may take before the test fails: generous, so a loaded
2-core machine (a benchmark beside the tests) slows the test down but does not fail it."""


def _type_until_ghost(page: Any, text: str) -> bool:
    """Type ``text`` a character at a time; after each, wait for the page to have handled
    the answer to a request made after it (a condition, not a fixed time), then look."""
    page.click(".cm-content")
    page.keyboard.press("Control+End")
    for ch in text:
        asked = page.evaluate("window.complementTab.seq")
        page.keyboard.type(ch)
        page.wait_for_function(f"window.complementTab.answeredSeq > {asked}",
                               timeout=ANSWER_S * 1000)
        if page.query_selector(".cm-ghost") is not None:
            return True
    return False


def _until(condition: Any, what: str, seconds: float = ANSWER_S) -> None:
    """Wait for ``condition()`` (the store, after the page's feedback POST), or fail."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_ghost_text_accepted_with_tab_lands_in_the_store(page: Any, served: tuple[str, Any]
                                                         ) -> None:
    _, app = served
    typed = "def mul(a, b):\n    return a * b\n\n\ndef div(a, b):\n    return a / b\n" * 3
    assert _type_until_ghost(page, typed), "no ghost text appeared while typing"
    ghost = page.inner_text(".cm-ghost")
    before = page.evaluate("window.complementEditor.state.doc.toString()")
    page.keyboard.press("Tab")
    page.wait_for_function("window.complementTab.accepted >= 1")
    after = page.evaluate("window.complementEditor.state.doc.toString()")
    assert ghost in after and len(after) > len(before) and page.query_selector(".cm-ghost") is None
    events = app.state.events
    _until(lambda: any(row["accept_rate"] > 0 for row in events.version_stats()),
           "the accept in the store")
    latencies = page.evaluate("window.complementTab.latencies")
    assert latencies and all(ms > 0 for ms in latencies)
    # the dashboard's accept rate moved with it
    page.evaluate("refreshDashboard()")
    page.wait_for_function("document.querySelectorAll('#tab-table tr[data-version]').length > 0")
    accept_cells = page.eval_on_selector_all(
        "#tab-table tr[data-version] td:nth-child(4)", "cells => cells.map(c => c.textContent)")
    assert any(float(x) > 0 for x in accept_cells), accept_cells


def test_escape_rejects_the_ghost_text_and_the_store_says_so(page: Any,
                                                              served: tuple[str, Any]) -> None:
    _, app = served
    rejected_before = _outcomes(app, "rejected")
    assert _type_until_ghost(page, "\ndef cube(x):\n    return x * x * x\n" * 3)
    page.keyboard.press("Escape")
    page.wait_for_selector(".cm-ghost", state="detached")
    _until(lambda: _outcomes(app, "rejected") > rejected_before, "the reject in the store")


def _outcomes(app: Any, outcome: str) -> int:
    from sqlalchemy import func, select

    o = app.state.events.outcomes
    with app.state.events.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(o)
                                .where(o.c.outcome == outcome)).scalar() or 0)


def test_apply_pane_shows_the_diff_or_the_reason(page: Any) -> None:
    page.click("#apply-run")
    page.wait_for_function("document.getElementById('apply-out').textContent.length > 0")
    assert "+    return 20" in page.inner_text("#apply-out")
    page.fill("#apply-sketch", "# ...\nno_anchor_here()\n# ...\n")
    page.click("#apply-run")
    page.wait_for_function(
        "document.getElementById('apply-out').textContent.startsWith('abstained')")


def test_dashboard_charts_the_requests_made(page: Any, served: tuple[str, Any],
                                            tmp_path: Path) -> None:
    page.evaluate("refreshDashboard()")
    page.wait_for_function("document.querySelectorAll('#routes-table tr').length > 1")
    routes = page.inner_text("#routes-table")
    assert "tab" in routes and "apply" in routes
    assert "edit-heldout" in page.inner_text("#evals-table")
    assert page.query_selector("#tab-table tr[data-version]") is not None
    drawn = page.evaluate("""() => {
        const c = document.getElementById('chart-requests');
        const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < px.length; i += 4) n += px[i] > 0; return n; }""")
    assert drawn > 500, "the requests chart drew nothing"
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
    assert (tmp_path / "dashboard.png").stat().st_size > 10_000


def test_a_reloaded_page_is_a_session_of_its_own_and_tab_keeps_answering(page: Any) -> None:
    """A reload counts seq from 1 again; with one fixed session the server answered the new
    page's keystrokes 'cancelled' until its seq passed the old page's (issues 34, 40)."""
    before = page.evaluate("window.complementTab.session")
    page.reload()
    page.wait_for_function("window.complementEditor !== undefined")
    assert page.evaluate("window.complementTab.session") != before
    assert page.evaluate("window.complementTab.seq") == 0
    assert _type_until_ghost(page, "\ndef square(x):\n    return x * x\n" * 3), \
        "no ghost text after a reload"
    last = page.inner_text("#tab-last")
    assert "cancelled" not in last


def test_the_editor_indents_python_by_four_spaces(page: Any) -> None:
    """Issue 40: Enter after ``def f():`` indented by two spaces in a four-space file."""
    page.click(".cm-content")
    page.keyboard.press("Control+End")
    page.keyboard.type("def indented():")
    page.keyboard.press("Enter")
    doc = page.evaluate("window.complementEditor.state.doc.toString()")
    assert doc.endswith("def indented():\n    "), repr(doc[-40:])


def test_the_charts_have_a_legend_and_no_eval_runs_says_how_to_make_one(
        page: Any, served: tuple[str, Any], tmp_path: Path) -> None:
    """Issue 40: the charts had no legend, and "Last eval reports" was an empty table."""
    page.evaluate("refreshDashboard()")
    page.wait_for_function("document.querySelectorAll('#routes-table tr').length > 1")
    legend = page.evaluate("""() => {
        const c = document.getElementById('chart-tab');
        const px = c.getContext('2d').getImageData(c.width - 200, 0, 200, 16).data;
        const seen = new Set();
        for (let i = 0; i < px.length; i += 4) seen.add(`${px[i]},${px[i+1]},${px[i+2]}`);
        return [seen.has('250,176,5'), seen.has('76,110,245')]; }""")
    assert legend == [True, True], "the Tab chart's legend (show rate, accept rate) is missing"
    empty = tmp_path / "no-evals"
    empty.mkdir()
    before = os.environ["COMPLEMENT_EVAL_DIR"]
    os.environ["COMPLEMENT_EVAL_DIR"] = str(empty)
    try:
        page.evaluate("refreshDashboard()")
        page.wait_for_function(
            "document.getElementById('evals-table').innerText.includes('no eval runs')")
        assert "complement eval configs/eval/edit.yaml" in page.inner_text("#evals-table")
    finally:
        os.environ["COMPLEMENT_EVAL_DIR"] = before
