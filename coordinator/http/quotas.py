"""The quota API (quotas spec section 2): ElasticQuotas and CompositeElasticQuotas.

    PUT/GET/DELETE /v1/elasticquotas/{name}            {"namespace": ..., "min": ..., "max": ...}
    PUT/GET/DELETE /v1/compositeelasticquotas/{name}   {"namespaces": [...], "min": ..., "max": ...}
    GET /v1/quotas          every quota with status, Σmin, the cluster's capacity, warnings

Writes need an admin token (403 ``forbidden`` otherwise); every valid token may read. A
write that breaks a rule is 422 (format) or 409 (conflict) with the rule as the error code
and every offending item in the details; nothing changes.
"""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from coordinator.errors import ApiError, Conflict, NotFound, Unprocessable
from coordinator.http.bodies import json_response, read_body
from coordinator.http.roles import require_admin
from coordinator.keys import DEPLOYMENTS, QUOTAS, REGISTRY
from coordinator.quotas import COMPOSITE, ELASTIC, Quota, QuotaError
from shared.codec import json_decoder


class ElasticQuotaBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    namespace: str
    min: dict[str, Any] = {}
    max: dict[str, Any] | None = None


class CompositeQuotaBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    namespaces: list[str]
    min: dict[str, Any] = {}
    max: dict[str, Any] | None = None


_decode_elastic: msgspec.json.Decoder[ElasticQuotaBody] = json_decoder(ElasticQuotaBody)
_decode_composite: msgspec.json.Decoder[CompositeQuotaBody] = json_decoder(CompositeQuotaBody)


async def _quota_from(request: web.Request, kind: str) -> Quota:
    name = request.match_info["name"]
    if kind == ELASTIC:
        eq = await read_body(request, _decode_elastic, f"{kind} body")
        return Quota(name, [eq.namespace], dict(eq.min), eq.max, composite=False)
    ceq = await read_body(request, _decode_composite, f"{kind} body")
    return Quota(name, list(ceq.namespaces), dict(ceq.min), ceq.max, composite=True)


def _refused(error: QuotaError) -> ApiError:
    refusal = Conflict if error.status == 409 else Unprocessable
    return refusal(error.message, details=dict(error.details), code=error.code)


def _routes_for(kind: str) -> list[web.RouteDef]:
    async def put(request: web.Request) -> web.Response:
        require_admin(request, f"changing {kind}s")
        quota = await _quota_from(request, kind)
        deployments = request.app[DEPLOYMENTS]
        try:
            stored = await deployments.put_quota(quota)
        except QuotaError as error:
            raise _refused(error) from error
        return json_response(request.app[QUOTAS].view(stored, deployments.quota_requests))

    async def get(request: web.Request) -> web.Response:
        requested = request.app[DEPLOYMENTS].quota_requests
        return json_response(request.app[QUOTAS].view(_existing(request, kind), requested))

    async def delete(request: web.Request) -> web.Response:
        require_admin(request, f"deleting {kind}s")
        quota = _existing(request, kind)
        await request.app[DEPLOYMENTS].delete_quota(kind, quota.name)
        return json_response({})

    path = f"/v1/{kind.lower()}s/{{name}}"
    return [web.put(path, put), web.get(path, get), web.delete(path, delete)]


def _existing(request: web.Request, kind: str) -> Quota:
    name = request.match_info["name"]
    quota = request.app[QUOTAS].get(kind, name)
    if quota is None:
        raise NotFound(f"no {kind} named {name!r}", details={"quota": name, "kind": kind})
    return quota


async def list_quotas(request: web.Request) -> web.Response:
    requested = request.app[DEPLOYMENTS].quota_requests
    nodes = request.app[REGISTRY].usable()
    return json_response(request.app[QUOTAS].summary(nodes, requested))


def add_quota_routes(app: web.Application) -> None:
    app.router.add_routes([*_routes_for(ELASTIC), *_routes_for(COMPOSITE)])
    app.router.add_get("/v1/quotas", list_quotas)
