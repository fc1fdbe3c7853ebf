"""The clients' conformance set: every language's worker against a real ``leaseq serve``."""
