"""leaseq: the client of a lease queue service on PostgreSQL.

Workers and scripts install this alone: ``AsyncClient`` speaks the REST API,
``Worker`` runs a handler on each lead it leases, and the model and errors are
the ones the service itself uses. ``leaseq`` never imports the service.
"""

from leaseq.client import AsyncClient, RetryPolicy
from leaseq.errors import (
    ApiError,
    Conflict,
    InvalidInput,
    LeaseLost,
    LeaseqError,
    NotFound,
    PayloadTooLarge,
    Unauthorized,
    Unavailable,
)
from leaseq.model import (
    AllCounts,
    CompleteItem,
    Counts,
    FinalStatus,
    ItemResult,
    Lead,
    Lease,
    NewLead,
    NextLease,
    PushResult,
    Renewal,
    RenewItem,
    Status,
    SweepResult,
)
from leaseq.worker import Cached, CancelToken, HandlerCancelled, Job, Worker, run_worker

__version__ = "0.1.0"

__all__ = [
    "AllCounts",
    "ApiError",
    "AsyncClient",
    "Cached",
    "CancelToken",
    "CompleteItem",
    "Conflict",
    "Counts",
    "FinalStatus",
    "HandlerCancelled",
    "InvalidInput",
    "ItemResult",
    "Job",
    "Lead",
    "Lease",
    "LeaseLost",
    "LeaseqError",
    "NewLead",
    "NextLease",
    "NotFound",
    "PayloadTooLarge",
    "PushResult",
    "RenewItem",
    "Renewal",
    "RetryPolicy",
    "Status",
    "SweepResult",
    "Unauthorized",
    "Unavailable",
    "Worker",
    "__version__",
    "run_worker",
]
