"""``/tokens``: scoped API tokens, created, listed and revoked over REST; ``/tokens/self``.

Managing tokens needs a full-access token (``LEASEQ_API_TOKENS``) or an
operator token whose pattern is ``*`` (``Action.MANAGE_TOKENS``). A new
token is answered once and never again: only its hash is stored. A
revocation binds every API process at once (NOTIFY), and within
``LEASEQ_TOKEN_RECHECK_S`` in a process that missed it (docs/security.md).
Every change is in the audit trail, by the name of the token that made it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, cast

from fastapi import APIRouter, Depends, Path, Request
from pydantic import Field

from app.api.access import Access, Where
from app.api.front_door import FrontDoorRoute
from app.api.problems import responses
from app.api.schemas import Answer, Body
from app.domain.access import Action, Principal
from app.domain.tokens import MAX_EXPIRES_S, TokenInfo, Tokens
from app.service.runtime import Runtime
from leaseq.limits import (
    MAX_SESSION_CHARS,
    SESSION_SCOPE_PATTERN,
    TOKEN_NAME_PATTERN,
    TOKEN_ROLES,
)

router = APIRouter(route_class=FrontDoorRoute, tags=["tokens"])

Managing = Annotated[Principal, Depends(Access(Action.MANAGE_TOKENS, Where.NONE))]
AnyToken = Annotated[Principal, Depends(Access(Action.AUTHENTICATED, Where.NONE))]
TokenName = Annotated[
    str, Path(pattern=TOKEN_NAME_PATTERN, max_length=MAX_SESSION_CHARS, description="Its name.")
]


async def get_tokens(request: Request) -> Tokens:
    return cast(Runtime, request.app.state.runtime).tokens


TokensDep = Annotated[Tokens, Depends(get_tokens)]


class TokenIn(Body):
    """A new token: its role, its sessions (a pattern), optionally a name and a lifetime."""

    # Checked by the domain (app.domain.access, app.domain.tokens), so every door refuses
    # alike; the document states the same bounds, so a client can tell before it sends.
    name: str | None = Field(
        None,
        description="Unique among live tokens; made up when absent.",
        json_schema_extra={"pattern": TOKEN_NAME_PATTERN, "maxLength": MAX_SESSION_CHARS},
    )
    role: str = Field(
        description="producer, worker, operator or reader.",
        json_schema_extra={"enum": list(TOKEN_ROLES)},
    )
    sessions: str = Field(
        description="A session name, optionally ending in `*`; or `*`.",
        json_schema_extra={"pattern": SESSION_SCOPE_PATTERN},
    )
    expires_s: float | None = Field(
        None,
        description="Seconds it lives; null: no expiry.",
        json_schema_extra={"minimum": 1, "maximum": MAX_EXPIRES_S},
    )


class TokenOut(Answer):
    name: str
    role: str
    sessions: str
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None


class CreatedOut(TokenOut):
    token: str = Field(description="The bearer token. Shown this once: only a hash is kept.")


class TokensOut(Answer):
    tokens: list[TokenOut]


class SelfOut(Answer):
    name: str
    role: str = Field(description="The token's role; `full` for a full-access token.")
    sessions: str
    operate: bool = Field(description="Whether it may cancel, retry, change settings, sweep.")
    manage_tokens: bool


def _out(info: TokenInfo) -> TokenOut:
    return TokenOut.model_validate(info)


@router.post("/tokens", status_code=201)
async def create_token(body: TokenIn, tokens: TokensDep, principal: Managing) -> CreatedOut:
    """Create a scoped token; the answer holds it, once. 422 for a malformed pattern, an
    unknown role, or a name a live token has."""
    created = await tokens.create(body.name, body.role, body.sessions, body.expires_s)
    await tokens.audit(
        principal,
        "token-create",
        detail={"name": created.info.name, "role": body.role, "sessions": body.sessions},
    )
    return CreatedOut(**_out(created.info).model_dump(), token=created.token)


@router.get("/tokens")
async def list_tokens(tokens: TokensDep, principal: Managing) -> TokensOut:
    """Every token, newest first: names, roles, patterns, expiry, last use; never a token."""
    return TokensOut(tokens=[_out(info) for info in await tokens.listing()])


@router.delete("/tokens/{name}", responses=responses("not_found"))
async def revoke_token(name: TokenName, tokens: TokensDep, principal: Managing) -> TokenOut:
    """Revoke the live token of this name, in every API process at once."""
    revoked = await tokens.revoke(name)
    await tokens.audit(principal, "token-revoke", detail={"name": name})
    return _out(revoked)


@router.get("/tokens/self")
async def get_own_token(principal: AnyToken) -> SelfOut:
    """Whom the token sent acts as: its name, role and sessions, and what it may offer."""
    return SelfOut(
        name=principal.name,
        role=principal.role or "full",
        sessions=principal.pattern,
        operate=principal.may(Action.OPERATE),
        manage_tokens=principal.may(Action.MANAGE_TOKENS),
    )
