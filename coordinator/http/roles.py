"""Who is asking: the role behind a request's API token, and the checks handlers make.

An admin token (``api_tokens``) may do everything. A namespace token (``namespace_tokens``)
acts only for its namespaces: it may read, and may not change cluster configuration
(quotas, pools, resource templates, nodes). The auth middleware puts the ``Principal`` on
every request it lets through; handlers ask it:

    require_admin(request, "changing quotas")      # 403 "forbidden" for a namespace token
    require_namespace(request, body.namespace)     # 403 unless the token may use it
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from coordinator.errors import Forbidden


@dataclass(frozen=True)
class Principal:
    admin: bool
    namespaces: frozenset[str]  # empty for an admin, who may use every namespace

    def may_use(self, namespace: str) -> bool:
        return self.admin or namespace in self.namespaces

    def describe(self) -> str:
        """For error messages: what the token may do, without the token."""
        if self.admin:
            return "an admin token"
        return "a token for namespaces " + ", ".join(sorted(self.namespaces))


ADMIN = Principal(admin=True, namespaces=frozenset())
PRINCIPAL = web.RequestKey("principal", Principal)


def namespace_principal(namespaces: frozenset[str] | list[str]) -> Principal:
    return Principal(admin=False, namespaces=frozenset(namespaces))


def principal_of(request: web.Request) -> Principal:
    """The role the auth middleware found for this request's token.

    Raises ``RuntimeError`` (a 500, and a bug) on a path the middleware leaves open, so a
    check can never pass for a request whose token nobody looked at.
    """
    if PRINCIPAL not in request:
        raise RuntimeError(f"no API token was checked for {request.method} {request.path}")
    return request[PRINCIPAL]


def require_admin(request: web.Request, what: str) -> None:
    """403 ``forbidden`` unless an admin token asks; ``what`` names the action
    ("changing quotas") in the message."""
    principal = principal_of(request)
    if not principal.admin:
        raise Forbidden(
            f"{what} needs an admin token; this is {principal.describe()}",
            details={"needs": "admin", "namespaces": sorted(principal.namespaces)},
        )


def require_namespace(request: web.Request, namespace: str) -> None:
    """403 ``forbidden`` unless the token may act in ``namespace``."""
    principal = principal_of(request)
    if not principal.may_use(namespace):
        raise Forbidden(
            f"namespace {namespace!r} is not one of this token's namespaces",
            details={"namespace": namespace, "namespaces": sorted(principal.namespaces)},
        )
