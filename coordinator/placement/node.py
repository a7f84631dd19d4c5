"""The engine's inputs and outputs: a node's available view and one container's plan
(placement spec section 2).

Invariant of a ``Node``: core and NUMA ids are non-negative ints, pieces and bytes are
non-negative ints; a NUMA map covers exactly the node's cores; ``numa_memory``, when set,
names exactly the map's NUMA ids; ``cores`` (and the maps) are kept in ascending id
order, so equal nodes have equal layouts whatever order they were written in.

    Node("n1", {0: 100, 1: 100, 2: 100, 3: 100}, numa={0: 0, 1: 0, 2: 1, 3: 1},
         memory=2 * GiB, numa_memory={0: GiB, 1: GiB})
    Node("n2", {0: 30, 1: 100}, memory=8 * GiB).pools          -> ()   (no NUMA map)
    Plan({1: 100, 0: 70}, numa=None, memory=512 * MiB, fragment=0)

Both are immutable: a ``Plan`` is shared by every identical node of a placement, so its
``cores`` dict must never be changed after it is built. A ``Node`` carries a ``Memo`` of
what the engine has worked out about it (its capacity signature, its capacities for the
last few requests): a view never changes, so a memo cannot go stale, and it goes with the
view. Errors are
``PlacementError("invalid_request")`` naming the node, the field, the value and the rule.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from coordinator.placement.errors import invalid_request
from coordinator.placement.request import DEFAULT_SHARE_BASE, check_share_base

GiB = 2**30
_INT = {int}

# A node's capacity key: (P, memory, has a NUMA map, per pool (its NUMA memory or None,
# its available pieces sorted)). Without a map the one pool is every core.
Signature = tuple[int, int, bool, tuple[tuple[int | None, tuple[int, ...]], ...]]

# How many requests' capacities one view keeps (``Memo.caps``); a full memo is emptied
# before the next one is added. One decision asks one request of every candidate view;
# a few deployments of different sizes in turn each find theirs.
MEMO_REQUESTS = 8


class Memo:
    """What the engine has worked out about one ``Node`` view, kept with it so that the
    next decision over the same views looks it up (``engine.kept_signature``,
    ``engine.node_caps``).

    ``signature``: the view's ``Signature``, or None before the first use; ``caps``:
    (X, Y, M) of a cpu-bind request -> (the node's capacity, its per-pool capacities), at
    most ``MEMO_REQUESTS`` entries. Both are pure functions of the view, which never
    changes: an entry is right for as long as the view exists.
    """

    __slots__ = ("caps", "signature")

    def __init__(self) -> None:
        self.signature: Signature | None = None
        self.caps: dict[tuple[int, int, int], tuple[int, tuple[int, ...]]] = {}


@dataclass(frozen=True, slots=True)
class Plan:
    """Where one container goes. ``cores``: core id -> pieces (its X whole cores hold P
    pieces each, its fragment core Y); ``numa``: the NUMA node of a NUMA-local plan, None
    for a cross-NUMA or memory-mode plan; ``memory``: bytes charged (memory_request);
    ``fragment``: the fragment core's id, None when Y = 0. A memory-mode plan has no cores.
    """

    cores: dict[int, int]
    numa: int | None = None
    memory: int = 0
    fragment: int | None = None

    @property
    def pieces(self) -> int:
        """Total pieces charged: X * P + Y."""
        return sum(self.cores.values())


@dataclass(frozen=True, slots=True)
class Node:
    """The AVAILABLE view of a node: ``cores`` core id -> free pieces (capacity minus
    allocations; a core may offer more than ``share_base`` when oversold), ``numa`` core id
    -> NUMA node id (None: no map), ``memory`` free bytes, ``numa_memory`` NUMA id -> free
    bytes (None: not tracked), ``share_base`` pieces per core (P).

    ``shared_pool`` (keyword): the cores no bound container uses (spec section 6), which a
    memory-mode container runs on; ``NodeState.view()`` fills it in. None = every core (a
    bare view is taken as a node without bound containers). The resolved pool is
    ``shared_cores``. ``shared_cpu`` (keyword): the pool's pieces, the most one unbound
    container may ask for; ``shared_free``: the pieces unbound containers may still ask
    for in all (the pool times the node's ``cpu_overcommit``, less what they hold; see
    ``shared_cpu.py``). None: the pool's available pieces, both; resolved as ``pool_cpu``
    and ``pool_free``. ``pools`` lists the NUMA pools: (NUMA id, its core ids ascending),
    NUMA ids ascending; empty without a map (the cross pool is always every core).
    ``memo``: the engine's ``Memo`` of this view (not part of equality).

    An empty ``numa`` or ``numa_memory`` dict means None. Cost of building: O(c log c)
    for c cores.
    """

    name: str
    cores: dict[int, int]
    numa: dict[int, int] | None = None
    memory: int = 0
    numa_memory: dict[int, int] | None = None
    share_base: int = DEFAULT_SHARE_BASE
    shared_pool: Iterable[int] | None = field(default=None, kw_only=True, compare=False)
    shared_cpu: int | None = field(default=None, kw_only=True, compare=False)
    shared_free: int | None = field(default=None, kw_only=True, compare=False)
    shared_cores: tuple[int, ...] = field(init=False, compare=False)
    pool_cpu: int = field(init=False, compare=False)
    pool_free: int = field(init=False, compare=False)
    pools: tuple[tuple[int, tuple[int, ...]], ...] = field(init=False, compare=False, repr=False)
    memo: Memo = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        cores, numa, memory, numa_memory = check_topology(
            self.name, self.cores, self.numa, self.memory, self.numa_memory, self.share_base
        )
        if self.shared_pool is None:
            shared = tuple(cores)
        else:
            shared = tuple(sorted(set(self.shared_pool)))
            for core in shared:
                if core not in cores:
                    raise invalid_request(
                        "shared_pool", core, "is not a core of the node", node=self.name
                    )
        shared_cpu = self.shared_cpu
        if shared_cpu is None:
            shared_cpu = sum([cores[c] for c in shared])
        free = shared_cpu if self.shared_free is None else self.shared_free
        for label, value in (("shared_cpu", shared_cpu), ("shared_free", free)):
            if type(value) is not int or value < 0:
                raise invalid_request(label, value, "is not a non-negative integer", node=self.name)
        self._settle(cores, numa, memory, numa_memory, shared, shared_cpu, free)

    @classmethod
    def checked(
        cls,
        name: str,
        cores: dict[int, int],
        numa: dict[int, int] | None,
        memory: int,
        numa_memory: dict[int, int] | None,
        share_base: int,
        *,
        shared_pool: tuple[int, ...],
        shared_cpu: int,
        shared_free: int,
    ) -> Node:
        """The view ``Node(...)`` builds from these, for fields that already hold its
        invariant as given: ids in ascending order, non-negative ints, the NUMA maps
        complete (None when empty), ``shared_pool`` ascending cores of the node. Not
        checked again: a ``NodeState``'s view is made of its own checked topology
        (``NodeState.view``), and checking it again was most of building one view, built
        anew for every node a decision changed (py-spy of bench/fleet.py). O(1)."""
        new: Node = object.__new__(cls)
        setattr_ = object.__setattr__
        setattr_(new, "name", name)
        setattr_(new, "share_base", share_base)
        setattr_(new, "shared_cpu", shared_cpu)
        setattr_(new, "shared_free", shared_free)
        new._settle(cores, numa, memory, numa_memory, shared_pool, shared_cpu, shared_free)
        return new

    def _settle(
        self,
        cores: dict[int, int],
        numa: dict[int, int] | None,
        memory: int,
        numa_memory: dict[int, int] | None,
        shared: tuple[int, ...],
        shared_cpu: int,
        free: int,
    ) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "cores", cores)
        setattr_(self, "numa", numa)
        setattr_(self, "memory", memory)
        setattr_(self, "numa_memory", numa_memory)
        setattr_(self, "shared_pool", shared)
        setattr_(self, "pool_cpu", shared_cpu)
        setattr_(self, "pool_free", free)
        setattr_(self, "shared_cores", shared)
        setattr_(self, "pools", numa_pools(numa))
        setattr_(self, "memo", Memo())


def numa_pools(numa: Mapping[int, int] | None) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """(NUMA id, its core ids ascending) for every NUMA id, ascending. O(c log c), or a
    dict lookup for a map seen before."""
    if not numa:
        return ()
    return _grouped(tuple(numa.items()))


# Nodes of one cluster share a handful of NUMA maps: grouping a 24-core map takes 4.3 us,
# looking it up 1.8 us (measured; 1,000 views built in 22 ms instead of 25 ms). Bounded,
# and the key is the whole map, so a hit is always right.
@lru_cache(maxsize=1024)
def _grouped(items: tuple[tuple[int, int], ...]) -> tuple[tuple[int, tuple[int, ...]], ...]:
    grouped: dict[int, list[int]] = {}
    for core, node in items:
        grouped.setdefault(node, []).append(core)
    return tuple((node, tuple(sorted(grouped[node]))) for node in sorted(grouped))


def _all_ints(values: Collection[int]) -> bool:
    # Bulk check in C (set of types, min) first; see check_topology.
    return not values or (set(map(type, values)) <= _INT and min(values) >= 0)


def _check_ints(node: str, field: str, values: Iterable[object], what: str) -> None:
    for value in values:
        if type(value) is not int or value < 0:
            raise invalid_request(field, value, f"is not {what}", node=node)


def check_topology(
    name: str,
    cores: Mapping[int, int],
    numa: Mapping[int, int] | None,
    memory: int,
    numa_memory: Mapping[int, int] | None,
    share_base: int,
) -> tuple[dict[int, int], dict[int, int] | None, int, dict[int, int] | None]:
    """Check section 2's rules; return copies in ascending id order (empty maps as None).

    Rules: ids and amounts are non-negative ints; the NUMA map covers every core and names
    no other core; ``numa_memory`` needs a map and names exactly its NUMA ids. Raises
    ``invalid_request`` naming the node, field and value. Cost O(c log c).
    """
    if type(name) is not str:
        raise invalid_request("name", name, "is not a string", node=str(name))
    check_share_base(share_base)
    if not isinstance(cores, Mapping):
        raise invalid_request("cores", cores, "is not a mapping of core id -> pieces", node=name)
    # The whole-column checks run in C; the loops naming the culprit only on failure.
    if not (_all_ints(cores.keys()) and _all_ints(cores.values())):
        _check_ints(name, "cores: core id", cores.keys(), "a non-negative integer id")
        for core, pieces in cores.items():
            if type(pieces) is not int or pieces < 0:
                raise invalid_request(
                    f"cores[{core}]", pieces, "is not a non-negative integer", node=name
                )
    if type(memory) is not int or memory < 0:
        raise invalid_request("memory", memory, "is not a non-negative integer of bytes", node=name)
    cores_out = dict(sorted(cores.items()))
    numa_out: dict[int, int] | None = None
    if numa:
        if not (_all_ints(numa.keys()) and _all_ints(numa.values())):
            _check_ints(name, "numa: core id", numa.keys(), "a non-negative integer id")
            _check_ints(name, "numa: NUMA id", numa.values(), "a non-negative integer id")
        if numa.keys() != cores.keys():
            for core in cores:
                if core not in numa:
                    raise invalid_request(
                        "numa", core, "misses this core (a map covers every core)", node=name
                    )
            for core in numa:
                if core not in cores:
                    raise invalid_request(
                        "numa", core, "names a core the node does not have", node=name
                    )
        numa_out = dict(sorted(numa.items()))
    numa_memory_out: dict[int, int] | None = None
    if numa_memory:
        if numa_out is None:
            raise invalid_request(
                "numa_memory", dict(numa_memory), "is set without a NUMA map", node=name
            )
        if not (_all_ints(numa_memory.keys()) and _all_ints(numa_memory.values())):
            _check_ints(name, "numa_memory: NUMA id", numa_memory.keys(), "a non-negative id")
            for node, amount in numa_memory.items():
                if type(amount) is not int or amount < 0:
                    raise invalid_request(
                        f"numa_memory[{node}]", amount, "is not a non-negative integer", node=name
                    )
        ids = set(numa_out.values())
        if set(numa_memory) != ids:
            other = sorted(set(numa_memory) ^ ids)
            raise invalid_request(
                "numa_memory",
                sorted(numa_memory),
                f"must name exactly the map's NUMA ids {sorted(ids)} (differs on {other})",
                node=name,
            )
        numa_memory_out = dict(sorted(numa_memory.items()))
    return cores_out, numa_out, memory, numa_memory_out
