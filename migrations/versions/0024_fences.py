"""Fences: ``leaseq_fence_current(fence)``, true only while the lease a fence names is its
lead's current one by the database's clock.

A fence (docs/beyond.md#fences) is ``1.<lead>.<attempt>.<expires_at_unix_ms>.<sig>``, its
``sig`` the unpadded base64url HMAC-SHA256 of the text before it, keyed by one of the
service's fence keys. The service keeps the keys that verify in ``leaseq_config``
(``fence_keys``, comma-separated, written as each API process first signs). The function
checks the signature against them (``leaseq_hmac_sha256``: RFC 2104 over PostgreSQL's own
``sha256``, no extension), then that the lead is ``leased`` at that attempt and its lease
has not expired by ``clock_timestamp()``: so a writer calls it inside its own transaction,
at its write. A malformed or unsigned fence is false, never an error. ``SECURITY DEFINER``:
a writer needs no right to read the keys or the leads.

Frozen like every revision: nothing here reads ``app``.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-20
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HMAC_FUNCTION = """
CREATE OR REPLACE FUNCTION leaseq_hmac_sha256(key bytea, message bytea) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    k bytea := key;
    inner_pad bytea;
    outer_pad bytea;
BEGIN
    IF length(k) > 64 THEN
        k := sha256(k);
    END IF;
    k := k || decode(repeat('00', 64 - length(k)), 'hex');
    inner_pad := k;
    outer_pad := k;
    FOR i IN 0..63 LOOP
        inner_pad := set_byte(inner_pad, i, get_byte(k, i) # 54);
        outer_pad := set_byte(outer_pad, i, get_byte(k, i) # 92);
    END LOOP;
    RETURN sha256(outer_pad || sha256(inner_pad || message));
END
$$
"""

FENCE_FUNCTION = """
CREATE OR REPLACE FUNCTION leaseq_fence_current(fence text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    parts text[] := string_to_array(fence, '.');
    body text;
    signed boolean := false;
    key text;
BEGIN
    IF fence IS NULL OR cardinality(parts) <> 5 OR parts[1] <> '1'
       OR parts[2] !~ '^[1-9][0-9]{0,17}$' OR parts[3] !~ '^[1-9][0-9]{0,8}$'
       OR parts[4] !~ '^(0|[1-9][0-9]{0,17})$' THEN
        RETURN false;
    END IF;
    body := array_to_string(parts[1:4], '.');
    FOR key IN
        SELECT unnest(string_to_array(value, ',')) FROM leaseq_config WHERE name = 'fence_keys'
    LOOP
        signed := signed OR parts[5] = rtrim(translate(encode(
            leaseq_hmac_sha256(convert_to(key, 'UTF8'), convert_to(body, 'UTF8')), 'base64'),
            '+/', '-_'), '=');
    END LOOP;
    RETURN signed AND EXISTS (
        SELECT 1 FROM leads  -- a column named: Citus plans no empty target list across shards
        WHERE id = parts[2]::bigint AND status = 'leased' AND attempts = parts[3]::integer
          AND lease_expires_at > clock_timestamp()
    );
END
$$
"""


def upgrade() -> None:
    op.execute(HMAC_FUNCTION)
    op.execute(FENCE_FUNCTION)


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS leaseq_fence_current(text)")
    op.execute("DROP FUNCTION IF EXISTS leaseq_hmac_sha256(bytea, bytea)")
