"""The web page in a real browser: the system Chromium (Debian's `chromium`), headless, driven by
Playwright against a dev server on port 0 over the embedded emulation with the offline model.

Nothing here is skipped: without Chromium on PATH every test fails and says how to get it
(`make browser`). One dev server and one browser per module keep the suite fast; each test gets its
own browser context (cookies, sessionStorage), so each user signs in afresh. Every request a page
makes is recorded, and a test fails when one went anywhere but the dev server (no CDN, nothing
external), when a script threw, or when the Content-Security-Policy blocked something.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / ".artifacts" / "screenshots"
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium() -> str:
    found = shutil.which("chromium")
    if not found:
        pytest.fail(
            "the browser tests need Chromium on PATH: run `make browser` (as root it installs Debian's "
            "`chromium` with apt-get), or install it yourself (apt-get install chromium)",
            pytrace=False,
        )
    if not AXE.is_file():
        pytest.fail("node_modules/axe-core is missing: run `make node`", pytrace=False)
    return found


@pytest.fixture(scope="module")
def browser(chromium: str) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Visit:
    """A browser context for one user, and what its pages did."""

    context: Any
    page: Any
    origin: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    allowed_hosts: set[str] = field(default_factory=set)

    def check(self) -> None:
        host = urlsplit(self.origin).netloc
        elsewhere = [url for url in self.requests if urlsplit(url).netloc not in {host, *self.allowed_hosts}]
        assert not elsewhere, f"the page made requests to other hosts: {elsewhere}"
        assert not self.errors, f"the page reported errors: {self.errors}"


@pytest.fixture()
def visit(browser: Any, request: pytest.FixtureRequest) -> Iterator[Callable[..., Visit]]:
    """visit(origin, user=None): a fresh context and page at `origin`, signed in as `user` through the form."""
    made: list[Visit] = []

    def open_page(origin: str, user: str | None = None) -> Visit:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(20_000)
        context.add_init_script(path=str(AXE))  # init scripts run outside the page's CSP
        page = context.new_page()
        seen = Visit(context, page, origin)
        context.on("request", lambda r: seen.requests.append(r.url))
        page.on("pageerror", lambda e: seen.errors.append(f"uncaught: {e}"))
        page.on(
            "console",
            lambda m: (
                seen.errors.append(f"console: {m.text}")
                if m.type == "error" and "Content Security Policy" in m.text
                else None
            ),
        )
        made.append(seen)
        page.goto(origin + "/")
        if user:
            sign_in(page, user)
        return seen

    yield open_page
    for seen in made:
        try:
            seen.check()
        finally:
            seen.context.close()


def sign_in(page: Any, user: str) -> None:
    page.get_by_label("User name").fill(user)
    page.get_by_role("button", name="Sign in").click()
    page.locator("#who", has_text=user).wait_for()


def screenshot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def assert_accessible(page: Any, name: str) -> None:
    """axe-core over the page as it is: no serious or critical violation (WCAG 2 A/AA rules and best practice)."""
    found = page.evaluate(
        """async () => {
            const result = await axe.run(document, {resultTypes: ["violations"]});
            return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                                nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))}));
        }"""
    )
    blocking = [v for v in found if v["impact"] in BLOCKING]
    assert not blocking, f"{name}: accessibility violations: {blocking}"
