"""The client verbs (push, stats, sweep, sessions) over the async client: input, calls, errors.

``leaseq.AsyncClient`` makes the HTTP calls; this module runs each verb
to completion (a push through ``leaseq.cli.pushing``), and turns any failure —
the service unreachable, a problem+json answer, a bad line of input — into
``CliError`` whose message is one line for the CLI to print.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpx

from leaseq import AsyncClient, RetryPolicy
from leaseq.cli import pushing
from leaseq.cli.output import CliError, one_line
from leaseq.errors import LeaseqError
from leaseq.limits import SESSION_PATTERN
from leaseq.model import (
    AllCounts,
    ApiToken,
    BulkResult,
    Counts,
    Lead,
    LeadPage,
    PushResult,
    Schedule,
    SessionSettings,
    SweepResult,
)

# A person at a terminal: a short retry over a blip, then the error.
RETRY = RetryPolicy(attempts=3, base_s=0.2, max_s=1.0)


class Service:
    """The verbs against the service at ``url``; each call runs to completion."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.token = token

    def push(
        self,
        session: str,
        lines: Iterable[str],
        *,
        payloads: bool = False,
        stream: bool = False,
        wait_for_room_s: float = 0.0,
    ) -> PushResult:
        """Push the leads of ``lines`` (JSON lines; see ``leaseq.cli.pushing``)."""
        check_session(session)

        def run(client: AsyncClient) -> Awaitable[PushResult]:
            return pushing.push(
                client,
                session,
                lines,
                describe=lambda exc: error_line(exc, self.url),
                payloads=payloads,
                stream=stream,
                wait_for_room_s=wait_for_room_s,
            )

        pushed: PushResult = self._run(run)
        return pushed

    def wait_for_all(self, ids: Iterable[int], ended: Callable[[Lead], None]) -> None:
        """Wait for every lead of ``ids`` to end, ``ended(lead)`` as each does."""
        self._run(lambda client: pushing.outcomes(client, ids, ended))

    def stats(self, session: str) -> Counts:
        check_session(session)
        counts: Counts = self._run(lambda client: client.stats(session))
        return counts

    def report(self, session: str) -> dict[str, Any]:
        """The ledger's audit of ``session``, as the service sends it."""
        check_session(session)
        found: dict[str, Any] = self._run(lambda client: client.report(session))
        return found

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

    def pause(self, session: str, for_s: float | None) -> SessionSettings:
        check_session(session)
        stored: SessionSettings = self._run(lambda client: client.pause(session, for_s))
        return stored

    def resume(self, session: str) -> SessionSettings:
        check_session(session)
        stored: SessionSettings = self._run(lambda client: client.resume(session))
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

    def retry_failed(self, session: str) -> int:
        """Queue every failed lead of ``session`` again; how many."""
        check_session(session)
        requeued: int = self._run(lambda client: client.retry_failed(session))
        return requeued

    def list_leads(self, session: str, **query: Any) -> LeadPage:
        """One page of a session's leads (``AsyncClient.list_leads``'s query)."""
        check_session(session)
        page: LeadPage = self._run(lambda client: client.list_leads(session, **query))
        return page

    def act_on_leads(
        self, verb: str, session: str, *, ids: list[int] | None, filters: dict[str, Any]
    ) -> BulkResult:
        """One bulk ``retry`` or ``cancel`` call: by ``ids`` when given, else by ``filters``."""
        check_session(session)
        chosen = {"ids": ids} if ids is not None else filters

        def call(client: AsyncClient) -> Awaitable[BulkResult]:
            if verb == "retry":
                return client.retry_leads(session, **chosen)
            return client.cancel_leads(session, **chosen)

        done: BulkResult = self._run(call)
        return done

    def create_token(
        self, role: str, sessions: str, name: str | None, expires_s: float | None
    ) -> ApiToken:
        """A new scoped token (its secret in ``token``, this once)."""
        made: ApiToken = self._run(
            lambda client: client.create_token(role, sessions, name=name, expires_s=expires_s)
        )
        return made

    def tokens(self) -> list[ApiToken]:
        listed: list[ApiToken] = self._run(lambda client: client.tokens())
        return listed

    def revoke_token(self, name: str) -> ApiToken:
        revoked: ApiToken = self._run(lambda client: client.revoke_token(name))
        return revoked

    def schedules(self) -> list[Schedule]:
        found: list[Schedule] = self._run(lambda client: client.schedules())
        return found

    def schedule(self, name: str) -> Schedule:
        check_name(name)
        found: Schedule = self._run(lambda client: client.schedule(name))
        return found

    def put_schedule(
        self, name: str, session: str, cron: str, lead: dict[str, Any], *, timezone: str
    ) -> Schedule:
        check_name(name)
        check_session(session)
        stored: Schedule = self._run(
            lambda client: client.put_schedule(name, session, cron, lead, timezone=timezone)
        )
        return stored

    def delete_schedule(self, name: str) -> None:
        check_name(name)
        self._run(lambda client: client.delete_schedule(name))

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
    cause = exc.__cause__
    while isinstance(cause, LeaseqError):  # told more on its way up (a keyed push's key)
        cause = cause.__cause__
    if isinstance(cause, httpx.TransportError):
        reason = str(cause).strip() or type(cause).__name__
        return one_line(f"cannot reach leaseq at {url}: {reason}")
    status = getattr(exc, "status", None)
    message = f"{status} {exc.code}: {exc.detail}" if status else f"{exc.code}: {exc.detail}"
    if status == 401:
        message += " (pass --token or set LEASEQ_TOKEN)"
    retry_after = getattr(exc, "retry_after_s", None)
    if exc.code == "quota_exceeded":
        wait = f"retry after {retry_after:g} s, " if retry_after else ""
        message += f" ({wait}or pass --wait-for-room SECONDS to wait for it)"
    return one_line(message)


def check_session(session: str) -> str:
    """Raise CliError unless ``session`` is a session name (a "/" would miss the route)."""
    if not re.fullmatch(SESSION_PATTERN, session):
        raise CliError(f"session {session!r}: must match {SESSION_PATTERN}")
    return session


def check_name(name: str) -> str:
    """Raise CliError unless ``name`` is a schedule's name (the pattern of session names)."""
    if not re.fullmatch(SESSION_PATTERN, name):
        raise CliError(f"schedule {name!r}: must match {SESSION_PATTERN}")
    return name


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
