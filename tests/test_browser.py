"""End to end in a real browser: the Voila page of the crash simulator, driven by Playwright.

Voila serves ``simulator/simulator.ipynb`` on a free localhost port; headless Chromium from
Debian's packages (``/usr/bin/chromium``; Playwright cannot download its own browser here)
opens it, picks the postmortem's crash and reads the email count the page shows, then a crash
between the two tools of the briefing run's turn; it also checks the trial's glitches stay mended (no broken-image icon before the first matrix, no outbox for
the notes run).
The test skips, saying why, only when that file does not exist (``RESUMABLE_TEST_CHROMIUM``
points it elsewhere, e.g. to check the skip). The screenshot goes to tests/artifacts/simulator.png.

Selectors (ipywidgets 8 as Voila renders them):

* A ``Dropdown`` is ``<div class="widget-dropdown …"><label for=ID>Description</label>
  <select id=ID>``; the label is tied to the ``<select>``, so ``page.get_by_label("Strategy",
  exact=True)`` finds it by the widget's description ("Scenario", "Crash point", "Strategy").
  Each ``<option>``'s ``value`` is the option's label text (its visible text has spaces
  replaced by non-breaking ones), so options are chosen with ``select_option(value=...)``.
* Buttons are found by the class the simulator adds (``button.rs-run``,
  ``button.rs-matrix-run``), not by role and name: the Font Awesome icon's CSS ``::before``
  glyph becomes part of the accessible name, so ``name="Run", exact=True`` does not match.
* Results carry the simulator's own CSS classes (``add_class``): ``.rs-email-count`` holds
  "Emails sent: N", ``.rs-status`` says which case is shown, ``.rs-heatmap`` is the matrix image.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "simulator" / "simulator.ipynb"
CHROMIUM = Path(os.environ.get("RESUMABLE_TEST_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Images the page displays that have no picture (what a browser draws as a broken-image icon).
BROKEN_IMAGES = "() => [...document.images].filter(i => i.checkVisibility() && i.naturalWidth === 0).length"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_listening(proc: subprocess.Popen, port: int, log: Path, deadline_s: float = 60) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"voila exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"voila did not answer on port {port}:\n{log.read_text()[-3000:]}")


@pytest.fixture
def voila_url(tmp_path):
    """Serve the simulator page with Voila on a random free port; always stop it afterwards."""
    if not CHROMIUM.exists():  # checked first, so no server is started for nothing
        pytest.skip(f"no chromium at {CHROMIUM}: install it with `apt-get install -y chromium` (.ci/run does)")
    port = _free_port()
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "MPLCONFIGDIR": str(tmp_path / "mpl"),
    }
    env.pop("RESUMABLE_LIVE", None)
    log = tmp_path / "voila.log"
    voila = shutil.which("voila", path=bin_dir) or "voila"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [voila, "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1", str(NOTEBOOK)],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_until_listening(proc, port, log)
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_voila_page_shows_two_emails_for_rerun_and_one_with_the_ledger(voila_url):
    """In the served page, send_email + after_tool shows "Emails sent: 2" with rerun and 1 with by_effect_ledger."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(voila_url, timeout=60_000)
            strategy = page.get_by_label("Strategy", exact=True)
            expect(strategy).to_be_visible(timeout=60_000)
            count = page.locator(".rs-email-count")
            expect(count).to_contain_text("Emails sent: –")  # nothing run yet
            # No broken-image icon before the first matrix: the empty heatmap is not displayed at all.
            heatmaps = page.locator("img.rs-heatmap")
            expect(heatmaps).to_have_count(2)  # the one-call matrix, then the parallel turn's
            expect(heatmaps.nth(0)).to_be_hidden()
            expect(heatmaps.nth(1)).to_be_hidden()
            assert page.evaluate(BROKEN_IMAGES) == 0

            # The notes run sends no email: no Outbox panel for read_file, back for send_email.
            outbox = page.locator(".rs-outbox-panel")
            expect(outbox).to_be_visible()
            page.get_by_label("Scenario", exact=True).select_option(value="read_file")
            expect(outbox).to_be_hidden()
            page.get_by_label("Scenario", exact=True).select_option(value="send_email")
            expect(outbox).to_be_visible()
            page.get_by_label("Crash point", exact=True).select_option(value="after_tool")
            strategy.select_option(value="rerun")
            run = page.locator("button.rs-run")
            run.click()
            expect(page.locator(".rs-status")).to_contain_text("strategy rerun", timeout=30_000)
            expect(count.locator(".rs-count")).to_have_text("Emails sent: 2", timeout=30_000)
            expect(page.locator(".rs-checkpoint .rs-pending-mark").first).to_contain_text('"send_email"')

            strategy.select_option(value="by_effect_ledger")
            run.click()
            expect(page.locator(".rs-status")).to_contain_text("strategy by_effect_ledger", timeout=30_000)
            expect(count.locator(".rs-count")).to_have_text("Emails sent: 1", timeout=30_000)

            # The parallel turn, killed between its tools: send_email's result was saved, so rerun sends one.
            page.get_by_label("Scenario", exact=True).select_option(value="send_email+read_file")
            page.get_by_label("Crash point", exact=True).select_option(value="between_tools")
            strategy.select_option(value="rerun")
            run.click()
            expect(page.locator(".rs-status")).to_contain_text("send_email+read_file", timeout=30_000)
            expect(count.locator(".rs-count")).to_have_text("Emails sent: 1", timeout=30_000)
            expect(page.locator(".rs-checkpoint .rs-pending-mark").first).to_contain_text('"read_file"')
            expect(page.locator(".rs-story-view")).to_contain_text("between send_email (its result saved)")

            page.locator("button.rs-matrix-run").nth(0).click()
            expect(page.locator(".rs-matrix-status").nth(0)).to_contain_text(
                "70 cells", timeout=180_000
            )  # 70 real crashes; the machine may be shared
            heatmap = heatmaps.nth(0)
            expect(heatmap).to_be_visible()
            assert page.evaluate("img => img.naturalWidth", heatmap.element_handle()) > 400
            assert page.evaluate(BROKEN_IMAGES) == 0

            page.locator("button.rs-matrix-run").nth(1).click()  # 8 points x 5 strategies, between_tools among them
            expect(page.locator(".rs-matrix-status").nth(1)).to_contain_text("40 cells", timeout=240_000)
            expect(page.locator(".rs-matrix-status").nth(1)).to_contain_text("between_tools")
            expect(heatmaps.nth(1)).to_be_visible()
            assert page.evaluate(BROKEN_IMAGES) == 0

            # Voila scrolls inside a panel, not the document: grow the viewport to the content
            # so the screenshot holds the whole page.
            height = page.evaluate(
                "() => Math.max(...[...document.querySelectorAll('.lm-BoxPanel-child, body')].map(e => e.scrollHeight))"
            )
            page.set_viewport_size({"width": 1280, "height": min(int(height) + 40, 6000)})
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "simulator.png"), full_page=True)
        finally:
            browser.close()
