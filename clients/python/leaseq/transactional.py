"""A push inside the producer's own transaction, through the connection it already holds.

``push_in`` runs the schema's SQL function ``leaseq_push``
(docs/contract.md#push-inside-the-producers-transaction) on the producer's connection,
inside whatever transaction is open there: the lead, its ledger row and its counts are
written by that transaction, so the lead exists if and only if it commits (an order row and
the lead that ships it, together or not at all), and waiting leases wake when it commits.
No driver of its own: it takes a DB-API 2.0 connection (psycopg, psycopg2, pg8000, Django's
``connection``), a cursor of one, or a SQLAlchemy ``Connection`` (through
``exec_driver_sql``, so SQLAlchemy keeps track of its transaction), and writes the
statement in that driver's paramstyle.

The payload becomes JSON text as the client sends it (an object; no NaN or infinity), and
no argument is converted into another type (``True`` is no priority). What only the
database judges (the session's pattern, each range, the payload's size and depth) the
function checks, raising SQLSTATE 22023 with the argument's name, through the driver's
own error class: the transaction is then aborted, as after any failed statement.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from leaseq.errors import InvalidInput
from leaseq.limits import INT32_MAX

# The function's arguments in order, each with its SQL type (a bound value is cast to it, so
# no driver's choice of type decides which function is called).
ARGUMENTS = (
    ("session", "text"),
    ("payload", "jsonb"),
    ("priority", "integer"),
    ("key", "text"),
    ("delay_s", "double precision"),
    ("max_attempts", "integer"),
)
# A driver whose module says no paramstyle (Django's connection) takes %s.
DEFAULT_PARAMSTYLE = "format"


def push_in(
    conn: Any,
    session: str,
    payload: Mapping[str, Any],
    *,
    priority: int = 0,
    key: str | None = None,
    delay_s: float = 0,
    max_attempts: int | None = None,
) -> int:
    """Push one lead in the transaction open on ``conn``; its id, or the existing lead's id
    when ``key`` is in the session already (then nothing is written).

    ``max_attempts`` None: the service's default. Raises InvalidInput, before anything is
    sent, for a payload that is not JSON or an argument of the wrong type (or an integer
    beyond an SQL integer).
    """
    values = {
        "session": _typed("session", session, str),
        "payload": _payload(payload),
        "priority": _integer("priority", priority),
        "key": None if key is None else _typed("key", key, str),
        "delay_s": _number("delay_s", delay_s),
        "max_attempts": None if max_attempts is None else _integer("max_attempts", max_attempts),
    }
    if hasattr(conn, "exec_driver_sql"):  # a SQLAlchemy Connection
        query, params = _statement(conn.dialect.loaded_dbapi.paramstyle, values)
        return int(conn.exec_driver_sql(query, params).scalar_one())
    if hasattr(conn, "cursor"):  # a DB-API connection
        cursor = conn.cursor()
        try:
            return _run(cursor, values)
        finally:
            cursor.close()
    return _run(conn, values)  # a cursor


def _statement(
    paramstyle: str, values: Mapping[str, Any]
) -> tuple[str, Sequence[Any] | dict[str, Any]]:
    """The call of ``leaseq_push`` and its parameters in a DB-API ``paramstyle``."""
    names = [name for name, _ in ARGUMENTS]
    marks: list[str]
    if paramstyle in ("format", "pyformat"):
        marks = ["%s"] * len(names)
    elif paramstyle == "qmark":
        marks = ["?"] * len(names)
    elif paramstyle == "numeric":
        marks = [f":{n}" for n in range(1, len(names) + 1)]
    elif paramstyle == "named":
        marks = [f":{name}" for name in names]
    else:
        raise ValueError(f"paramstyle {paramstyle!r} is not one of DB-API 2.0's")
    casts = ", ".join(
        f"CAST({mark} AS {sql_type})" for mark, (_, sql_type) in zip(marks, ARGUMENTS, strict=True)
    )
    query = f"SELECT leaseq_push({casts})"
    if paramstyle == "named":
        return query, {name: values[name] for name in names}
    return query, tuple(values[name] for name in names)


def _run(cursor: Any, values: Mapping[str, Any]) -> int:
    query, params = _statement(_paramstyle(cursor), values)
    cursor.execute(query, params)
    row = cursor.fetchone()
    return int(row[0])


def _paramstyle(driver_object: Any) -> str:
    """The paramstyle of the DB-API module a connection or cursor comes from."""
    module = sys.modules.get(type(driver_object).__module__.partition(".")[0])
    paramstyle = getattr(module, "paramstyle", DEFAULT_PARAMSTYLE)
    return str(paramstyle)


def _typed(field: str, value: Any, kind: type) -> Any:
    if not isinstance(value, kind):
        raise InvalidInput(field, f"must be a {kind.__name__}, not {type(value).__name__}")
    return value


def _integer(field: str, value: Any) -> int:
    """An int an SQL integer holds; what the function takes of it is for it to judge."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, f"must be an integer, not {type(value).__name__}")
    if not -INT32_MAX - 1 <= value <= INT32_MAX:
        raise InvalidInput(field, f"must be an integer from {-INT32_MAX - 1} to {INT32_MAX}")
    return value


def _number(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(field, f"must be a number of seconds, not {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:  # an int beyond any double: out of every range
        raise InvalidInput(field, "must be a number of seconds a double holds") from None


def _payload(value: Any) -> str:
    """The payload as compact JSON text; a JSON object, and JSON only (no NaN, no infinity)."""
    if not isinstance(value, Mapping):
        raise InvalidInput("payload", "must be a JSON object")
    try:
        return json.dumps(dict(value), allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidInput("payload", f"must be JSON ({exc})") from None
