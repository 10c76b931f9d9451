"""Debian's Chromium for the security tests that need a real browser (marked ``slow``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.admin_seed import PASSWORD
from tests.test_admin_browser import CHROMIUM, CHROMIUM_ARGS


def in_chromium(test: Callable[..., None]) -> Callable[..., None]:
    """Mark ``test`` as one that drives Chromium: slow, and skipped where there is none."""
    needs = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium")
    return pytest.mark.slow(needs(test))


@contextmanager
def chromium_tab() -> Iterator[Any]:
    """A tab of a fresh Chromium (playwright's Page), closed on the way out."""
    playwright = pytest.importorskip("playwright.sync_api", reason="needs playwright")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser.new_page()
        finally:
            browser.close()


def sign_in(tab: Any, base: str, name: str) -> None:
    """Sign ``name`` in (password ``PASSWORD``) at the admin on ``base``."""
    tab.goto(f"{base}/login")
    tab.fill("input[name=name]", name)
    tab.fill("input[name=password]", PASSWORD)
    tab.click("button[type=submit]")
    tab.wait_for_url(f"{base}/")
