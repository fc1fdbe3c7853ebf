"""Domain errors. Each carries the stable ``code`` of SPEC; the docstring is the message.

This module knows nothing of HTTP: the API maps ``code`` to a status.
"""

from __future__ import annotations


class LeaseqError(Exception):
    """Something went wrong in leaseq."""

    code = "error"

    def __init__(self, detail: str | None = None) -> None:
        self.detail = detail or (self.__doc__ or self.code).strip()
        super().__init__(self.detail)


class LeaseLost(LeaseqError):
    """The lease is no longer valid: expired, swept, re-leased, completed, cancelled or wrong token."""  # noqa: E501 (the docstring is the message)

    code = "lease_lost"


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


class Unavailable(LeaseqError):
    """The database is unavailable; try again shortly."""

    code = "unavailable"
