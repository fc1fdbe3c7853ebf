"""``/docs`` and ``/redoc`` work offline: every asset comes from the service itself.

The HTML names no other host and each asset it names is served; in headless
Chromium with every request that is not to the service aborted, ``/docs``
renders the API's operations.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.api.app import DOCS_ASSETS
from tests.support.browser import WAIT_MS, offline
from tests.support.serving import Services

pytestmark = pytest.mark.service

TOKEN = "docs-token"
# An absolute or scheme-relative URL anywhere in a page: a host other than the service's.
ELSEWHERE = re.compile(r"(?:[a-z][a-z0-9+.-]*:)?//[^\s\"'<>)]+", re.IGNORECASE)
ASSET = re.compile(r"""(?:src|href)="([^"]+)\"""")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_page_names_no_other_host_and_its_assets_are_served(
    services: Services, database_url: str, page: str
) -> None:
    service = services.start("--sweep-interval", "3600", database_url=database_url)
    with service.client() as http:
        answer = http.get(page)
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/html")
        html = answer.text
        assert ELSEWHERE.findall(html) == []
        assets = ASSET.findall(html)
        assert assets and all(url.startswith(DOCS_ASSETS + "/") for url in assets), assets
        for url in assets:
            assert http.get(url).status_code == 200, url


def test_with_tokens_the_docs_and_their_assets_want_one(
    services: Services, database_url: str
) -> None:
    service = services.start(
        "--sweep-interval", "3600", "--token", TOKEN, database_url=database_url
    )
    with service.client() as http:
        html = http.get("/docs", headers={"Authorization": f"Bearer {TOKEN}"}).text
        [script] = [url for url in ASSET.findall(html) if url.endswith(".js")]
        for path in ("/docs", script, "/openapi.json"):
            assert http.get(path).status_code == 401, path
            authorized = http.get(path, headers={"Authorization": f"Bearer {TOKEN}"})
            assert authorized.status_code == 200, path


def test_the_docs_render_the_operations_with_no_network(
    services: Services, database_url: str, browser: Any
) -> None:
    service = services.start("--sweep-interval", "3600", database_url=database_url)
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    aborted = offline(page, service.url)
    page.goto(f"{service.url}/docs")
    page.wait_for_selector(".opblock", timeout=WAIT_MS)
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert {"/lease", "/renew", "/complete", "/sessions/{session}/leads"} <= {
        path.replace("\u200b", "")
        for path in paths  # Swagger UI breaks paths with ZWSPs
    }, paths
    assert page.locator(".title").first.inner_text().startswith("leaseq")
    assert page.locator(".errors-wrapper").count() == 0
    assert aborted == []
