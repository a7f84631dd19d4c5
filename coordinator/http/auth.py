"""Bearer tokens: API tokens for ``/v1/...``, the join token for agents.

There are two kinds of API token: admin tokens (``api_tokens``) and namespace tokens
(``namespace_tokens``, each for some namespaces). The middleware compares the presented
token with every one in constant time, refuses an unknown token with 401, and puts the
token's ``Principal`` on the request (``roles.principal_of``); handlers decide with it what
the token may do (``roles.require_admin``, ``roles.require_namespace``).

Every refusal goes through ``AuthRefusals`` first (counted, logged at most once a minute
per source address, and held back for a source that keeps failing), and its 401 closes
the connection (``coordinator.http.errors``).
"""

from __future__ import annotations

import asyncio
import hmac
import random
from collections.abc import Iterable

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import Counter

from coordinator.auth_failures import FailureBook
from coordinator.config import CoordinatorConfig
from coordinator.errors import Unauthorized
from coordinator.http.errors import Handler
from coordinator.http.roles import ADMIN, PRINCIPAL, Principal, namespace_principal
from shared.logs import get_logger

log = get_logger("allot.coordinator.auth")

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
AGENT_PATH = "/v1/agent"
# The dashboard's pages take the same tokens, from a header or its session cookie, and
# check them themselves (coordinator.ui.access), with ``api_principals``.
UI_PREFIX = "/ui/"
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


class AuthRefusals:
    """Failed authentications as an operator sees them: each counted in the metric
    ``allot_auth_failures_total{kind}``; one line per source address a minute at most,
    with the count since its last line (the rest of a minute logged when it is over); and
    a source that keeps failing answered later and later (``FailureBook``), so guessing
    gets slow and a flood costs the log nothing."""

    def __init__(self, failures: Counter, book: FailureBook | None = None) -> None:
        self._failures = failures  # labelled by kind
        # Each kind's child of the counter, looked up once: labels() took 85 us a call
        # under a flood of 2,000 refusals (profiled), the rest of a refusal about as much.
        self._by_kind: dict[str, Counter] = {}
        self._book = book if book is not None else FailureBook()
        self._flush: asyncio.TimerHandle | None = None

    async def refused(self, kind: str, source: str) -> None:
        """Count a failure of ``kind`` (api_token, join_token, client_certificate) from
        ``source``; returns when the refusal may be answered."""
        counter = self._by_kind.get(kind)
        if counter is None:
            counter = self._by_kind[kind] = self._failures.labels(kind=kind)
        counter.inc()
        loop = asyncio.get_running_loop()
        verdict = self._book.failed(source, loop.time())
        if verdict.report is not None:
            _log_failures(source, verdict.report)
        elif self._flush is None:
            self._flush_at(self._book.next_line_at())
        if verdict.delay_s:
            # Up to a tenth longer, at random: a flood's refusals, held back alike, would
            # otherwise all be answered in the same turn of the loop, which then keeps
            # everyone else waiting (250 at once took 50 to 300 ms on the test machine).
            await asyncio.sleep(verdict.delay_s * random.uniform(1.0, 1.1))

    def _flush_at(self, when: float | None) -> None:
        if when is not None:
            self._flush = asyncio.get_running_loop().call_at(when, self._flush_due)

    def _flush_due(self) -> None:
        """Log the failures each source had since its last line once its minute is over."""
        self._flush = None
        now = asyncio.get_running_loop().time()
        for source, count in self._book.due(now):
            _log_failures(source, count)
        self._flush_at(self._book.next_line_at())


def _log_failures(source: str, count: int) -> None:
    """``failures``: since this source's line before (or since it was first seen)."""
    log.warning("authentication failed", source=source, failures=count)


def api_principals(config: CoordinatorConfig) -> tuple[tuple[str, Principal], ...]:
    """Each of the config's admin ``api_tokens`` and ``namespace_tokens`` with its
    principal (the config keeps every token distinct, so a token has one principal)."""
    return tuple(
        [(token, ADMIN) for token in config.api_tokens]
        + [
            (entry.token, namespace_principal(entry.namespaces))
            for entry in config.namespace_tokens
        ]
    )


def api_tokens_middleware(config: CoordinatorConfig, refusals: AuthRefusals) -> Middleware:
    """The middleware for the config's admin ``api_tokens`` and its ``namespace_tokens``."""
    principals = api_principals(config)

    @web.middleware
    async def require_api_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        # The agent socket checks the join token itself; health and metrics are open to
        # load balancers and scrapers and reveal no secrets.
        if (
            request.path in OPEN_PATHS
            or request.path == AGENT_PATH
            or (request.path + "/").startswith(UI_PREFIX)
        ):
            return await handler(request)
        principal = principal_for(bearer_token(request), principals)
        if principal is None:
            await refusals.refused("api_token", request.remote or "")
            raise Unauthorized("missing or invalid API token", details=BEARER_HINT)
        request[PRINCIPAL] = principal
        return await handler(request)

    return require_api_token
