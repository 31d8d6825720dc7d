"""Real-browser tests: headless Chromium, driven by Playwright, against a live daphne server and a
real Celery worker (see conftest.py). Small page helpers shared by the test modules live here."""
import os
import re
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
TIMEOUT_MS = 30_000  # generous: auto-waiting expectations, never wall-clock assertions
PASSWORD = "correct horse battery staple"

WEATHER = "What's the weather in Lagos and London?"
CANCEL_ORDER = "Cancel order ORD-1001"
RUN_URL = re.compile(r"/runs/(\d+)/(#[\w-]+)?$")  # a control's answer opens the page at it (#run-answers)
FINISHED = re.compile(r"^(succeeded|failed|cancelled)$")

# Every module: `pytestmark = [pytest.mark.browser, requires_chromium]`. CI installs Chromium
# (.ci/run), so there the tests always run.
requires_chromium = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"
)


def run_id_of(page) -> int:
    """The run shown by a run page."""
    return int(page.locator("#run-page").get_attribute("data-run-id"))


def mark_page(page) -> None:
    """Put a flag in the page's JavaScript state; a reload or navigation would lose it."""
    page.evaluate("window.__sameDocument = true")


def still_same_page(page) -> bool:
    return page.evaluate("window.__sameDocument === true")


def wait_for_seq(page, seq: int) -> None:
    """Until the run page's timeline has applied every event up to `seq` (the run's event_seq)."""
    page.wait_for_function("seq => document.body.dataset.lastSeq === String(seq)", arg=seq, timeout=TIMEOUT_MS)


def screenshot_dir() -> Path | None:
    """Where screenshots go: $SCREENSHOT_DIR (created when missing), or None when it is unset, so
    a plain test run writes nothing into the checkout."""
    directory = os.environ.get("SCREENSHOT_DIR", "").strip()
    if not directory:
        return None
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    return path


def screenshot(page, name: str) -> Path | None:
    """A full-page PNG of the page as `<name>.png` in $SCREENSHOT_DIR (the README's pictures);
    does nothing when SCREENSHOT_DIR is unset. A later pass (PostgreSQL) overwrites the first."""
    directory = screenshot_dir()
    if directory is None:
        return None
    path = directory / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


AXE_SCRIPT = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"


def axe_violations(page) -> list[str]:
    """What axe-core (vendored, WCAG 2.x A and AA rules and best practices) finds wrong on the page
    as it is now: one line per violation and element, empty when the page passes."""
    # Two frames: what a resize or a script changed has been laid out (and its handlers ran).
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE_SCRIPT))
    results = page.evaluate(
        "() => axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => ({"
        "id: v.id, help: v.help, nodes: v.nodes.map(n => n.target.join(' ') + ' :: ' + n.failureSummary)})))"
    )
    return [f"{v['id']} ({v['help']}): {node}" for v in results for node in v["nodes"]]


def assert_no_violations(found: dict[str, list[str]]) -> None:
    """`found`: {where: axe_violations(page) there}; fails naming every violation and where it was."""
    problems = {where: lines for where, lines in found.items() if lines}
    assert not problems, "\n".join(f"{where}: {line}" for where, lines in problems.items() for line in lines)


def open_edit_box(card) -> None:
    """Open an approval card's edit box. A live refresh can replace the card between Playwright
    finding the summary and clicking it (the click then lands on the card it replaced, gone):
    open it again until it is open."""
    from playwright.sync_api import expect

    box = card.locator("textarea.edit-arguments")
    for _ in range(5):
        if not box.is_visible():
            card.locator("details.edit-args summary").click()
        try:
            expect(box).to_be_visible(timeout=3000)
            expect(box).to_be_enabled(timeout=3000)
            return
        except AssertionError:
            continue
    expect(box).to_be_visible()
