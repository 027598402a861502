"""One headless Chromium (Debian's, driven by playwright) shared by a module's tests, and a
`visit` that opens a console page, fails on any browser console error or uncaught page error,
and writes a screenshot of the page into the module's output folder."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("TIDEMQ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
PAGE_TIMEOUT_MS = 20_000


@dataclass
class BrowserErrors:
    """Console errors and uncaught exceptions seen on any page, as (url, text)."""

    seen: list[tuple[str, str]] = field(default_factory=list)

    def watch(self, page) -> None:
        page.on("console", lambda msg: msg.type == "error" and self.seen.append(
            (page.url, f"console error: {msg.text}")))
        page.on("pageerror", lambda exc: self.seen.append((page.url, f"page error: {exc}")))

    def check(self) -> None:
        assert not self.seen, f"the browser reported errors: {self.seen}"


def steady_navigation(page) -> None:
    """`page.goto` tried again when Chromium abandons it because the network changed: the
    compose test, on another xdist worker, creates Docker networks, and Chromium drops
    navigations in flight whenever the host's interfaces change (ERR_NETWORK_CHANGED, or its
    error page replacing the navigation). Any other failure is raised at once."""
    from playwright.sync_api import Error

    navigate = page.goto

    def goto(url: str, **kwargs):
        for attempt in range(3):
            try:
                return navigate(url, **kwargs)
            except Error as exc:
                dropped = ("ERR_NETWORK_CHANGED" in str(exc)
                           or "interrupted by another navigation to \"chrome-error://" in str(exc))
                if not dropped or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    page.goto = goto


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (.ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory, request):
    """A fresh folder per module, or TIDEMQ_SCREENSHOTS_DIR (the docs' pictures are made with
    `TIDEMQ_SCREENSHOTS_DIR=docs/screenshots`; docs/console.md)."""
    chosen = os.environ.get("TIDEMQ_SCREENSHOTS_DIR", "")
    if chosen:
        folder = Path(chosen).resolve()
        folder.mkdir(parents=True, exist_ok=True)
    else:
        folder = tmp_path_factory.mktemp(
            f"{request.module.__name__.rsplit('.', 1)[-1]}-screens")
    print(f"\nconsole screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def browser_page(browser):
    """One page (tab) for the module; its errors are checked after every test."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    steady_navigation(page)
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    errors = BrowserErrors()
    errors.watch(page)
    page.browser_errors = errors
    yield page
    context.close()


@pytest.fixture
def visit(browser_page, screenshots):
    """visit(url, shot) → the page after loading `url` (200 expected), screenshot written."""
    page = browser_page

    def go(url: str, shot: str):
        response = page.goto(url)
        assert response is not None and response.status == 200, (url, response and
                                                                  response.status)
        return snap(shot)

    def snap(shot: str):
        page.wait_for_load_state("load")
        name = re.sub(r"[^A-Za-z0-9_-]+", "-", shot)
        page.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)
        page.browser_errors.check()
        return page

    go.snap = snap
    yield go
    page.browser_errors.check()
