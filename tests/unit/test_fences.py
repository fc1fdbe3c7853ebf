"""``leaseq.verify_fence`` against the vectors every client checks (the TypeScript and Go
clients' tests hold the same ones: the fence format's definition, docs/beyond.md#fences)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from leaseq import FenceInvalid, sign_fence, verify_fence

VECTORS = [
    (
        "k-2026-a",
        42,
        3,
        1796611200123,
        "1.42.3.1796611200123.-ukt_rUUIf6mjuGLPostt3_dMcVDUVxu0x7Bv1qbsLo",
    ),
    (
        "k-2026-b",
        42,
        3,
        1796611200123,
        "1.42.3.1796611200123.MsSP4KhXx7uAOYAgfFTDhA1YwONTxY4FHA2xowy7iUQ",
    ),
    (
        "k-2026-a",
        7,
        1,
        1796611260000,
        "1.7.1.1796611260000.JPhhvCbmsjdAufw1McrWEHBIoXOegoBkt9qo-qnMsHQ",
    ),
]


@pytest.mark.parametrize(("key", "lead", "attempt", "millis", "fence"), VECTORS)
def test_each_vector_verifies_and_is_what_the_service_signs(
    key: str, lead: int, attempt: int, millis: int, fence: str
) -> None:
    named = verify_fence(fence, [key])
    expires = datetime.fromtimestamp(millis / 1000, UTC)
    assert (named.lead_id, named.attempt, named.expires_at) == (lead, attempt, expires)
    assert sign_fence(lead, attempt, named.expires_at, key) == fence


def test_every_key_verifies_and_no_other() -> None:
    fence = VECTORS[1][4]
    assert verify_fence(fence, ["k-2026-a", "k-2026-b"]).lead_id == 42
    with pytest.raises(FenceInvalid):
        verify_fence(fence, ["k-2026-a"])
    with pytest.raises(FenceInvalid):
        verify_fence(fence, [])


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "1.42.3.1796611200123",
        "2" + VECTORS[0][4][1:],
        VECTORS[0][4].replace(".42.", ".042."),
        VECTORS[0][4].replace(".42.", ".-42."),
        VECTORS[0][4].replace("1.42.3.", "1.42.4."),  # another attempt keeps no signature
        VECTORS[0][4] + "=",
        VECTORS[0][4] + ".x",
        VECTORS[0][4][:-1],
    ],
)
def test_a_malformed_or_altered_fence_is_refused(bad: str) -> None:
    with pytest.raises(FenceInvalid) as refused:
        verify_fence(bad, ["k-2026-a"])
    assert refused.value.code == "fence_invalid"


def test_a_signed_expiry_keeps_its_milliseconds() -> None:
    expires = datetime(2026, 12, 7, 10, 0, 0, 123999, tzinfo=UTC)  # sub-millisecond: cut
    named = verify_fence(sign_fence(5, 2, expires, "k"), ["k"])
    assert named.expires_at == expires.replace(microsecond=123000)
