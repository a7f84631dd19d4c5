"""What a node offers and holds, and the admin's levers on it.

    GET   /v1/nodes/{name}/allocation   capacity, allocated, available, shared pool,
                                        cordoned, the containers there, and the
                                        extended resources offered and held
    PATCH /v1/nodes/{name}/capacity     SetNode: {"mode": "absolute"|"delta", "cores":
                                        {id: pieces}, "numa": {core: numa}, "memory",
                                        "numa_memory": {numa: bytes}, "cpu_overcommit":
                                        "1.5" (set as given in either mode)}
    POST  /v1/nodes/{name}/cordon       no new containers there
    POST  /v1/nodes/{name}/uncordon
    POST  /v1/nodes/{name}/drain        cordon, and move every container elsewhere: the
                                        ids released, each one's stand-in, where the
                                        stand-ins went, and why the rest are pending
    DELETE /v1/nodes/{name}             take a lost node off the books (409 while it is
                                        not lost): the same answer as drain's

Changing a node is admin-only; reading its allocation is open to any token, but a
namespace token sees only its namespaces' containers by id, the others as a count.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from aiohttp import web

from coordinator.deployments.pending import Pass
from coordinator.deployments.service import DeploymentService
from coordinator.http.bodies import json_response, read_body
from coordinator.http.host_acks import hosts_acknowledged
from coordinator.http.roles import ADMIN, Principal, principal_of, require_admin
from coordinator.keys import DEPLOYMENTS
from coordinator.placement import NodeState
from coordinator.placement.shared_cpu import overcommit_text
from shared.api.node_admin import Allocation
from shared.codec import json_decoder


class CapacitySpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    mode: Literal["absolute", "delta"]
    cores: dict[int, int] | None = None
    numa: dict[int, int] | None = None
    memory: int | str | None = None
    numa_memory: dict[int, int | str] | None = None
    cpu_overcommit: str | int | float | None = None


_decode_capacity: msgspec.json.Decoder[CapacitySpec] = json_decoder(CapacitySpec)


async def get_allocation(request: web.Request) -> web.Response:
    service, node = _service_and_node(request)
    state, cordoned = service.allocation(node)
    return json_response(_allocation(service, state, cordoned, principal_of(request)))


async def set_capacity(request: web.Request) -> web.Response:
    require_admin(request, "changing what a node offers")
    service, node = _service_and_node(request)
    body = await read_body(request, _decode_capacity, "node capacity")
    fields = {k: v for k, v in msgspec.structs.asdict(body).items() if k != "mode"}
    state = await service.set_node(node, body.mode, **fields)
    return json_response(_allocation(service, state, service.allocation(node)[1], ADMIN))


async def cordon(request: web.Request) -> web.Response:
    return await _cordoned(request, True)


async def uncordon(request: web.Request) -> web.Response:
    return await _cordoned(request, False)


async def drain(request: web.Request) -> web.Response:
    require_admin(request, "draining a node")
    service, node = _service_and_node(request)
    moved = await service.drain(node)
    acknowledged = await hosts_acknowledged(request, {node})
    return json_response(
        {"node": node, "cordoned": True, **_moved(moved), "hosts_acknowledged": acknowledged}
    )


async def delete_node(request: web.Request) -> web.Response:
    """Only a lost node is deleted, and its agent is gone: nothing to wait for."""
    require_admin(request, "deleting a node")
    service, node = _service_and_node(request)
    moved = await service.delete_node(node)
    return json_response({"node": node, "deleted": True, **_moved(moved)})


def _moved(moved: Pass) -> dict[str, object]:
    """The containers a drain or a deletion took off a node, and where they went."""
    return {
        "released": list(moved.stand_ins),
        "stand_ins": moved.stand_ins,
        "placed": moved.placed,
        "pending": moved.waiting,
    }


async def _cordoned(request: web.Request, cordoned: bool) -> web.Response:
    require_admin(request, "cordoning a node")
    service, node = _service_and_node(request)
    await service.cordon(node, cordoned)
    return json_response({"node": node, "cordoned": cordoned})


def _service_and_node(request: web.Request) -> tuple[DeploymentService, str]:
    return request.app[DEPLOYMENTS], request.match_info["name"]


def _allocation(
    service: DeploymentService, state: NodeState, cordoned: bool, principal: Principal
) -> Allocation:
    """The node's allocation as ``principal`` may see it: every amount, but only the
    containers of its namespaces by id."""
    offered, used = service.extended(state.name)
    visible = [cid for cid in sorted(state.allocations) if _visible(service, cid, principal)]
    return Allocation(
        node=state.name,
        cordoned=cordoned,
        share_base=state.share_base,
        cores=dict(state.cores),
        used=dict(state.used),
        memory=state.memory,
        memory_used=state.memory_used,
        numa=state.numa,
        numa_memory=state.numa_memory,
        shared_pool=list(state.shared_pool()),
        containers=visible,
        version=state.version,
        extended=offered,
        extended_used=used,
        other_containers=len(state.allocations) - len(visible),
        shared_cpu=state.shared_cpu,
        cpu_overcommit=overcommit_text(state.cpu_overcommit),
        shared_limit=state.shared_limit,
        unbound_cpu=state.unbound_cpu,
    )


def _visible(service: DeploymentService, container_id: str, principal: Principal) -> bool:
    record = service.container(container_id)
    return record is not None and principal.may_use(record.namespace)


def add_node_admin_routes(app: web.Application) -> None:
    node = "/v1/nodes/{name}"
    app.router.add_get(node + "/allocation", get_allocation)
    app.router.add_patch(node + "/capacity", set_capacity)
    app.router.add_post(node + "/cordon", cordon)
    app.router.add_post(node + "/uncordon", uncordon)
    app.router.add_post(node + "/drain", drain)
    app.router.add_delete(node, delete_node)
