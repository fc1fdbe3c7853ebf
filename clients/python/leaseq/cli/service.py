"""The client verbs (push, stats, sweep, sessions) over ``leaseq.client``: input, calls, errors.

``leaseq.client.AsyncClient`` makes the HTTP calls; this module reads leads from
JSON lines, runs each verb to completion, and turns any failure — the
service unreachable, a problem+json answer, a bad line of input — into
``CliError`` whose message is one line for the CLI to print.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

import httpx

from leaseq import AsyncClient, RetryPolicy
from leaseq.cli.output import CliError, one_line
from leaseq.errors import LeaseqError
from leaseq.limits import MAX_PUSH_BATCH, SESSION_PATTERN
from leaseq.model import AllCounts, Counts, NewLead, PushResult, SessionSettings, SweepResult

# A person at a terminal: a short retry over a blip, then the error.
RETRY = RetryPolicy(attempts=3, base_s=0.2, max_s=1.0)
LEAD_FIELDS = frozenset(field.name for field in dataclasses.fields(NewLead))


class Service:
    """The verbs against the service at ``url``; each call runs to completion."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.token = token

    def push(self, session: str, lines: Iterable[str]) -> PushResult:
        """Push the leads of ``lines`` (JSON lines) in batches of up to 1,000."""
        check_session(session)
        ids: list[int] = []
        created = duplicates = 0

        async def run(client: AsyncClient) -> None:
            nonlocal created, duplicates
            for batch in batches(lines):
                answer = await client.push(session, batch)
                ids.extend(answer.ids)
                created += answer.created
                duplicates += answer.duplicates

        try:
            self._run(run)
        except CliError as exc:
            pushed = f" ({len(ids)} leads were pushed before it)" if ids else ""
            raise CliError(f"{exc}{pushed}") from None
        return PushResult(ids=ids, created=created, duplicates=duplicates)

    def stats(self, session: str) -> Counts:
        check_session(session)
        counts: Counts = self._run(lambda client: client.stats(session))
        return counts

    def stats_all(self) -> AllCounts:
        counts: AllCounts = self._run(lambda client: client.stats_all())
        return counts

    def settings(self, session: str) -> SessionSettings:
        check_session(session)
        settings: SessionSettings = self._run(lambda client: client.settings(session))
        return settings

    def put_settings(self, session: str, settings: SessionSettings) -> SessionSettings:
        check_session(session)
        stored: SessionSettings = self._run(lambda client: client.put_settings(session, settings))
        return stored

    def dashboard(self) -> dict[str, Any]:
        """What the dashboard shows: ``GET /dashboard/data``."""
        data: dict[str, Any] = self._run(lambda client: client.dashboard())
        return data

    def sweep(self, session: str | None) -> SweepResult:
        """Sweep one session, or every session when ``session`` is None."""
        if session is None:
            result: SweepResult = self._run(lambda client: client.sweep_all())
        else:
            check_session(session)
            result = self._run(lambda client: client.sweep(session))
        return result

    def _run(self, call: Any) -> Any:
        async def main() -> Any:
            async with AsyncClient(self.url, token=self.token, retry_policy=RETRY) as client:
                return await call(client)

        try:
            return asyncio.run(main())
        except LeaseqError as exc:
            raise CliError(error_line(exc, self.url)) from None


def error_line(exc: LeaseqError, url: str) -> str:
    """One line for a failed call: why the service was unreachable, or its problem answer."""
    if isinstance(exc.__cause__, httpx.TransportError):
        reason = str(exc.__cause__).strip() or type(exc.__cause__).__name__
        return one_line(f"cannot reach leaseq at {url}: {reason}")
    status = getattr(exc, "status", None)
    message = f"{status} {exc.code}: {exc.detail}" if status else f"{exc.code}: {exc.detail}"
    if status == 401:
        message += " (pass --token or set LEASEQ_TOKEN)"
    return one_line(message)


def check_session(session: str) -> str:
    """Raise CliError unless ``session`` is a session name (a "/" would miss the route)."""
    if not re.fullmatch(SESSION_PATTERN, session):
        raise CliError(f"session {session!r}: must match {SESSION_PATTERN}")
    return session


def lead_from_line(text: str, line_number: int) -> dict[str, Any] | None:
    """A lead from one line of JSON: a lead object, or any other object taken as the payload.

    A lead object has an object ``payload`` and no keys but a lead's. Blank
    lines give None. Raises CliError.
    """
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CliError(f"line {line_number}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise CliError(f"line {line_number}: expected a JSON object, got {type(value).__name__}")
    if isinstance(value.get("payload"), dict) and value.keys() <= LEAD_FIELDS:
        return value
    return {"payload": value}


def batches(lines: Iterable[str], size: int = MAX_PUSH_BATCH) -> Iterator[list[dict[str, Any]]]:
    """Leads from JSON lines in batches of up to ``size``; raises CliError at a bad line."""
    batch: list[dict[str, Any]] = []
    for number, text in enumerate(lines, start=1):
        lead = lead_from_line(text, number)
        if lead is None:
            continue
        batch.append(lead)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def id_ranges(ids: Iterable[int]) -> str:
    """Distinct ids as compact ranges: ``1-3, 7, 9-10``."""
    parts: list[str] = []
    start = previous = None
    for lead_id in sorted(set(ids)):
        if previous is not None and lead_id == previous + 1:
            previous = lead_id
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = lead_id
    if start is not None:
        parts.append(str(start) if start == previous else f"{start}-{previous}")
    return ", ".join(parts)
