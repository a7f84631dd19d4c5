"""The lease API: capacity requests and releases (leases spec 2), resource templates,
and each resource's status and leases. Handlers decode, call the service, encode.

Changing a template (PUT, DELETE ``/v1/resources/{id}``) changes configuration and needs an
admin token. Asking for and releasing capacity is what lease clients do, within what the
templates allow, so every valid token may, for the clients of a namespace it may use
(``acting_namespace``); an admin token naming no namespace acts for the cluster's own
clients. Every token may read; a resource's leases it sees by name only for its
namespaces, the others' as totals (``lease_views``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from aiohttp import web

from coordinator.errors import ApiError, NotFound
from coordinator.http.bodies import json_response, read_body
from coordinator.http.roles import principal_of, require_admin, require_namespace
from coordinator.keys import LEASES, METRICS
from coordinator.leases import ResourceTemplate
from coordinator.services.lease_keys import CLUSTER_NAMESPACE
from coordinator.services.lease_service import LeaseRequestError
from coordinator.services.lease_views import leases_seen
from shared.codec import json_decoder
from shared.lease_protocol import CapacityRequest, ReleaseRequest

_decode_capacity: msgspec.json.Decoder[CapacityRequest] = json_decoder(CapacityRequest)
_decode_release: msgspec.json.Decoder[ReleaseRequest] = json_decoder(ReleaseRequest)
_decode_object: msgspec.json.Decoder[dict[str, Any]] = json_decoder(dict[str, Any])


def _refused(error: LeaseRequestError) -> ApiError:
    return ApiError(error.message, details=error.details, code=error.code)


def acting_namespace(request: web.Request, named: str | None) -> str:
    """The namespace whose client a capacity request or release acts for: the one it
    names, if the token may use it (403 ``forbidden`` otherwise); else the token's only
    namespace, or for an admin token the cluster's own (""). A token of several
    namespaces must name one (400 ``namespace_required``)."""
    if named is not None:
        require_namespace(request, named)
        return named
    principal = principal_of(request)
    if principal.admin:
        return CLUSTER_NAMESPACE
    if len(principal.namespaces) == 1:
        (only,) = principal.namespaces
        return only
    namespaces = sorted(principal.namespaces)
    raise ApiError(
        f"this token acts for the namespaces {', '.join(namespaces)}: name one in 'namespace'",
        code="namespace_required",
        details={"namespaces": namespaces},
    )


async def capacity(request: web.Request) -> web.Response:
    body: CapacityRequest = await read_body(request, _decode_capacity, "capacity request")
    namespace = acting_namespace(request, body.namespace)
    leases, counted = request.app[LEASES], request.app[METRICS].lease_requests
    try:
        answer = await leases.capacity(body, namespace)
    except LeaseRequestError as error:
        for asked in body.resources:  # a name no resource has is not a series of its own
            known = leases.status(asked.resource_id) is not None
            resource = asked.resource_id if known else "unknown"
            counted.labels(resource=resource, outcome=error.code).inc()
        raise _refused(error) from error
    wanted = {asked.resource_id: asked.wants for asked in body.resources}
    for got in answer.resources:
        outcome = "granted" if got.gets.capacity >= wanted[got.resource_id] else "cut"
        counted.labels(resource=got.resource_id, outcome=outcome).inc()
    return json_response(answer)


async def release(request: web.Request) -> web.Response:
    body: ReleaseRequest = await read_body(request, _decode_release, "release request")
    await request.app[LEASES].release(body, acting_namespace(request, body.namespace))
    return json_response({})


async def put_template(request: web.Request) -> web.Response:
    require_admin(request, "changing resource templates")
    glob = request.match_info["id"]
    fields: dict[str, Any] = await read_body(request, _decode_object, "resource template")
    if fields.setdefault("identifier_glob", glob) != glob:
        raise ApiError(
            f"identifier_glob {fields['identifier_glob']!r} differs from the path's {glob!r}",
            code="invalid_template",
        )
    try:
        template = msgspec.convert(fields, ResourceTemplate)
    except msgspec.ValidationError as error:
        raise ApiError(f"invalid resource template: {error}", code="invalid_template") from error
    try:
        await request.app[LEASES].put_template(template)
    except LeaseRequestError as error:
        raise _refused(error) from error
    return json_response(template)


async def get_template(request: web.Request) -> web.Response:
    glob = request.match_info["id"]
    for template in request.app[LEASES].templates:
        if template.identifier_glob == glob:
            return json_response(template)
    raise NotFound(f"no resource template {glob!r}", details={"template": glob})


async def delete_template(request: web.Request) -> web.Response:
    require_admin(request, "deleting resource templates")
    glob = request.match_info["id"]
    try:
        deleted = await request.app[LEASES].delete_template(glob)
    except LeaseRequestError as error:
        raise _refused(error) from error
    if not deleted:
        raise NotFound(f"no resource template {glob!r}", details={"template": glob})
    return json_response({})


async def list_resources(request: web.Request) -> web.Response:
    service = request.app[LEASES]
    return json_response({"templates": service.templates, "resources": service.statuses()})


async def resource_status(request: web.Request) -> web.Response:
    resource_id = request.match_info["id"]
    status = request.app[LEASES].status(resource_id)
    if status is None:
        message = f"no resource {resource_id!r}: it matches no template and holds no lease"
        raise NotFound(message, details={"resource": resource_id})
    return json_response(status)


async def resource_leases(request: web.Request) -> web.Response:
    resource_id = request.match_info["id"]
    leases = request.app[LEASES].leases(resource_id)
    return json_response(leases_seen(resource_id, leases, principal_of(request).may_use))


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def add_lease_routes(app: web.Application, forward: Handler | None = None) -> None:
    """The lease routes; each handled by ``forward`` if given (``http.lease_forward``)."""
    routes: list[tuple[str, str, Handler]] = [
        ("POST", "/v1/capacity", capacity),
        ("POST", "/v1/capacity/release", release),
        ("GET", "/v1/resources", list_resources),
        ("PUT", "/v1/resources/{id}", put_template),
        ("GET", "/v1/resources/{id}", get_template),
        ("DELETE", "/v1/resources/{id}", delete_template),
        ("GET", "/v1/resources/{id}/status", resource_status),
        ("GET", "/v1/resources/{id}/leases", resource_leases),
    ]
    for method, path, handler in routes:
        app.router.add_route(method, path, forward or handler)
