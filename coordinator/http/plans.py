"""``POST /v1/plans``: a what-if placement (Eru's CalculateCapacity). It commits nothing.

For the registered ready, uncordoned nodes as they are now (what their containers leave
free, the shared pool's CPU included: the nodes a deploy would place on, placed the way a
deploy places, so AUTO puts unbound containers on nodes not under CPU pressure first), or
for nodes described inline (empty, and calm: pressure is a reading of a real node), it
answers each node's capacity for the request, how many
containers the strategy would add where, and each container's cores, fragment core,
NUMA node and Docker settings. A placement that cannot be made is 409 with the rule
that failed and every node's capacity; a request that cannot be read is 400. A
registered node that cannot be used (its record breaks today's rules) is left out and
named with the reason in ``skipped_nodes``, in the answer or in the refusal's details.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from aiohttp import web

from coordinator.errors import ApiError, Conflict
from coordinator.http.bodies import json_response, read_body
from coordinator.keys import CONFIG, DEPLOYMENTS
from coordinator.placement import Node, Placement, PlacementError, Planner, Request, place
from coordinator.services.plan_nodes import (
    InlineNode,
    NodeSpecError,
    node_from_spec,
)
from shared.api.plans import PlannedContainer, PlannedNode, PlanResponse
from shared.codec import json_decoder


class RequestSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    cpu: str | int | float
    memory: str | int = 0
    cpu_bind: bool = False


class PlanRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    request: RequestSpec
    count: int
    strategy: str = "auto"
    nodes_limit: int = 0
    nodes: list[InlineNode] | None = None  # None: the registered ready nodes


_decode_plan: msgspec.json.Decoder[PlanRequest] = json_decoder(PlanRequest)


async def plan(request: web.Request) -> web.Response:
    body = await read_body(request, _decode_plan, "plan request")
    share_base = request.app[CONFIG].share_base
    skipped: dict[str, str] = {}
    nodes, existing = _candidates(request, body, share_base, skipped)
    try:
        wanted = Request(body.request.cpu, body.request.memory, body.request.cpu_bind)
        if body.nodes is None:  # the registered nodes, as a deploy now would place on them
            placement = request.app[DEPLOYMENTS].plan(
                nodes, wanted, body.count, body.strategy, body.nodes_limit
            )
        else:
            placement = place(nodes, wanted, body.count, body.strategy, body.nodes_limit, existing)
    except PlacementError as error:
        refusal = _refusal(error, nodes, body)
        if skipped:
            refusal.details["skipped_nodes"] = skipped
        raise refusal from error
    return json_response(_answer(placement, body, existing, skipped))


def _candidates(
    request: web.Request, body: PlanRequest, share_base: int, skipped: dict[str, str]
) -> tuple[list[Node], dict[str, int]]:
    """The nodes to plan on and the containers already there; a registered node that
    cannot be used goes into ``skipped`` instead, with the reason."""
    if body.nodes is None:
        nodes, left_out = request.app[DEPLOYMENTS].plan_views()
        skipped.update(left_out)
        return nodes, {}
    names = [spec.name for spec in body.nodes]
    if len(set(names)) != len(names):
        raise ApiError("inline nodes must have distinct names", code="invalid_request")
    try:
        nodes = [node_from_spec(spec, share_base=share_base) for spec in body.nodes]
    except (NodeSpecError, PlacementError) as error:
        raise ApiError(str(error), code="invalid_request") from error
    return nodes, {spec.name: spec.existing for spec in body.nodes}


def _refusal(error: PlacementError, nodes: Sequence[Node], body: PlanRequest) -> ApiError:
    details = {key: value for key, value in error.details.items() if _plain(value)}
    if error.kind == "invalid_request":
        return ApiError(error.message, details=details, code=error.kind)
    wanted = Request(body.request.cpu, body.request.memory, body.request.cpu_bind)
    details["capacities"] = Planner(nodes, wanted).capacities()
    return Conflict(error.message, details=details, code=error.kind)


def _plain(value: object) -> bool:
    """Whether a detail can go into the JSON error body as it is."""
    return isinstance(value, str | int | float | bool | list | dict | tuple) or value is None


def _answer(
    placement: Placement, body: PlanRequest, existing: dict[str, int], skipped: dict[str, str]
) -> PlanResponse:
    resources = placement.resources
    planned = []
    for name in sorted(placement.capacities):
        containers = [
            PlannedContainer(
                cores=dict(plan.cores),
                fragment=plan.fragment,
                numa=plan.numa,
                memory=plan.memory,
                docker=limits,
            )
            for plan, limits in zip(
                placement.plans.get(name, []), placement.limits(name), strict=True
            )
        ]
        planned.append(
            PlannedNode(
                name=name,
                capacity=placement.capacities[name],
                existing=existing.get(name, 0),
                deploy=placement.deploy.get(name, 0),
                containers=containers,
            )
        )
    return PlanResponse(
        cpu_pieces=resources.cpu_request,
        share_base=resources.share_base,
        memory=resources.memory_request,
        cpu_bind=resources.cpu_bind,
        strategy=body.strategy,
        count=body.count,
        capacity=sum(placement.capacities.values()),
        nodes=planned,
        skipped_nodes=skipped,
    )


def add_plan_routes(app: web.Application) -> None:
    app.router.add_post("/v1/plans", plan)
