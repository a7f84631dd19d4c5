"""Bearer tokens: API tokens for ``/v1/...``, the join token for agents.

Tokens are compared in constant time. Roles come later; today any API token may read.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from aiohttp import web
from aiohttp.typedefs import Middleware

from coordinator.errors import Handler, Unauthorized

OPEN_PATHS = frozenset({"/healthz", "/metrics"})
AGENT_PATH = "/v1/agent"
BEARER_HINT = {"expected": "an 'Authorization: Bearer <token>' header"}


def bearer_token(request: web.Request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def token_matches(presented: str | None, accepted: Iterable[str]) -> bool:
    if presented is None:
        return False
    # Compare against every token, so the time taken does not tell which one was close.
    found = False
    for token in accepted:
        found |= hmac.compare_digest(presented.encode(), token.encode())
    return found


def api_tokens_middleware(api_tokens: Iterable[str]) -> Middleware:
    tokens = tuple(api_tokens)

    @web.middleware
    async def require_api_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        # The agent socket checks the join token itself; health and metrics are open to
        # load balancers and scrapers and reveal no secrets.
        if request.path in OPEN_PATHS or request.path == AGENT_PATH:
            return await handler(request)
        if not token_matches(bearer_token(request), tokens):
            raise Unauthorized("missing or invalid API token", details=BEARER_HINT)
        return await handler(request)

    return require_api_token
