"""The docs site builds with ``mkdocs build --strict`` (no broken link or anchor), offline,
and its reference pages name every setting, route, command and metric there is.

The reference is made by ``tools/docs_site.py`` from the code at build time, so these
tests check what it makes against the code itself, and that a page the navigation does
not list, or a link that leaves ``docs/``, never breaks the build.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.api.app import create_app
from app.config import Settings
from leaseq.cli import root
from tests.support.system import required
from tools import docs_site

ROOT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for the module with ``--strict``."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        message = "mkdocs-material is not installed: pip install -e '.[docs]'"
        if required():
            pytest.fail(message)
        pytest.skip(message)
    folder = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return folder


@pytest.mark.service  # builds the site with mkdocs, a process of its own
def test_the_site_has_its_four_parts_and_the_readme_as_its_home(site: Path) -> None:
    home = (site / "index.html").read_text()
    assert "One lead" in home and "How a lead moves" in home
    for part in ("Tutorials", "How-to guides", "Reference", "Explanation"):
        assert part in home
    for language in ("python", "typescript", "go", "curl"):
        assert (site / "tutorials" / f"{language}.html").is_file()


@pytest.mark.service  # builds the site with mkdocs, a process of its own
def test_every_setting_is_in_the_configuration_reference(site: Path) -> None:
    page = (site / "reference" / "configuration.html").read_text()
    missing = [name for name in Settings.model_fields if f"LEASEQ_{name.upper()}" not in page]
    assert missing == []


@pytest.mark.service  # builds the site with mkdocs, a process of its own
def test_every_route_is_in_the_api_reference(site: Path) -> None:
    page = (site / "reference" / "api.html").read_text()
    document = create_app(Settings(database_url="postgresql://unused")).openapi()
    ids = [
        operation["operationId"]
        for methods in document["paths"].values()
        for operation in methods.values()
        if isinstance(operation, dict) and "operationId" in operation
    ]
    assert len(ids) > 30
    assert [found for found in ids if found not in page] == []


@pytest.mark.service  # builds the site with mkdocs, a process of its own
def test_every_command_is_in_the_cli_reference(site: Path) -> None:
    page = (site / "reference" / "cli.html").read_text()
    group = root.command_tree()
    paths = [" ".join(path) for path, _ in docs_site._commands(group, ["leaseq"])]
    assert {"leaseq serve", "leaseq report", "leaseq sessions set", "leaseq docs"} <= set(paths)
    assert [path for path in paths if f">{path}<" not in page] == []


@pytest.mark.service  # builds the site with mkdocs, a process of its own
def test_the_sql_function_and_the_metrics_are_read_from_the_code(site: Path) -> None:
    sql = re.sub(r"<[^>]+>", "", (site / "reference" / "sql.html").read_text())  # its text
    assert "leaseq_push(" in sql and ") RETURNS bigint" in sql
    metrics = (site / "reference" / "metrics.html").read_text()
    for name in ("leaseq_leases_total", "leaseq_leads", "leaseq_oldest_available_age_seconds"):
        assert name in metrics


def test_a_page_the_nav_does_not_list_joins_the_part_its_folder_names() -> None:
    nav: list[object] = [
        {"Home": "index.md"},
        {"How-to guides": ["guides/install.md"]},
        {"Explanation": ["design.md"]},
    ]
    pages = ["index.md", "guides/install.md", "guides/new.md", "design.md", "beyond.md"]
    docs_site.with_every_page(nav, [*pages, "tutorials/rust.md"])
    assert nav[1] == {"How-to guides": ["guides/install.md", "guides/new.md"]}
    assert nav[2] == {"Explanation": ["design.md", "beyond.md"]}
    assert nav[3] == {"Tutorials": ["tutorials/rust.md"]}


def test_links_are_the_sites() -> None:
    page = "guides/x.md"
    source = ROOT / "docs" / page
    markdown = (
        "[design](../design.md#migrations) [home](../../README.md#quick-start) "
        "[code](../../app/config.py) [`app/config.py`](../../app/config.py) "
        "[web](https://example.com)\n```\n[kept](../../app/config.py)\n```\n"
    )
    assert docs_site.site_links(markdown, source, page) == (
        "[design](../design.md#migrations) [home](../index.md#quick-start) "
        "code (`app/config.py`) `app/config.py` "
        "[web](https://example.com)\n```\n[kept](../../app/config.py)\n```\n"
    )
    readme = "[install](docs/guides/install.md) [site](docs/)"
    assert docs_site.site_links(readme, ROOT / "README.md", "index.md") == (
        "[install](guides/install.md) [site](index.md)"
    )


def test_code_that_cites_a_document_links_it() -> None:
    cited = "see docs/design.md#group-commit and docs/scaling.md"
    assert docs_site.linked(cited, "reference/configuration.md") == (
        "see [docs/design.md#group-commit](../design.md#group-commit) and "
        "[docs/scaling.md](../scaling.md)"
    )


def test_leaseq_docs_says_how_to_read_the_site() -> None:
    said = CliRunner().invoke(root.app, ["docs"])
    assert said.exit_code == 0, said.output
    assert "mkdocs serve" in said.output and str(ROOT) in said.output
