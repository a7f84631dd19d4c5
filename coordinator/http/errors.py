"""Errors as HTTP answers: every refusal's kind mapped to its status, in this one place.

Every error response has the body ``{"error": {"code", "message", "details"}}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web

from coordinator.errors import ApiError
from coordinator.store import OutcomeUnknown, StoreError
from coordinator.store.quorum import QuorumLost
from shared.codec import to_json
from shared.logs import get_logger

log = get_logger("allot.coordinator.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# A refusal's kind (``coordinator.errors``) -> the HTTP status it answers with.
STATUS = {
    "bad_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "invalid": 422,
}


def error_response(
    status: int, code: str, message: str, details: Mapping[str, object] | None = None
) -> web.Response:
    body = {"error": {"code": code, "message": message, "details": dict(details or {})}}
    headers = {"WWW-Authenticate": 'Bearer realm="allot"'} if status == 401 else None
    response = web.Response(
        status=status, body=to_json(body), content_type="application/json", headers=headers
    )
    if status == 401:  # nothing unauthenticated keeps a socket (a refused upgrade neither)
        response.force_close()
    return response


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every failure, ours or aiohttp's (404, 405, 413), into the JSON error body."""
    try:
        return await handler(request)
    except ApiError as error:
        return error_response(STATUS[error.kind], error.code, error.message, error.details)
    except OutcomeUnknown as error:
        log.error("store outcome unknown", method=request.method, path=request.path, reason=error)
        return error_response(
            503,
            "outcome_unknown",
            "the state store failed while this change was being committed: it may or may not"
            " have been made. This coordinator stands down, so whichever leads next holds the"
            " store's answer; read the object back, or send the request again",
        )
    except StoreError as error:
        # A quorum lost is said once, by the store, not once per write it refuses.
        if not isinstance(error, QuorumLost):
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
