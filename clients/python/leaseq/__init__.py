"""leaseq: the client of a lease queue service on PostgreSQL.

Workers and scripts install this alone: ``AsyncClient`` (and its blocking
twin ``Client``) speaks the REST API, ``Worker`` runs a handler on each lead
it leases, ``push_in`` pushes a lead inside the producer's own database
transaction, and the model and errors are the ones the service itself uses.
``leaseq`` never imports the service.

The public API is what ``__all__`` names, as httpx keeps it: the modules
whose names start with ``_`` are the machinery behind it, free to change.
"""

from leaseq._client import AsyncClient, Client
from leaseq._wire import RetryPolicy
from leaseq.errors import (
    ApiError,
    Conflict,
    Forbidden,
    InvalidInput,
    LeaseLost,
    LeaseqError,
    NotFound,
    PayloadTooLarge,
    QuotaExceeded,
    Unauthorized,
    Unavailable,
)
from leaseq.fences import Fence, FenceInvalid, sign_fence, verify_fence
from leaseq.model import (
    AllCounts,
    ApiToken,
    BulkResult,
    CompleteItem,
    Counts,
    FinalStatus,
    ItemResult,
    Lead,
    LeadPage,
    Lease,
    NewLead,
    NextLease,
    PushResult,
    Renewal,
    RenewItem,
    Scaling,
    Schedule,
    SessionSettings,
    Status,
    SweepResult,
)
from leaseq.transactional import push_in
from leaseq.worker import (
    Cached,
    CancelToken,
    Command,
    HandlerCancelled,
    HandlerUnusable,
    Job,
    StopReason,
    Throttled,
    Worker,
    WorkerStats,
    run_worker,
)

__version__ = "0.1.0"

__all__ = [
    "AllCounts",
    "ApiError",
    "ApiToken",
    "AsyncClient",
    "BulkResult",
    "Cached",
    "CancelToken",
    "Client",
    "Command",
    "CompleteItem",
    "Conflict",
    "Counts",
    "Fence",
    "FenceInvalid",
    "FinalStatus",
    "Forbidden",
    "HandlerCancelled",
    "HandlerUnusable",
    "InvalidInput",
    "ItemResult",
    "Job",
    "Lead",
    "LeadPage",
    "Lease",
    "LeaseLost",
    "LeaseqError",
    "NewLead",
    "NextLease",
    "NotFound",
    "PayloadTooLarge",
    "PushResult",
    "QuotaExceeded",
    "RenewItem",
    "Renewal",
    "RetryPolicy",
    "Scaling",
    "Schedule",
    "SessionSettings",
    "Status",
    "StopReason",
    "SweepResult",
    "Throttled",
    "Unauthorized",
    "Unavailable",
    "Worker",
    "WorkerStats",
    "__version__",
    "push_in",
    "run_worker",
    "sign_fence",
    "verify_fence",
]
