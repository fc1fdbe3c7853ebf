"""The dashboard's warnings in a real browser (headless Chromium, as the dashboard tests).

The page shows the autovacuum warning exactly when the server says
``autovacuum = off``, above everything else, as text.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.dashboard import page as dashboard_page
from tests.serving import Services
from tests.test_autovacuum import autovacuum_on
from tests.test_dashboard_browser import CHROMIUM_ARGS, WAIT_MS, chromium_path

pytestmark = pytest.mark.service


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    running = Services(tmp_path)
    yield running
    running.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield launched
        finally:
            launched.close()


def test_the_page_shows_the_autovacuum_warning_when_the_server_says_off(
    services: Services, database_url: str, browser: Any
) -> None:
    enabled = autovacuum_on(database_url)
    service = services.start("--sweep-interval", "3600", database_url=database_url)
    page = browser.new_page()
    page.goto(f"{service.url}/dashboard")
    page.wait_for_function("() => document.body.dataset.updated", timeout=WAIT_MS)
    warnings = page.locator("#warnings")
    if enabled:
        assert warnings.is_hidden()
        assert warnings.locator("li").count() == 0
    else:
        assert warnings.is_visible()
        assert warnings.locator("li").all_inner_texts() == [dashboard_page.AUTOVACUUM_OFF]
