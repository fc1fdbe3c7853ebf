"""Headless Chromium (the system's, driven by Playwright) for the tests of the service's pages.

Chromium comes from Debian's ``chromium`` package (``apt-get install -y
chromium``), never ``playwright install``; without it the browser tests skip
(``tests.support.system``). ``offline`` makes a page fail every request that does not
go to the service, as on a machine with no network.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WAIT_MS = 15_000


@contextmanager
def chromium(executable: str) -> Iterator[Any]:
    """A headless Chromium, closed afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield launched
        finally:
            launched.close()


def requests_of(page: Any) -> list[str]:
    """Every URL the page asks for, from now on."""
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    return asked


def offline(page: Any, service_url: str) -> list[str]:
    """Abort every request of ``page`` that is not to ``service_url``; returns those aborted."""
    aborted: list[str] = []

    def route(route: Any) -> None:
        url = route.request.url
        if url == service_url or url.startswith(service_url + "/"):
            route.continue_()
        else:
            aborted.append(url)
            route.abort("internetdisconnected")

    page.route("**/*", route)
    return aborted
