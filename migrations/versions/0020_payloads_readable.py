"""Every door stores only payloads the API can give back: ``leaseq_json_fault`` and the
constraint ``leads_payload_readable``.

The REST push refuses a payload holding an integer of more than 4300 digits, or a number
with a fraction beyond the range of a double (the service could not read it back, nor
write it as JSON); ``leaseq_push()`` stored them, and every read or lease of such a lead
then failed (a lease took it, and its answer could not be built). The rule now lives in
the database, once: ``leaseq_json_fault(jsonb)`` says what is wrong with a value (NULL:
nothing), the table's check holds every payload to it, whichever door wrote it (a push,
``leaseq_push`` in a producer's transaction, a schedule's tick, a retry), and
``leaseq_push`` raises 22023 naming ``payload`` as for its other checks. The function
reads only the numbers of 1e308 or more in magnitude past its path's filter, so an
ordinary payload costs one walk of its values.

A payload stored before that breaks the rule is kept as its JSON text, under the member
``leaseq_unreadable_payload`` (the lead can be read, leased and failed again, and nothing
is lost), before the check is validated.

Frozen like every revision: nothing here reads ``app``.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-20
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_FAULT_FUNCTION = """
CREATE OR REPLACE FUNCTION leaseq_json_fault(value jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 'holds ' || CASE WHEN n::text ~ '[.]' THEN 'a number beyond the range of a double'
                            ELSE 'an integer of more than 4300 digits' END
           || ' (' || left(n::text, 20) || '..., ' || length(n::text) || ' characters)'
    FROM jsonb_path_query(value, 'strict $.** ? (@.type() == "number"
                                                && (@ >= 1e308 || @ <= -1e308))') AS n
    WHERE CASE WHEN n::text ~ '[.]'
               THEN abs(n::text::numeric) >= 2::numeric ^ 1024 - 2::numeric ^ 970
               ELSE length(ltrim(n::text, '-')) > 4300 END
    LIMIT 1
$$
"""

# Inserted in leaseq_push before its check of ``priority``.
PUSH_CHECK = """    IF leaseq_json_fault(payload) IS NOT NULL THEN
        RAISE EXCEPTION 'payload: %', leaseq_json_fault(payload) USING ERRCODE = '22023';
    END IF;
"""
BEFORE = "    IF priority IS NULL THEN\n"
CHECK = "leaseq_json_fault(payload) IS NULL"
UNREADABLE = "leaseq_unreadable_payload"


def _on_citus() -> bool:
    """Whether this database is a Citus node (offline SQL is for one PostgreSQL)."""
    if op.get_context().as_sql:
        return False
    found = op.get_bind().execute(
        sa.text("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')")
    )
    return bool(found.scalar())


def _push_function() -> str:
    """The push function of the revision this one follows: 0017's on a cluster, else 0007's."""
    script = op.get_context().script
    assert script is not None
    if _on_citus():
        text: str = script.get_revision("0017").module.SHARD_PUSH_FUNCTION
    else:
        text = script.get_revision("0007").module.PUSH_FUNCTION
    assert text.count(BEFORE) == 1
    return text


def upgrade() -> None:
    op.execute(JSON_FAULT_FUNCTION)
    op.execute(_push_function().replace(BEFORE, PUSH_CHECK + BEFORE))
    # Found first, then rewritten by id: a Citus cluster takes no function of a column in
    # an UPDATE's WHERE.
    bind = op.get_bind()
    found = bind.execute(sa.text(f"SELECT session, id FROM leads WHERE NOT ({CHECK})")).all()
    for session, lead_id in found:
        bind.execute(
            sa.text(
                "UPDATE leads SET payload = jsonb_build_object(CAST(:member AS text), "
                "payload::text) WHERE session = :session AND id = :id"
            ),
            {"member": UNREADABLE, "session": session, "id": lead_id},
        )
    op.execute(f"ALTER TABLE leads ADD CONSTRAINT leads_payload_readable CHECK ({CHECK}) NOT VALID")
    op.execute("ALTER TABLE leads VALIDATE CONSTRAINT leads_payload_readable")


def downgrade() -> None:
    op.execute("ALTER TABLE leads DROP CONSTRAINT leads_payload_readable")
    op.execute(_push_function())
    op.execute("DROP FUNCTION leaseq_json_fault(jsonb)")
