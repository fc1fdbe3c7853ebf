"""A statement as one value: its text and its parameters, built by a typed function.

Every statement of the queue is declared twice over in one place: a function that
writes its text from constants (``_lease_next(ledger)``), and a builder whose
signature names the statement's parameters (``lease_next(*, session=…, now=…,
ledger=…)``), so mypy checks every name and type a caller binds. The builder's
own body is empty: ``statement`` makes it return a ``Statement``.

A builder's arguments are of two kinds. Those its text function takes (the
*variants*: ``ledger``, ``skip_locked``, ``lean``, ``scoped`` …) choose the text,
written once per combination and cached, so the hot path never rebuilds it. The
others are bound parameters, passed to PostgreSQL as ``%(name)s`` values; one
left out takes its default from the signature. ``now`` left ``None`` (the
database clock) is bound to ``DB_CLOCK`` (``app.store.statements.fragments``).

``REGISTRY`` holds every builder with the values each variant takes, for the
rendering of every text into ``app/store/sql/`` (``python -m app.store.render``)
and the test that keeps each text's placeholders and its builder's names equal.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple, ParamSpec

from app.store.statements.fragments import DB_CLOCK

P = ParamSpec("P")

BOTH = (True, False)  # the values of a variant that is on or off


class Statement(NamedTuple):
    """One statement to run: ``text`` as PostgreSQL gets it, ``params`` for its placeholders.

    A tuple, not a frozen dataclass: one is built per statement run, and a tuple is built in
    a fifth of the time.
    """

    name: str
    text: str
    params: Mapping[str, Any]


@dataclass(frozen=True)
class Builder:
    """A registered statement: its text per variant, and the parameters it binds."""

    name: str
    module: str
    doc: str
    text: Callable[..., str]
    variants: Mapping[str, tuple[Any, ...]]
    parameters: tuple[str, ...]


REGISTRY: dict[str, Builder] = {}


def text(name: str, **variants: Any) -> str:
    """The text of statement ``name`` in one variant, for tools that read it whole (EXPLAIN
    of every statement, the benchmarks): ``text("lease_next", ledger=True)``."""
    builder = REGISTRY[name]
    return builder.text(*(variants[variant] for variant in builder.variants))


def statement(
    text: Callable[..., str], **variants: tuple[Any, ...]
) -> Callable[[Callable[P, None]], Callable[P, Statement]]:
    """Make the decorated signature a builder of ``Statement``s whose text is ``text``'s.

    ``variants`` name the values each of ``text``'s arguments takes, for the rendering;
    every one of them is an argument of the builder too.
    """
    written = cache(text)
    chosen = tuple(inspect.signature(text).parameters)
    if set(chosen) != set(variants):
        raise TypeError(f"{text.__name__}: give the values of each variant {chosen}")

    def register(signature: Callable[P, None]) -> Callable[P, Statement]:
        name = signature.__name__
        if name in REGISTRY:
            raise TypeError(f"{name}: a statement of that name is declared already")
        declared = inspect.signature(signature).parameters
        if missing := set(chosen) - set(declared):
            raise TypeError(f"{name}: the builder does not take the variants {missing}")
        empty = inspect.Parameter.empty
        by_default = tuple((variant, declared[variant].default) for variant in chosen)
        bound = tuple(parameter for parameter in declared if parameter not in chosen)
        defaults = {
            parameter: declared[parameter].default
            for parameter in bound
            if declared[parameter].default is not empty
        }

        clocked = "now" in bound

        def build(*args: P.args, **kwargs: P.kwargs) -> Statement:
            if args:
                raise TypeError(f"{name} takes keyword arguments only")
            key = [kwargs.pop(variant, default) for variant, default in by_default]
            if clocked and kwargs.get("now") is None:
                kwargs["now"] = DB_CLOCK
            return Statement(name, written(*key), {**defaults, **kwargs} if defaults else kwargs)

        build.__name__ = build.__qualname__ = name
        build.__doc__ = signature.__doc__
        build.__module__ = signature.__module__
        REGISTRY[name] = Builder(
            name=name,
            module=signature.__module__,
            doc=inspect.cleandoc(signature.__doc__ or ""),
            text=written,
            variants=variants,
            parameters=bound,
        )
        return build

    return register
