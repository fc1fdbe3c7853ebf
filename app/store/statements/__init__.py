"""Every statement the queue runs, as a typed builder: ``statements.renew_many(ids=…,
tokens=…, ttls=…, checkpoints=…, now=…)`` returns one ``Statement``, its text and its
parameters, and mypy checks each name. No module outside ``app.store`` writes SQL text or
binds parameters by hand.

The statements live by concern: ``lease`` (the lease statements), ``leads`` (a lead's life
after its lease), ``keys`` (idempotency), ``settings``, ``reads`` (counts and clocks) and
``views`` (the report and the dashboard), written from ``fragments``. Each text, every
variant of it, is rendered whole into ``app/store/sql/`` (``python -m app.store.render``).

Knows nothing of HTTP; imports nothing of ``app``, only the model and the wire's limits.
"""

from app.store.statements._build import REGISTRY, Builder, Statement, text
from app.store.statements.fragments import (
    LEAD_COLUMNS,
    MAX_SPAN_S,
    NOTIFY_CHANNEL,
    NOW,
    OUTCOME_EVENTS,
    in_list,
)
from app.store.statements.keys import (
    claim_key,
    prune_keys,
    remember_answer,
    remembered,
)
from app.store.statements.leads import (
    cancel,
    complete_many,
    completed_already,
    existing_keys,
    get,
    prune,
    push,
    release,
    renew_many,
    retry,
    retry_failed,
    runtime_ran_out,
    sweep,
)
from app.store.statements.lease import (
    DUE_PER_LEASE,
    _claim_and_lease,
    lease_group,
    lease_limited,
    lease_next,
    lock_settings,
    promote,
    valid_leases,
)
from app.store.statements.reads import (
    autovacuum,
    db_now,
    fold_counts,
    forget_zero_counts,
    lead_events,
    oldest_available,
    one_snapshot,
    paused_all,
    schema_revision,
    stats,
    stats_all,
)
from app.store.statements.settings import (
    lock_timeout,
    pause,
    resume,
    settings_all,
    settings_barrier,
    settings_get,
    settings_put,
)
from app.store.statements.views import (
    WINDOW_MINUTES,
    attempts_per_lead,
    expiring,
    failures,
    owners,
    per_minute,
    session_report,
)

__all__ = [
    "DUE_PER_LEASE",
    "LEAD_COLUMNS",
    "MAX_SPAN_S",
    "NOTIFY_CHANNEL",
    "NOW",
    "OUTCOME_EVENTS",
    "REGISTRY",
    "WINDOW_MINUTES",
    "Builder",
    "Statement",
    "_claim_and_lease",
    "attempts_per_lead",
    "autovacuum",
    "cancel",
    "claim_key",
    "complete_many",
    "completed_already",
    "db_now",
    "existing_keys",
    "expiring",
    "failures",
    "fold_counts",
    "forget_zero_counts",
    "get",
    "in_list",
    "lead_events",
    "lease_group",
    "lease_limited",
    "lease_next",
    "lock_settings",
    "lock_timeout",
    "oldest_available",
    "one_snapshot",
    "owners",
    "pause",
    "paused_all",
    "per_minute",
    "promote",
    "prune",
    "prune_keys",
    "push",
    "release",
    "remember_answer",
    "remembered",
    "renew_many",
    "resume",
    "retry",
    "retry_failed",
    "runtime_ran_out",
    "schema_revision",
    "session_report",
    "settings_all",
    "settings_barrier",
    "settings_get",
    "settings_put",
    "stats",
    "stats_all",
    "sweep",
    "text",
    "valid_leases",
]
