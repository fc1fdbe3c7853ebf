"""Every statement is rendered whole into app/store/sql/, and each builder binds exactly the
parameters its text names."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from app.store import render
from app.store.statements import REGISTRY

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
        "now": None,
    }
    swept = statements.sweep(limit=10, now=None, ledger=False, scoped=False)
    assert swept.params == {"session": None, "limit": 10, "now": None}


def test_no_module_outside_the_store_writes_placeholders() -> None:
    """Bound parameters are named in app/store alone (the builders)."""
    outside = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "app").rglob("*.py")
        if "store" not in path.relative_to(ROOT / "app").parts and "%(" in path.read_text()
    ]
    assert outside == []
