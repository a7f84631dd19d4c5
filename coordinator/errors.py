"""API errors: a small hierarchy carrying data, mapped to HTTP in one place.

Every error response has the body ``{"error": {"code", "message", "details"}}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web

from coordinator.store import StoreError
from shared.codec import to_json
from shared.logs import get_logger

log = get_logger("allot.coordinator.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiError(Exception):
    status = 400
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
    status = 401
    code = "unauthorized"


class Forbidden(ApiError):
    """A valid token whose role may not do this (a namespace token changing configuration)."""

    status = 403
    code = "forbidden"


class NotFound(ApiError):
    status = 404
    code = "not_found"


class Unprocessable(ApiError):
    """The request is well-formed but breaks a rule of what it describes."""

    status = 422
    code = "unprocessable"


class Conflict(ApiError):
    """The request is valid but the cluster's state cannot satisfy it (capacity, ...)."""

    status = 409
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


def error_response(
    status: int, code: str, message: str, details: Mapping[str, object] | None = None
) -> web.Response:
    body = {"error": {"code": code, "message": message, "details": dict(details or {})}}
    headers = {"WWW-Authenticate": 'Bearer realm="allot"'} if status == 401 else None
    return web.Response(
        status=status, body=to_json(body), content_type="application/json", headers=headers
    )


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every failure, ours or aiohttp's (404, 405, 413), into the JSON error body."""
    try:
        return await handler(request)
    except ApiError as error:
        return error_response(error.status, error.code, error.message, error.details)
    except StoreError as error:
        log.error("store unavailable", method=request.method, path=request.path, reason=error)
        return error_response(503, "store_unavailable", "the state store failed; nothing changed")
    except web.HTTPException as error:
        if error.status < 400:
            raise
        code = error.reason.lower().replace(" ", "_")
        return error_response(
            error.status, code, f"{error.reason}: {request.method} {request.path}"
        )
    except Exception:
        log.exception("request failed", method=request.method, path=request.path)
        return error_response(500, "internal", "internal error; the coordinator log has details")
