"""Fences: a lease named and signed by the service, which a writer downstream checks offline.

A lease's ``fence`` is ``1.<lead>.<attempt>.<expires_at_unix_ms>.<sig>``: ``sig`` is the
unpadded base64url HMAC-SHA256, keyed by a key's UTF-8 bytes, of the text before its last
dot (the same format, and the same test vectors, in the TypeScript and Go clients). The
service signs with the first of ``LEASEQ_FENCE_KEYS``; every key in the list verifies, so
a rotation puts the new key first and keeps the old one until the old key's last lease
has expired.

A worker hands its lease's fence to what it writes to. The writer calls
``verify_fence(fence, keys)`` (no database, no service): a fence no key signed raises
``FenceInvalid``; a valid one names the lead and its attempt, and the writer refuses a write
whose attempt is below the highest it has stored for that lead (a stale holder's). Inside
the same PostgreSQL, ``SELECT leaseq_fence_current(fence)`` says whether that lease is the
lead's current one by the database's clock (docs/beyond.md#fences).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from leaseq.errors import LeaseqError

VERSION = "1"
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,17}")
_SIGNATURE = re.compile(r"[A-Za-z0-9_-]{43}")  # 32 bytes, base64url without padding
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


class FenceInvalid(LeaseqError):
    """The fence is malformed, of an unknown version, or signed by none of the keys given."""

    code = "fence_invalid"


@dataclass(frozen=True, slots=True)
class Fence:
    """What a valid fence names: the lead, the lease's attempt, and its expiry when signed
    (a renewal's answer carries a fence with the new expiry)."""

    lead_id: int
    attempt: int
    expires_at: datetime


def _signature(body: str, key: str) -> str:
    digest = hmac.new(key.encode(), body.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def sign_fence(lead_id: int, attempt: int, expires_at: datetime, key: str) -> str:
    """The fence of a lease, signed with ``key`` (the service's; a test's)."""
    millis = (expires_at - _EPOCH) // _MS
    body = f"{VERSION}.{lead_id}.{attempt}.{millis}"
    return f"{body}.{_signature(body, key)}"


def verify_fence(fence: str, keys: Sequence[str]) -> Fence:
    """The lead, attempt and expiry ``fence`` names, when one of ``keys`` signed it.

    Raises FenceInvalid otherwise. Every key is compared, each in constant time, so the
    time taken says nothing of which matched. An expired fence still verifies: comparing
    ``expires_at`` with a clock is the caller's choice.
    """
    parts = fence.split(".") if isinstance(fence, str) else []
    if len(parts) != 5:
        raise FenceInvalid("a fence is five parts separated by dots")
    version, lead, attempt, expires, signature = parts
    if version != VERSION:
        raise FenceInvalid(f"unknown fence version {version[:20]!r}")
    numbers = (lead, attempt, expires)
    if not all(_DECIMAL.fullmatch(n) for n in numbers) or not _SIGNATURE.fullmatch(signature):
        raise FenceInvalid(
            "a fence's lead, attempt and expiry are decimal integers, its signature base64url"
        )
    if not keys:
        raise FenceInvalid("no key to verify the fence with")
    body = fence.rpartition(".")[0]
    matched = False
    for key in keys:
        matched = hmac.compare_digest(_signature(body, key), signature) or matched
    if not matched:
        raise FenceInvalid("the fence's signature matches none of the keys")
    if int(lead) < 1 or not 1 <= int(attempt) < 2**31:
        raise FenceInvalid("a fence's lead and attempt are positive")
    return Fence(int(lead), int(attempt), _EPOCH + int(expires) * _MS)
