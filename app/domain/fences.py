"""Fences (docs/beyond.md#fences): each lease handed out carries its lead, attempt and expiry,
signed with HMAC-SHA256, for writers downstream to check without the database.

The format and the check are the client's (``leaseq.fences``): the service signs with the
first of ``LEASEQ_FENCE_KEYS``; unset, with a key it keeps in the database (made by the
first process that needed one, so every process signs alike). The keys that verify are kept
in ``leaseq_config`` too (``fence_keys``), where the SQL function ``leaseq_fence_current``
reads them. Knows nothing of HTTP.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from datetime import datetime

from app.store import statements
from app.store.pool import Database
from leaseq.fences import sign_fence

# A generated key: 32 random bytes as URL-safe text (a key is its text's UTF-8 bytes).
GENERATED_KEY_BYTES = 32


class Fences:
    """The signer of one API process."""

    def __init__(self, db: Database, configured: Sequence[str]) -> None:
        self.db = db
        self.configured = [key for key in configured if key]
        self._keys: list[str] | None = None
        self._loading = asyncio.Lock()

    async def keys(self) -> list[str]:
        """The keys that verify, the signing one first; read (and kept for the SQL check)
        once per process. Raises Unavailable while the database does not answer."""
        if self._keys is None:
            async with self._loading:
                if self._keys is None:
                    self._keys = await self._load()
        return self._keys

    async def _load(self) -> list[str]:
        """The keys, read first and written only when the database does not have them yet:
        on a Citus cluster ``leaseq_config`` is a reference table, whose writes need every
        node, so a process started while a worker node is stopped still signs the leases of
        the other nodes' sessions (docs/scaling.md, "A stopped worker node")."""
        stored = {
            row["name"]: row["value"]
            for row in await self.db.rows(statements.config_get(names=["fence_key", "fence_keys"]))
        }
        keys = self.configured
        if not keys and "fence_key" in stored:
            keys = [stored["fence_key"]]
        elif not keys:
            generated = secrets.token_urlsafe(GENERATED_KEY_BYTES)
            [row] = await self.db.rows(statements.fence_key(generated=generated))
            keys = [row["value"]]
        if stored.get("fence_keys") != ",".join(keys):
            await self.db.rows(statements.config_put(name="fence_keys", value=",".join(keys)))
        return keys

    async def sign(self, lead_id: int, attempt: int, expires_at: datetime) -> str:
        """The fence of a lease."""
        return sign_fence(lead_id, attempt, expires_at, (await self.keys())[0])
