"""The errors of leaseq. Each carries its stable ``code`` (docs/contract.md#error-codes); the
docstring is the message.

The service raises them from its domain and answers each with its code; the
client raises the same class for an answer with that code. Nothing here
knows HTTP beyond the ``status`` a client records on what it raises.
"""

from __future__ import annotations

from typing import Any


class LeaseqError(Exception):
    """Something went wrong in leaseq."""

    code = "error"

    def __init__(self, detail: str | None = None) -> None:
        self.detail = detail or (self.__doc__ or self.code).strip()
        # What the service answered, when the client raised this for an answer.
        self.status: int | None = None
        self.problem: dict[str, Any] | None = None
        super().__init__(self.detail)


class LeaseLost(LeaseqError):
    """The lease is no longer valid: expired, swept, re-leased, completed, cancelled or wrong token."""  # noqa: E501 (the docstring is the message)

    code = "lease_lost"

    def __init__(self, detail: str | None = None, *, reason: str | None = None) -> None:
        # Why, when the service knows more than "not valid": "max_runtime" (Flow control).
        self.reason = reason
        super().__init__(detail)


class NotFound(LeaseqError):
    """No such lead."""

    code = "not_found"


class InvalidInput(LeaseqError):
    """The input is invalid; nothing was written."""

    code = "validation_error"

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class Conflict(LeaseqError):
    """The lead is not in a status that allows this operation."""

    code = "conflict"


class Forbidden(LeaseqError):
    """The token may not do this, or not in this session."""

    code = "forbidden"


class IncompleteBody(LeaseqError):
    """The request body ended before its Content-Length (the client hung up); nothing was done."""

    code = "incomplete_body"


class QuotaExceeded(LeaseqError):
    """The push would pass the session's max_queued; none of its leads was stored: retry after retry_after_s."""  # noqa: E501 (the docstring is the message)

    code = "quota_exceeded"

    def __init__(self, detail: str | None = None, *, retry_after_s: float | None = None) -> None:
        # The seconds the service asked a producer to wait (its Retry-After) before pushing
        # again; None when it said nothing.
        self.retry_after_s = retry_after_s
        super().__init__(detail)


class Unavailable(LeaseqError):
    """The database is unavailable; try again shortly."""

    code = "unavailable"
    # A keyed push whose retries ran out: its key, to ask whether it was stored after all
    # (``Client.pushed``); None otherwise.
    idempotency_key: str | None = None


class ApiError(LeaseqError):
    """The service answered with an error that has no class of its own here."""

    code = "api_error"

    def __init__(self, detail: str | None = None, *, code: str | None = None) -> None:
        super().__init__(detail)
        if code:
            self.code = code  # the code the service answered with


class Unauthorized(ApiError):
    """The service wants a valid bearer token (--token / LEASEQ_TOKEN)."""

    code = "unauthorized"


class PayloadTooLarge(ApiError):
    """The request body is larger than the service accepts."""

    code = "payload_too_large"


def first_line(exc: BaseException) -> str:
    """An exception as one line for a person: its message's first line, else its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


# The class a client raises for each code a service answers with.
BY_CODE: dict[str, type[LeaseqError]] = {
    cls.code: cls
    for cls in (
        LeaseLost,
        NotFound,
        InvalidInput,
        Conflict,
        Forbidden,
        IncompleteBody,
        QuotaExceeded,
        Unavailable,
        Unauthorized,
        PayloadTooLarge,
    )
}
