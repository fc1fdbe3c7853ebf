"""``python -m leaseq.cli``: the ``leaseq`` command."""

from leaseq.cli import main

main()
