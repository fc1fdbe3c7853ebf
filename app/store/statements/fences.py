"""Fences (docs/beyond.md#fences): the SQL function that says whether a fence's lease is still
its lead's current one, and the key the service keeps when it is given none.

``leaseq_fence_current(fence)`` checks the fence's signature against the keys kept in
``leaseq_config`` (``fence_keys``; ``leaseq_hmac_sha256`` is RFC 2104 over PostgreSQL's own
``sha256``), then that the lead is leased at that attempt and unexpired by
``clock_timestamp()``: a writer calls it inside its own transaction, at its write.
"""

from __future__ import annotations

from app.store.statements._build import statement

# The functions of revision 0024 (app.store.schema builds the same).
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


def _fence_key() -> str:
    return """
WITH made AS (
    INSERT INTO leaseq_config (name, value) VALUES ('fence_key', %(generated)s)
    ON CONFLICT (name) DO NOTHING
    RETURNING value
)
SELECT value FROM made
UNION ALL
SELECT value FROM leaseq_config WHERE name = 'fence_key'
LIMIT 1
"""


@statement(_fence_key)
def fence_key(*, generated: str) -> None:
    """The key the service signs fences with when ``LEASEQ_FENCE_KEYS`` names none: the one
    kept in the database, or ``generated`` (a new random key) stored as it, whichever process
    asked first."""
