"""A node's page: its state, its core map, its GPUs and MIG devices, and its containers.

A container of a namespace the viewer may not use shows as "another namespace": its
cores are taken, but neither its name nor its page is shown.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from coordinator.deployments.container_state import container_state
from coordinator.deployments.service import DeploymentService
from coordinator.errors import NotFound, UnusableNode
from coordinator.http.roles import Principal, principal_of
from coordinator.keys import DEPLOYMENTS, REGISTRY
from coordinator.placement.state import NodeState
from coordinator.ui.core_map import Holder, core_map
from coordinator.ui.rendering import render
from shared.api.containers import ContainerRecord
from shared.inventory import Gpu
from shared.quantity import format_memory_approx

PALETTE_SIZE = 8  # colours of the dashboard's stylesheet: .c0 to .c7
HIDDEN = Holder("another namespace", "", None, -1)
SHORT_CHARS = 6  # of a deployment's name, on a CPU's box in the core map


@dataclass(frozen=True)
class NodeContainer:
    holder: Holder
    id: str
    deployment: str  # namespace/name
    cpus: str  # its cpuset, or "shared pool" for an unbound container
    memory: str
    state: str


@dataclass(frozen=True)
class GpuBox:
    """A GPU, or one of its MIG devices, and who holds it."""

    label: str
    memory: str
    holders: tuple[Holder, ...]
    mig: bool  # a MIG device
    partitioned: bool  # a GPU in MIG mode: its devices are held, not itself


async def node_page(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    record = request.config_dict[REGISTRY].get(name)
    if record is None:
        return render(request, "missing.html", {"what": f"node {name}"}, status=404)
    service = request.config_dict[DEPLOYMENTS]
    principal = principal_of(request)
    try:
        state, cordoned = service.allocation(name)
    except (NotFound, UnusableNode) as error:
        return render(request, "node.html", {"node": record, "problem": str(error)})
    records = _records(service, state)
    holders = _holders(records, principal, state)
    groups = core_map(
        record.inventory,
        plans={cid: alloc.plan.cores for cid, alloc in state.allocations.items()},
        share_base=state.share_base,
        holder=lambda cid: holders.get(cid, HIDDEN),
    )
    containers = [_container(service, records[cid], holders[cid], state) for cid in sorted(holders)]
    context = {
        "node": record,
        "problem": "",
        "cordoned": cordoned,
        "groups": groups,
        "shared_pool": len(state.shared_pool()),
        "memory_used": format_memory_approx(state.memory_used),
        "memory": format_memory_approx(state.memory),
        "containers": containers,
        "hidden": len(state.allocations) - len(holders),
        "gpus": _gpus(record.inventory.gpus, records, holders),
    }
    return render(request, "node.html", context)


def _records(service: DeploymentService, state: NodeState) -> dict[str, ContainerRecord]:
    found = {cid: service.container(cid) for cid in state.allocations}
    return {cid: record for cid, record in found.items() if record is not None}


def _holders(
    records: dict[str, ContainerRecord], principal: Principal, state: NodeState
) -> dict[str, Holder]:
    """The containers the viewer may see, each with its label, page and colour: a
    colour of the palette for each that holds CPUs, in order of id, and none (-1) for
    those on the shared pool."""
    seen = sorted(cid for cid, record in records.items() if principal.may_use(record.namespace))
    holders = {}
    coloured = 0
    for cid in seen:
        record = records[cid]
        page = f"/ui/deployments/{record.namespace}/{record.deployment}"
        label = f"{record.namespace}/{record.deployment} {cid}"
        short = record.deployment[:SHORT_CHARS]
        colour = -1
        if state.allocations[cid].plan.cores:
            colour, coloured = coloured % PALETTE_SIZE, coloured + 1
        holders[cid] = Holder(label, short, page, colour)
    return holders


def _container(
    service: DeploymentService, record: ContainerRecord, holder: Holder, state: NodeState
) -> NodeContainer:
    bound = record.limits.cpuset_cpus if state.allocations[record.id].plan.cores else ""
    return NodeContainer(
        holder=holder,
        id=record.id,
        deployment=f"{record.namespace}/{record.deployment}",
        cpus=bound or "shared pool",
        memory=format_memory_approx(record.limits.mem_limit),
        state=container_state(record, service.observed(record.id))[0],
    )


def _gpus(
    gpus: list[Gpu], records: dict[str, ContainerRecord], holders: dict[str, Holder]
) -> list[GpuBox]:
    """Every GPU, and each MIG device of one in MIG mode, with its holders."""
    by_uuid: dict[str, list[Holder]] = {}
    for cid, record in records.items():
        for uuid in record.gpus:
            by_uuid.setdefault(uuid, []).append(holders.get(cid, HIDDEN))
    boxes = []
    for gpu in gpus:
        boxes.append(
            GpuBox(
                label=f"GPU {gpu.index} {gpu.name}",
                memory=format_memory_approx(gpu.memory),
                holders=tuple(by_uuid.get(gpu.uuid, ())),
                mig=False,
                partitioned=gpu.mig_enabled,
            )
        )
        boxes.extend(
            GpuBox(
                label=f"MIG {device.profile} (GPU {gpu.index})",
                memory=format_memory_approx(device.memory),
                holders=tuple(by_uuid.get(device.uuid, ())),
                mig=True,
                partitioned=False,
            )
            for device in gpu.mig_devices
        )
    return boxes
