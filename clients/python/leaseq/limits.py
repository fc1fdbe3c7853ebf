"""Every limit of the wire, named once: the service enforces them and the client respects them.

The service's request schemas, its validation and the worker all read these;
nothing else spells a number that the API refuses beyond.
"""

from __future__ import annotations

# A session's name (docs/contract.md#words): also the lead's namespace in URLs.
MAX_SESSION_CHARS = 128
SESSION_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._:-]{{0,{MAX_SESSION_CHARS - 1}}}$"

MAX_PUSH_BATCH = 1000  # leads in one POST /sessions/{session}/leads
MAX_AFTER = 100  # the leads one lead may wait on (docs/contract.md#dependencies)
# The service's default LEASEQ_MAX_BODY_BYTES: a client packs each push under it.
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
MAX_ITEM_BATCH = 100  # items in one /renew/batch or /complete/batch
MAX_LEASE_BATCH = 100  # `max` of one POST /lease
MAX_LEASE_SESSIONS = 1000  # names in the `sessions` of one POST /lease
# A session's settings (PUT /sessions/{session}/settings), each from its lowest to its
# highest: ranges within which the service's token bucket arithmetic (in double precision,
# in SQL) never overflows or underflows. A rate of 1e-6/s is a lease every 11.6 days; a rate
# or a burst of a million leases is more than one session is granted. max_leased is 0 to
# INT32_MAX (a PostgreSQL integer).
MIN_WEIGHT = 1e-6
MAX_WEIGHT = 1_000_000.0
MIN_RATE_PER_S = 1e-6
MAX_RATE_PER_S = 1_000_000.0
MIN_BURST = 1
MAX_BURST = 1_000_000

MIN_TTL_S = 1.0  # the API's smallest lease (the queue itself takes any ttl > 0)
MAX_TTL_S = 3600.0
MAX_WAIT_S = 30.0  # the longest long poll of POST /lease
MAX_DELAY_S = 366 * 24 * 3600.0  # a push's delay_s and a release's

MAX_KEY_CHARS = 512
# Flow control: a lead's concurrency_key, its maximum runtime (and a session's default), a
# pause's for_s and a throttled release's throttle_s, each from 1 to its highest.
MAX_CONCURRENCY_KEY_CHARS = 128
MAX_RUNTIME_S = 86_400
MAX_PAUSE_S = 366 * 24 * 3600.0
MAX_THROTTLE_S = 3600.0
MAX_OWNER_CHARS = 200
MAX_TOKEN_CHARS = 200
MAX_ERROR_CHARS = 65_536  # a completion's error; the worker truncates to it
MAX_ATTEMPTS = 10_000  # the largest max_attempts a lead may ask for
# The deepest nesting of arrays and objects in a payload, result or checkpoint (the value
# itself is level 1): deeper JSON is refused before anything is written.
MAX_JSON_DEPTH = 64
# The most digits of an integer in a JSON value (Python's default bound on reading one,
# which the service's parser keeps): a payload with a longer one is refused at every door.
MAX_INTEGER_DIGITS = 4300
# The deepest nesting of a whole request body: such a value inside the envelope of a push or
# a batch (the body, its list, an item). Deeper is refused before the body is parsed.
MAX_BODY_DEPTH = MAX_JSON_DEPTH + 3
# An Idempotency-Key header (push, lease): visible ASCII, as a UUID or any opaque id.
IDEMPOTENCY_KEY_PATTERN = r"^[!-~]{1,255}$"
# W3C Trace Context, as leaseq stores it: version, trace id, parent id, flags (lowercase hex).
TRACEPARENT_PATTERN = r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"

INT32_MAX = 2**31 - 1  # priority and depth are PostgreSQL integers
INT64_MAX = 2**63 - 1  # lead ids are bigint
# The largest lead id the API takes: the largest integer JSON carries exactly everywhere
# (I-JSON, RFC 7493: parsers may read numbers as doubles).
MAX_LEAD_ID = 2**53 - 1

# Scoped API tokens (docs/contract.md#who-may-do-what): the roles, and a session pattern: a
# session name with an optional trailing ``*``, or ``*`` alone. A token's name is spelled
# as a session's.
TOKEN_ROLES = ("producer", "worker", "operator", "reader")
SESSION_SCOPE_PATTERN = rf"^(\*|[A-Za-z0-9][A-Za-z0-9._:-]{{0,{MAX_SESSION_CHARS - 1}}}\*?)$"
TOKEN_NAME_PATTERN = SESSION_PATTERN
