"""Benchmarks of leaseq: ``python -m bench`` (see bench/README.md)."""
