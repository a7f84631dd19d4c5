"""JSON in and out of every handler: the request's body decoded, or a 400 that says what
is wrong where; the answer encoded with allot's own value types (``shared.codec``)."""

from __future__ import annotations

from typing import TypeVar

import msgspec
from aiohttp import web

from coordinator.errors import ApiError
from shared.codec import to_json

T = TypeVar("T")


def json_response(body: object, status: int = 200) -> web.Response:
    return web.Response(status=status, body=to_json(body), content_type="application/json")


async def read_body(request: web.Request, decoder: msgspec.json.Decoder[T], what: str) -> T:
    """The request's JSON body decoded by ``decoder``; 400 ``invalid_request`` saying what
    is wrong where (``what``: "plan request", ...) when it cannot be."""
    try:
        return decoder.decode(await request.read())
    except (msgspec.ValidationError, msgspec.DecodeError) as error:
        raise ApiError(f"invalid {what}: {error}", code="invalid_request") from error
