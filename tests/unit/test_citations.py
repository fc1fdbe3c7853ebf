"""What the code, the tests and the documents cite exists: anchors, test files, test modules.

docs/contract.md promises that its headings are anchors and that none is renamed once
published; this holds the citing side to it. Code, tests and documents cite as
``docs/contract.md#invariant-7``; the documents also link as Markdown does,
``[…](contract.md#fleets)`` relative to themselves, or ``[…](#fleets)`` within one file.
Anchors are GitHub's: the heading in lower case, without punctuation, spaces as hyphens.

Tests are cited by path (``tests/integration/test_queue.py::test_…``) and by module
(``tests.support.serving``, ``python -m tests.chaos.chaos_worker``): each names a file
that is there, so a test moved to another tier leaves no citation behind.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Where citations are written: the two distributions, the tests, the documents, the bench.
SOURCES = ("app", "clients/python/leaseq", "tests", "docs", "bench", "migrations")
TOP_DOCUMENTS = ("README.md", "clients/python/README.md", "bench/README.md")
SUFFIXES = {".py", ".md", ".html", ".js", ".toml", ".sql", ".sh"}

CITED = re.compile(r"\bdocs/([\w./-]+?\.md)#([\w-]+)")
LINKED = re.compile(r"\]\(([^()\s#]*?\.md)?#([^()\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors(document: Path) -> frozenset[str]:
    """The anchors of a Markdown file's headings (outside code blocks), repeats numbered."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    fenced = False
    for line in document.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def sources() -> list[Path]:
    files = [ROOT / name for name in TOP_DOCUMENTS]
    for folder in SOURCES:
        files.extend(
            path
            for path in sorted((ROOT / folder).rglob("*"))
            if path.suffix in SUFFIXES and path.is_file() and "egg-info" not in str(path)
        )
    return files


def citations(path: Path) -> list[tuple[Path, str, str]]:
    """(target file, anchor, the citation as written) of each citation in ``path``."""
    text = path.read_text(errors="replace")
    found = [
        (ROOT / "docs" / name, anchor, f"docs/{name}#{anchor}")
        for name, anchor in CITED.findall(text)
    ]
    if path.suffix == ".md":
        for target, anchor in LINKED.findall(text):
            document = (path.parent / target).resolve() if target else path
            found.append((document, anchor, f"({target}#{anchor})"))
    return found


def test_every_cited_anchor_is_a_heading_of_its_document() -> None:
    broken = []
    for path in sources():
        for document, anchor, written in citations(path):
            if not document.is_file() or anchor not in anchors(document):
                broken.append(f"{path.relative_to(ROOT)}: {written}")
    assert broken == [], "\n".join(broken)


def test_the_contract_is_cited_and_its_headings_are_anchors() -> None:
    contract = ROOT / "docs" / "contract.md"
    assert {"invariant-7", "complete-and-lease", "fleets", "error-codes"} <= anchors(contract)
    cited = {anchor for path in sources() for doc, anchor, _ in citations(path) if doc == contract}
    assert len(cited) > 20


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Invariant 7", "invariant-7"),
        ("Retries and Idempotency-Key", "retries-and-idempotency-key"),
        ("Where the contract is silent: our choices", "where-the-contract-is-silent-our-choices"),
        ("Push inside the producer's transaction", "push-inside-the-producers-transaction"),
        ("`leaseq serve` and **its** workers", "leaseq-serve-and-its-workers"),
    ],
)
def test_an_anchor_is_the_heading_as_github_makes_it(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_a_missing_anchor_is_found(tmp_path: Path) -> None:
    document = tmp_path / "page.md"
    document.write_text("# Title\n\n## Two words\n\n```\n# not a heading\n```\n[a](#nowhere)\n")
    assert anchors(document) == {"title", "two-words"}
    [(target, anchor, _)] = citations(document)
    assert (target, anchor) == (document, "nowhere")


TEST_PATH = re.compile(r"\btests/[\w/]+\.py\b")
TEST_MODULE = re.compile(r"\btests(?:\.\w+)+")


def module_exists(dotted: str) -> bool:
    """``tests.a.b``: a module, a package, or a name inside a module (never a missing module
    inside a package)."""
    parts = dotted.split(".")
    path = ROOT
    for part in parts:
        if (path / f"{part}.py").is_file():
            return True  # what follows are names inside the module
        path = path / part
        if not path.is_dir():
            return False
    return (path / "__init__.py").is_file()


def test_every_cited_test_file_and_module_exists() -> None:
    missing = []
    for path in sources():
        if path == Path(__file__).resolve():
            continue  # its examples of missing ones
        text = path.read_text(errors="replace")
        missing += [
            f"{path.relative_to(ROOT)}: {cited}"
            for cited in TEST_PATH.findall(text)
            if not (ROOT / cited).is_file()
        ]
        missing += [
            f"{path.relative_to(ROOT)}: {cited}"
            for cited in TEST_MODULE.findall(text)
            if not module_exists(cited)
        ]
    assert missing == [], "\n".join(missing)


@pytest.mark.parametrize(
    ("dotted", "exists"),
    [
        ("tests.support.serving", True),
        ("tests.support.serving.Services", True),
        ("tests.support", True),
        ("tests.serving", False),
        ("tests.api.proxy", False),
        ("tests.test_queue", False),
    ],
)
def test_a_module_is_found_or_missed(dotted: str, exists: bool) -> None:
    assert module_exists(dotted) is exists
