"""leaseq: a lease queue service on PostgreSQL."""

__version__ = "0.1.0"
