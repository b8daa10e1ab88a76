"""A real browser for the web page's tests: Debian's ``chromium`` driven by Playwright (no
browser can be downloaded here, so ``executable_path`` is always given). Every console
error and page error is collected; a test fails on any it did not expect by name."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Playwright, ViewportSize, expect, sync_playwright

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts" / "web"

# A turn through judges and a corrector takes more than expect()'s 5 s default on CI's two
# busy cores; the pages' own waits (set_default_timeout) are 15 s too.
expect.set_options(timeout=15_000)
DESKTOP: ViewportSize = {"width": 1280, "height": 900}
PHONE: ViewportSize = {"width": 375, "height": 740}


@contextmanager
def chromium() -> Iterator[tuple[Playwright, Browser]]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no chromium at {CHROMIUM}: apt-get install chromium (make browser)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield p, browser
        finally:
            browser.close()


@dataclass
class Watched:
    """A page and everything it reported: console errors, page errors, dialogs, requests."""

    page: Page
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    allowed: list[re.Pattern[str]] = field(default_factory=list)

    def allow(self, pattern: str) -> None:
        """Expect console errors matching ``pattern`` (e.g. the browser's own line for a
        response status the test provokes on purpose)."""
        self.allowed.append(re.compile(pattern))

    def unexpected(self) -> list[str]:
        return [e for e in self.errors if not any(p.search(e) for p in self.allowed)]


def watch(page: Page) -> Watched:
    watched = Watched(page)
    page.on(
        "console",
        lambda m: watched.errors.append(f"console: {m.text}") if m.type == "error" else None,
    )
    page.on("pageerror", lambda exc: watched.errors.append(f"page error: {exc}"))

    def on_dialog(dialog: object) -> None:
        watched.dialogs.append(getattr(dialog, "message", ""))
        dialog.dismiss()  # type: ignore[attr-defined]

    page.on("dialog", on_dialog)
    page.on("request", lambda r: watched.urls.append(r.url))
    return watched


def sign_in(page: Page, url: str, key: str) -> None:
    page.goto(url + "/")
    expect(page.locator("body[data-ready=true]")).to_be_attached()
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#nav")).to_be_visible()


def shoot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
