"""Every statement is rendered whole into app/store/sql/, and each builder binds exactly the
parameters its text names."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from app.store import render
from app.store.statements import REGISTRY
from app.store.statements._build import statement

ROOT = Path(__file__).resolve().parents[2]


def test_the_rendered_statements_are_in_step_with_the_code() -> None:
    stale = render.out_of_step()
    assert not stale, f"{', '.join(stale)} out of step with the code: run `{render.COMMAND}`"


def test_every_variant_is_rendered() -> None:
    written = "".join(path.read_text() for path in render.SQL_DIR.glob("*.sql"))
    names = re.findall(r"^-- name: (\w+)", written, re.M)
    expected = sum(
        len(list(itertools.product(*builder.variants.values()))) for builder in REGISTRY.values()
    )
    assert len(names) == expected and set(names) == set(REGISTRY)


def test_each_builder_binds_the_placeholders_of_its_text() -> None:
    for builder in REGISTRY.values():
        named: set[str] = set()
        for values in itertools.product(*builder.variants.values()):
            placeholders = set(re.findall(r"%\((\w+)\)s", builder.text(*values)))
            assert placeholders <= set(builder.parameters), (builder.name, values)
            named |= placeholders
        assert named == set(builder.parameters), builder.name


def test_every_text_is_short_enough_for_psycopgs_cache_of_converted_statements() -> None:
    """psycopg converts the placeholders of a longer text again on every call."""
    import psycopg._queries

    from app.store.pool import STATEMENT_CACHE_BYTES

    assert psycopg._queries.MAX_CACHED_STATEMENT_LENGTH >= STATEMENT_CACHE_BYTES
    for builder in REGISTRY.values():
        for values in itertools.product(*builder.variants.values()):
            assert len(builder.text(*values).encode()) <= STATEMENT_CACHE_BYTES, builder.name


def test_a_builder_returns_its_text_and_parameters() -> None:
    from app.store import statements

    built = statements.renew_many(ids=[1], tokens=["t"], ttls=[5.0], checkpoints=[None], now=None)
    assert built.name == "renew_many"
    assert (
        built.text
        is statements.renew_many(ids=[], tokens=[], ttls=[], checkpoints=[], now=None).text
    )
    assert dict(built.params) == {
        "ids": [1],
        "tokens": ["t"],
        "ttls": [5.0],
        "checkpoints": [None],
        "session": None,  # a group across sessions: not routed (the default)
        "now": "now",  # the database clock: PostgreSQL reads 'now' as the transaction's start
    }
    swept = statements.sweep(limit=10, now=None, ledger=False, scoped=False)
    # ledger_by_row: on a Citus cluster the ledger's row trigger writes the row (the default:
    # not, the statement's own CTE, when the ledger is on); notify_ended: on a cluster the
    # statement sends the NOTIFY of the watched leads it ended (the default: the trigger does)
    assert swept.params == {
        "session": None,
        "limit": 10,
        "now": "now",
        "ledger_by_row": False,
        "notify_ended": False,
    }


def test_no_module_outside_the_store_writes_placeholders() -> None:
    """Bound parameters are named in app/store alone (the builders)."""
    outside = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "app").rglob("*.py")
        if "store" not in path.relative_to(ROOT / "app").parts and "%(" in path.read_text()
    ]
    assert outside == []


def test_no_module_outside_the_store_runs_text_or_binds_a_dict() -> None:
    """Outside app/store a statement is run as a built ``Statement``: ``rows(`` or
    ``execute(`` given a string or a dict literal, or a ``params`` dict put together, is
    the old way, text and parameters apart."""
    by_hand = re.compile(
        r"\b(?:rows|execute)\(\s*(?:[rf]?[\"'{]|[^()]*?,\s*(?:[rf]?[\"'{]|dict\())"
        r"|\bparams\s*(?::[^=\n]+)?=\s*(?:\{|dict\()"
    )
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in (ROOT / "app").rglob("*.py")
        if "store" not in path.relative_to(ROOT / "app").parts
        for match in by_hand.finditer(path.read_text())
    ]
    assert found == []


def test_a_second_statement_of_a_name_is_refused() -> None:
    def get() -> None:
        """A second ``get``: ``Statement.name`` and the rendered files name one statement."""

    with pytest.raises(TypeError, match="declared already"):
        statement(lambda: "SELECT 1")(get)
