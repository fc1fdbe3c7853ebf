"""The server's commands of ``leaseq``: serve, db upgrade, report, prune.

Each module holds one ``typer.Typer`` (``cli``) that the server distribution
registers under the entry-point group ``leaseq.commands``; the ``leaseq``
command (the client distribution) loads them when asked for. Printing and
the one error handler are the client's (``leaseq.cli.output``); finding the
database and opening its queue is ``database``'s.
"""
