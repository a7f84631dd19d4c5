"""How ``allotctl`` shows a node's allocation and the answers of cordon, uncordon, drain
and node delete: each view takes the API's answer (JSON) and gives the text a person reads.

CPU is shown in cores (the API counts pieces, ``share_base`` of them to a core); memory
in its largest exact binary unit, or to one decimal when no unit divides it.
"""

from __future__ import annotations

from client.answers import AnswerDecoder
from shared.api.node_admin import Allocation, Cordoned, NodeDeleted
from shared.cpuset import docker_cpuset
from shared.quantity import format_cpu, format_memory, format_memory_approx
from shared.text import table

_allocation = AnswerDecoder(Allocation)
_cordoned = AnswerDecoder(Cordoned)
_deleted = AnswerDecoder(NodeDeleted)


def allocation_view(body: bytes) -> str:
    """What the node offers and what is allocated there, then core by core. CPU is
    allocated two ways: bound containers hold pieces of cores (the table's BOUND), and
    unbound ones are charged their requests on the shared pool, the cores no bound
    container uses, up to its CPUs times the node's ``cpu_overcommit``."""
    node = _allocation.decode(body)
    offered, bound = sum(node.cores.values()), sum(node.used.values())
    used = bound + node.unbound_cpu
    numa_memory = node.numa_memory or {}
    head = table(
        None,
        [
            ("node", node.node),
            ("cordoned", "yes (takes no new containers)" if node.cordoned else "no"),
            (
                "cores",
                f"{_cores(node, used)} of {_cores(node, offered)} used"
                f" ({_cores(node, bound)} bound, {_cores(node, node.unbound_cpu)} unbound)",
            ),
            ("share base", f"{node.share_base} pieces per core"),
            ("memory", f"{_memory(node.memory_used)} of {_memory(node.memory)} used"),
            ("numa memory", ", ".join(f"{n}={_memory(b)}" for n, b in numa_memory.items()) or "-"),
            ("shared pool", _shared_pool(node)),
            ("extended", _extended(node)),
            ("containers", _containers(node.containers)),
            ("version", node.version),
        ],
    )
    if not node.cores:
        return head + "\n\nno cores offered"
    numa = node.numa or {}
    rows = [
        (
            core,
            numa.get(core, "-"),
            _cores(node, pieces),
            _cores(node, node.used.get(core, 0)),
            _cores(node, pieces - node.used.get(core, 0)),
        )
        for core, pieces in sorted(node.cores.items())
    ]
    return head + "\n\n" + table(["CORE", "NUMA", "OFFERED", "BOUND", "FREE"], rows)


def cordoned_view(body: bytes) -> str:
    answer = _cordoned.decode(body)
    return f"{answer.node} {'cordoned' if answer.cordoned else 'uncordoned'}"


def drained_view(body: bytes) -> str:
    """``node-b drained: moved 1, pending 1`` and a line per container moved."""
    return _moved_off(_cordoned.decode(body), "drained")


def node_deleted_view(body: bytes) -> str:
    """``node-c deleted: moved 1, pending 0`` and a line per container moved."""
    return _moved_off(_deleted.decode(body), "deleted")


def _moved_off(answer: Cordoned | NodeDeleted, done: str) -> str:
    head = f"{answer.node} {done}: moved {len(answer.placed)}, pending {len(answer.pending)}"
    lines = [head]
    for old in answer.released:
        new = answer.stand_ins.get(old, "?")
        if new in answer.placed:
            lines.append(f"  {old} -> {new} on {answer.placed[new]}")
        else:
            lines.append(f"  {old} -> {new} pending: {answer.pending.get(new, '?')}")
    return "\n".join(lines)


def drain_left_pending(body: bytes) -> bool:
    """Whether the drain left containers pending (``allotctl drain`` then exits 3)."""
    return bool(_cordoned.decode(body).pending)


def _cores(node: Allocation, pieces: int) -> str:
    return format_cpu(pieces, share_base=node.share_base)


def _shared_pool(node: Allocation) -> str:
    """``1 (1 CPU x cpu_overcommit 1.5 = 1.5 for unbound containers, 0.5 requested)``."""
    cores = docker_cpuset(node.shared_pool)
    if not cores:
        return "- (every core is bound)"
    return (
        f"{cores} ({_cores(node, node.shared_cpu)} CPU x cpu_overcommit {node.cpu_overcommit}"
        f" = {_cores(node, node.shared_limit)} for unbound containers,"
        f" {_cores(node, node.unbound_cpu)} requested)"
    )


def _extended(node: Allocation) -> str:
    """Each extended resource offered: ``example.com/fpga 1 of 2 used``."""
    used = node.extended_used
    return (
        ", ".join(f"{name} {used.get(name, 0)} of {n} used" for name, n in node.extended.items())
        or "-"
    )


def _memory(amount: int) -> str:
    exact = format_memory(amount)
    return format_memory_approx(amount) if exact.isdigit() and amount >= 1024 else exact


def _containers(ids: list[str]) -> str:
    return f"{len(ids)}: {', '.join(ids)}" if ids else "none"
