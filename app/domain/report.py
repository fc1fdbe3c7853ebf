"""The audit of one session, read from the ``lead_events`` ledger alone.

It answers "did the queue keep its promises?" from the record of what
happened, not from the leads' current state:

* ``leads``: leads that appear in the ledger; ``pushed``: push events.
* ``leases``: leases handed out (one per lead and attempt).
* ``completed``: leads with a completion; ``completions``: completion events;
  ``double_completions``: leads completed more than once without an
  operator's retry in between (must be 0).
* ``overlapping_leases``: leases handed out while the lead's previous lease
  was still valid — before its completion, release or cancellation, or before
  the expiry the sweeper recorded (must be 0). A previous lease with no end
  recorded at all counts too: nothing but an end makes a lead leasable again.
* ``wasted_attempts``: leases that ended without a completion (expired,
  released or cancelled); leases still running are not counted.
* ``expired``, ``released``, ``cancelled``, ``retried``, ``failed``: events of each kind
  (``failed``: a lead failed because a lead it waits on failed; no lease ended with it).
* ``attempts_per_lead``: how many leases each lead took, as
  ``{leases: number of leads}`` (a lead pushed and never leased counts under 0).
* ``owners``: per worker name, the leases it was handed, the completions it
  wrote and its wasted attempts, by owner name.

All zero when the ledger is off (``Settings.ledger``). The statements are
``app.store.statements``'s. Knows nothing of HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from app.domain import validation
from app.domain.queue import Queue
from app.store import statements
from app.store.pool import Connection, Row, execute


@dataclass(frozen=True, slots=True)
class OwnerReport:
    """One worker's share of a session: leases handed to it, completions, wasted attempts."""

    owner: str
    leases: int = 0
    completions: int = 0
    wasted: int = 0


@dataclass(frozen=True, slots=True)
class Report:
    """What the ledger says about one session; see the module docstring."""

    leads: int = 0
    pushed: int = 0
    leases: int = 0
    completed: int = 0
    completions: int = 0
    double_completions: int = 0
    overlapping_leases: int = 0
    wasted_attempts: int = 0
    expired: int = 0
    released: int = 0
    cancelled: int = 0
    retried: int = 0
    failed: int = 0
    attempts_per_lead: dict[int, int] = field(default_factory=dict)
    owners: list[OwnerReport] = field(default_factory=list)

    @property
    def breached(self) -> bool:
        """True when the ledger shows a broken promise (a double completion or an overlap)."""
        return self.double_completions > 0 or self.overlapping_leases > 0


COUNTERS = tuple(f.name for f in fields(Report) if f.type in (int, "int"))


async def report(queue: Queue, session: str) -> Report:
    """The ledger's audit of ``session`` (all zero for an unknown one). Raises InvalidInput."""
    validation.session(session)

    async def read(conn: Connection) -> list[list[Row]]:
        return [
            await execute(conn, statement)
            for statement in (
                statements.session_report(session=session),
                statements.attempts_per_lead(session=session),
                statements.owners(session=session),
            )
        ]

    [[row], histogram, by_owner] = await queue.db.run(read)
    return Report(
        **{name: int(row[name]) for name in COUNTERS},
        attempts_per_lead={int(r["leases"]): int(r["leads"]) for r in histogram},
        owners=[
            OwnerReport(str(r["owner"]), int(r["leases"]), int(r["completions"]), int(r["wasted"]))
            for r in by_owner
        ],
    )
