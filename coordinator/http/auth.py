"""Bearer tokens: API tokens for ``/v1/...``, the join token for agents.

There are two kinds of API token: admin tokens (``api_tokens``) and namespace tokens
(``namespace_tokens``, each for some namespaces). The middleware compares the presented
token with every one in constant time, refuses an unknown token with 401, and puts the
token's ``Principal`` on the request (``roles.principal_of``); handlers decide with it what
the token may do (``roles.require_admin``, ``roles.require_namespace``).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from aiohttp import web
from aiohttp.typedefs import Middleware

from coordinator.config import CoordinatorConfig
from coordinator.errors import Unauthorized
from coordinator.http.errors import Handler
from coordinator.http.roles import ADMIN, PRINCIPAL, Principal, namespace_principal

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
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


def principal_for(
    presented: str | None, principals: Iterable[tuple[str, Principal]]
) -> Principal | None:
    """The principal whose token ``presented`` is, or None. Like ``token_matches`` it
    compares with every token, even after a match."""
    if presented is None:
        return None
    found: Principal | None = None
    for token, principal in principals:
        if hmac.compare_digest(presented.encode(), token.encode()):
            found = principal
    return found


def api_tokens_middleware(config: CoordinatorConfig) -> Middleware:
    """The middleware for the config's admin ``api_tokens`` and its ``namespace_tokens``
    (the config keeps every token distinct, so a token has one principal)."""
    principals = tuple(
        [(token, ADMIN) for token in config.api_tokens]
        + [
            (entry.token, namespace_principal(entry.namespaces))
            for entry in config.namespace_tokens
        ]
    )

    @web.middleware
    async def require_api_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        # The agent socket checks the join token itself; health and metrics are open to
        # load balancers and scrapers and reveal no secrets.
        if request.path in OPEN_PATHS or request.path == AGENT_PATH:
            return await handler(request)
        principal = principal_for(bearer_token(request), principals)
        if principal is None:
            raise Unauthorized("missing or invalid API token", details=BEARER_HINT)
        request[PRINCIPAL] = principal
        return await handler(request)

    return require_api_token
