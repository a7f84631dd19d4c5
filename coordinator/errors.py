"""Refusals: a small hierarchy carrying data (a code, a message, the numbers in
``details``) and a ``kind`` -- what went wrong in the request's own terms. The HTTP layer
maps kinds to statuses in one place (``coordinator.http.errors``); nothing else here or
below knows HTTP."""

from __future__ import annotations

from collections.abc import Mapping


class ApiError(Exception):
    kind = "bad_request"
    code = "bad_request"

    def __init__(
        self,
        message: str,
        *,
        details: Mapping[str, object] | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = dict(details or {})
        if code is not None:
            self.code = code


class Unauthorized(ApiError):
    kind = "unauthorized"
    code = "unauthorized"


class Forbidden(ApiError):
    """A valid token whose role may not do this (a namespace token changing configuration)."""

    kind = "forbidden"
    code = "forbidden"


class NotFound(ApiError):
    kind = "not_found"
    code = "not_found"


class Unprocessable(ApiError):
    """The request is well-formed but breaks a rule of what it describes."""

    kind = "invalid"
    code = "unprocessable"


class Conflict(ApiError):
    """The request is valid but the cluster's state cannot satisfy it (capacity, ...)."""

    kind = "conflict"
    code = "conflict"


class UnusableNode(Conflict):
    """A registered node nothing can be placed on or planned for: its record breaks
    today's rules (one an older version stored) or the placement engine cannot take it.
    The reason names the field and the value."""

    code = "unusable_node"

    def __init__(self, node: str, reason: str) -> None:
        message = f"node {node} cannot be used until its agent says hello again: {reason}"
        super().__init__(message, details={"node": node, "reason": reason})
        self.node = node
        self.reason = reason
