"""Leasing: every lease, from the request to the statement (docs/design.md, "The lease path").

``LeaseRequest`` (``request``) is checked once where it comes in; ``Leasing.lease``
(``entry``) is the one entry; ``session`` leases one session, ``fleet`` chooses
among sessions, ``long_poll`` waits for work.
"""
