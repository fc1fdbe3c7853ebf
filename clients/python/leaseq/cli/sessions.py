"""``leaseq sessions set`` and ``leaseq sessions show``: a session's weight, cap and rate.

``set`` changes only the settings it is given (it reads the others first) and
``none`` lifts a limit; ``show NAME`` shows one session's settings beside what
it holds, ``show`` every session the dashboard lists. ``retry-failed NAME``
queues every failed lead of a session again. ``pause NAME [--for 10m]`` holds back
every lease of a session that begins after it answers; ``resume NAME`` ends it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from leaseq.cli.output import EXIT_USAGE, fail, one_line_errors, out, plural, say
from leaseq.cli.root import ServiceUrl, Token, app
from leaseq.cli.service import Service, check_session
from leaseq.cli.verbs import age_text
from leaseq.model import Counts, SessionSettings
from leaseq.timefmt import parse_duration, rfc3339

sessions = typer.Typer(
    help="A session's weight in a shared pool of workers, its cap and its rate.",
    no_args_is_help=True,
)
app.add_typer(sessions, name="sessions")

NONE = "none"
# Rates as people write them: a number of leases per second, minute or hour.
PER = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hour": 3600.0}
_RATE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?:/\s*([a-z]+))?\s*")


def parse_rate(text: str) -> float | None:
    """``5/s``, ``300/min``, ``2/h`` or ``5`` (per second) as leases per second; ``none``: None.

    Raises ValueError.
    """
    if text.strip().lower() == NONE:
        return None
    found = _RATE.fullmatch(text.lower())
    if found is None or (found[2] is not None and found[2] not in PER):
        raise ValueError(f"--rate {text!r}: write N/s, N/min or N/h (or none)")
    return float(found[1]) / PER[found[2] or "s"]


def _count(flag: str, text: str) -> int | None:
    """A whole number, or ``none``. Raises ValueError."""
    if text.strip().lower() == NONE:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{flag} {text!r}: a whole number, or none") from None


def changed(
    current: SessionSettings,
    *,
    weight: float | None,
    max_leased: str | None,
    rate: str | None,
    burst: str | None,
    max_per_key: str | None = None,
    max_runtime: str | None = None,
    max_queued: str | None = None,
) -> SessionSettings:
    """``current`` with the flags given applied (a rate lifted takes its burst along).

    Raises ValueError for a flag that does not parse.
    """
    update: dict[str, Any] = {}
    if weight is not None:
        update["weight"] = weight
    if max_leased is not None:
        update["max_leased"] = _count("--max-leased", max_leased)
    if rate is not None:
        update["rate_per_s"] = parse_rate(rate)
        if update["rate_per_s"] is None:
            update["burst"] = None
    if burst is not None:
        update["burst"] = _count("--burst", burst)
    if max_per_key is not None:
        update["max_leased_per_key"] = _count("--max-per-key", max_per_key)
    if max_runtime is not None:
        update["max_runtime_s"] = _runtime(max_runtime)
    if max_queued is not None:
        update["max_queued"] = _count("--max-queued", max_queued)
    return dataclasses.replace(current, **update)


def _runtime(text: str) -> int | None:
    """A maximum runtime in whole seconds (``90s``, ``30m``, ``2h``), or ``none``."""
    if text.strip().lower() == NONE:
        return None
    try:
        seconds = parse_duration(text)
    except ValueError:
        raise ValueError(f"--max-runtime {text!r}: a duration such as 30m, or none") from None
    if not seconds.is_integer():
        raise ValueError(f"--max-runtime {text!r}: whole seconds")
    return int(seconds)


def describe(settings: SessionSettings) -> str:
    """One line: ``weight 3, max leased 10, rate 5/s (burst 5)``."""
    cap = "no cap" if settings.max_leased is None else f"max leased {settings.max_leased}"
    if settings.rate_per_s is None:
        rate = "no rate"
    else:
        burst = "1 s worth" if settings.burst is None else settings.burst
        rate = f"rate {settings.rate_per_s:g}/s (burst {burst})"
    line = f"weight {settings.weight:g}, {cap}, {rate}"
    if settings.max_leased_per_key is not None:
        line += f", max {settings.max_leased_per_key} per key"
    if settings.max_runtime_s is not None:
        line += f", max runtime {settings.max_runtime_s} s"
    if settings.max_queued is not None:
        line += f", max queued {settings.max_queued}"
    if settings.paused_until is not None:
        line += f", paused until {rfc3339(settings.paused_until)}"
    return line


@sessions.command(
    "set",
    epilog=(
        "Three times the share of the others, at most 10 leased at once, 5 leases a second:  "
        "leaseq sessions set tenant-a --weight 3 --max-leased 10 --rate 5/s\n\n"
        "Lift the cap:  leaseq sessions set tenant-a --max-leased none"
    ),
)
def set_settings(
    name: str = typer.Argument(..., metavar="SESSION"),
    weight: float | None = typer.Option(
        None, "--weight", metavar="W", help="Its share against the other sessions (default 1)."
    ),
    max_leased: str | None = typer.Option(
        None, "--max-leased", metavar="N|none", help="At most N of its leads leased at once."
    ),
    rate: str | None = typer.Option(
        None, "--rate", metavar="N/s|N/min|none", help="At most this many leases granted."
    ),
    burst: str | None = typer.Option(
        None,
        "--burst",
        metavar="N|none",
        help="Leases granted at once after a quiet time (default: one second's worth).",
    ),
    max_per_key: str | None = typer.Option(
        None,
        "--max-per-key",
        metavar="N|none",
        help="At most N leads of one concurrency_key leased at once.",
    ),
    max_runtime: str | None = typer.Option(
        None,
        "--max-runtime",
        metavar="30m|none",
        help="The default maximum runtime of its leads: no renewal past it.",
    ),
    max_queued: str | None = typer.Option(
        None,
        "--max-queued",
        metavar="N|none",
        help="At most N of its leads queued: a push past it is refused (429, Retry-After).",
    ),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Change a session's weight, cap or rate; the settings not given stay."""
    service = Service(url, token)
    with one_line_errors():
        check_session(name)
        current = service.settings(name)
        try:
            wanted = changed(
                current,
                weight=weight,
                max_leased=max_leased,
                rate=rate,
                burst=burst,
                max_per_key=max_per_key,
                max_runtime=max_runtime,
                max_queued=max_queued,
            )
        except ValueError as exc:
            fail(str(exc), EXIT_USAGE)
        stored = service.put_settings(name, wanted)
    say(f"{name}: {describe(stored)}")


@sessions.command(
    "show",
    epilog="One session:  leaseq sessions show tenant-a\n\nEvery session:  leaseq sessions show",
)
def show(
    name: str | None = typer.Argument(None, metavar="[SESSION]"),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Show a session's settings beside what it holds (every session's, without a name)."""
    service = Service(url, token)
    with one_line_errors():
        if name is not None:
            check_session(name)
            rows = [_row(name, service.settings(name), service.stats(name))]
        else:
            rows = [_dashboard_row(view) for view in service.dashboard()["sessions"]]
    if as_json:
        typer.echo(json.dumps(rows if name is None else rows[0]))
        return
    table = Table(
        "session",
        "weight",
        "leased",
        "max leased",
        "rate/s",
        "burst",
        "oldest available",
        box=None,
        header_style="bold",
    )
    for column in table.columns[1:]:
        column.justify = "right"
    for row in rows:
        table.add_row(
            escape(row["session"]),
            f"{row['weight']:g}",
            str(row["leased"]),
            _or_dash(row["max_leased"]),
            _or_dash(row["rate_per_s"]),
            _or_dash(row["burst"]),
            age_text(row["oldest_available_age_s"]),
        )
    out.print(table)


def _row(name: str, settings: SessionSettings, counts: Counts) -> dict[str, Any]:
    paused = settings.paused_until
    return {
        "session": name,
        **dataclasses.asdict(settings),
        "paused_until": None if paused is None else rfc3339(paused),
        "leased": counts.leased,
        "oldest_available_age_s": counts.oldest_available_age_s,
    }


def _dashboard_row(view: dict[str, Any]) -> dict[str, Any]:
    names = ("weight", "max_leased", "rate_per_s", "burst", "leased", "oldest_available_age_s")
    return {"session": view["name"], **{key: view[key] for key in names}}


def _or_dash(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


@sessions.command(
    "retry-failed", epilog="Replay a session's dead letters:  leaseq sessions retry-failed crawl"
)
def retry_failed(
    name: str = typer.Argument(..., metavar="SESSION"),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Queue every failed lead of a session again (each lease of one is a new attempt)."""
    with one_line_errors():
        requeued = Service(url, token).retry_failed(name)
    say(f"{name}: {plural(requeued, 'failed lead')} queued again")


@sessions.command(
    "pause",
    epilog=(
        "Until resumed:  leaseq sessions pause crawl\n\n"
        "For ten minutes:  leaseq sessions pause crawl --for 10m"
    ),
)
def pause(
    name: str = typer.Argument(..., metavar="SESSION"),
    for_: str | None = typer.Option(
        None, "--for", metavar="10m", help="End the pause by itself after this long."
    ),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Lease none of a session's leads (the leases held go on) until resumed or --for ends."""
    with one_line_errors():
        check_session(name)
        try:
            for_s = None if for_ is None else parse_duration(for_)
        except ValueError as exc:
            fail(f"--for: {exc}", EXIT_USAGE)
        stored = Service(url, token).pause(name, for_s)
    say(f"{name}: {describe(stored)}")


@sessions.command("resume", epilog="Lease again:  leaseq sessions resume crawl")
def resume(
    name: str = typer.Argument(..., metavar="SESSION"),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """End a session's pause (an operator's, or a worker's throttle)."""
    with one_line_errors():
        check_session(name)
        stored = Service(url, token).resume(name)
    say(f"{name}: {describe(stored)}")
