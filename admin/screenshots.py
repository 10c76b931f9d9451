"""The page as a browser showed it: a full-page Chromium screenshot of a stored capture,
taken offline.

Chromium is handed the capture as the answer to its one navigation and nothing else:
every other request (images, styles, scripts, frames, a second navigation) is aborted
before it leaves, scripts are off, and whatever might go around the route meets a proxy
that does not exist. So the pirate never learns that its page was looked at, and the
picture shows only what was stored.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

from playwright.sync_api import Browser, FloatRect, Playwright, Route, sync_playwright
from playwright.sync_api import Error as PlaywrightError

#: Width of the window the page is laid out in; the height is the page's own.
WIDTH = 1280
#: Pixels of height at most (a whole book would be a picture of kilometres).
MAX_HEIGHT = 16_000
#: Milliseconds the capture has to load and be shot.
TIMEOUT_MS = 20_000
#: No sandbox (run as the admin's user, often root in containers), no background
#: fetches, every connection not served by the route sent to a proxy on the discard port.
OFFLINE_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--proxy-server=127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
)


def chromium() -> Path:
    """Debian's Chromium, or the build ``COPYTRACK_CHROMIUM`` names (as the crawler's)."""
    return Path(os.environ.get("COPYTRACK_CHROMIUM") or "/usr/bin/chromium")


class OfflineScreenshots:
    """One browser for a bundle's screenshots: ``with OfflineScreenshots() as shoot:``,
    then ``shoot(raw, url, content_type)`` per capture."""

    def __init__(self) -> None:
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None

    def __enter__(self) -> OfflineScreenshots:
        self._playwright = sync_playwright().start()
        self._browser = self._playwright.chromium.launch(
            executable_path=str(chromium()), headless=True, args=list(OFFLINE_ARGS)
        )
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._browser is not None:
            self._browser.close()
        if self._playwright is not None:
            self._playwright.stop()

    def __call__(self, raw: bytes, url: str, content_type: str) -> bytes | None:
        """A PNG of the capture laid out at WIDTH pixels; None for what is no HTML page."""
        if not content_type.lower().startswith(("text/html", "application/xhtml")):
            return None
        assert self._browser is not None, "use OfflineScreenshots in a with block"
        context = self._browser.new_context(
            java_script_enabled=False,
            service_workers="block",
            viewport={"width": WIDTH, "height": 900},
        )
        served = False

        def serve(route: Route) -> None:
            nonlocal served
            asked = route.request
            if not served and asked.is_navigation_request() and asked.frame == page.main_frame:
                served = True
                route.fulfill(status=200, body=raw, headers={"Content-Type": content_type})
            else:
                route.abort("blockedbyclient")

        try:
            page = context.new_page()
            page.route("**/*", serve)
            page.goto(url, wait_until="load", timeout=TIMEOUT_MS)
            height = page.evaluate("document.documentElement.scrollHeight")
            clip: FloatRect = {"x": 0, "y": 0, "width": WIDTH, "height": min(height, MAX_HEIGHT)}
            return page.screenshot(full_page=True, clip=clip, type="png", timeout=TIMEOUT_MS)
        except PlaywrightError:
            return None  # the bundle says a screenshot is missing
        finally:
            context.close()
