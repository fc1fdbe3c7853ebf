"""The leaseq service: the queue on PostgreSQL, its REST API and its commands.

Its model, errors and limits are the client's (``leaseq``), so both sides
speak one vocabulary; ``leaseq`` never imports this package.
"""

from leaseq import __version__

__all__ = ["__version__"]
