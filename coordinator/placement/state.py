"""A node as stored: its configured capacity and its allocations, and the pure operations
that change it (placement spec sections 2, 6, 10 and 11).

Invariants of a ``NodeState`` (checked when one is built, so every operation's result
holds them too):

1. every allocated piece, byte and NUMA byte is within the configured capacity: per core,
   for the node's memory and, when tracked, for each NUMA node's memory;
2. a NUMA-local allocation's cores all sit on its NUMA node; a plan's cores add up to the
   container's cpu_request (cpu-bind) or are empty (memory mode); its memory is the
   container's memory_request;
3. the available view is capacity minus allocations (the shared cores kept for the
   unbound containers show nothing free: ``kept_cores``), and ``shared_pool()`` is the cores no
   bound container uses (possibly none: it is never widened onto bound cores);
4. (kept by the operations, not checked when one is built, so that a record an older
   version stored still loads) the unbound containers' CPU requests add up to at most the
   shared pool's pieces times ``cpu_overcommit``, and none asks for more than the pool
   has (``shared_cpu.py``): an operation that would break it, or break it further, is
   refused with the numbers.

    state = NodeState("n1", {0: 100, 1: 100}, memory=8 * GiB)
    change = assign(state, "c1", plan, resources)   # Change(state=..., updates={"c1": Limits})
    realloc(change.state, "c1", Delta(cpu="0.5"))    # all or nothing; raises on shortage
    replace(change.state, "c1", "c2")                # same allocation, new container id
    set_node(change.state, "delta", cores={2: 100})  # SetNode, rejected as a whole

Every operation is pure: it returns a ``Change`` holding a new state with ``version + 1``
and the Docker settings of every container it created or changed (including memory-mode
containers whose shared pool moved), or raises ``PlacementError`` -- the given state is
never touched. An operation that changes nothing returns the same state and no updates.
Committing with the version check (section 12) is the service's job.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from coordinator.placement.docker import container_limits
from coordinator.placement.engine import memory_plan
from coordinator.placement.errors import Kind, PlacementError, invalid_request
from coordinator.placement.node import Node, Plan, check_topology
from coordinator.placement.request import (
    DEFAULT_SHARE_BASE,
    CpuValue,
    MemoryValue,
    Normalized,
    check_flag,
    describe,
    normalize_amounts,
    signed_cpu,
    signed_memory,
)
from coordinator.placement.shared_cpu import (
    describe_pool,
    kept_cores,
    overcommit_ratio,
    overcommit_text,
    shared_limit,
)
from shared.protocol import Limits
from shared.quantity import format_cpu, format_memory


@dataclass(frozen=True, slots=True)
class Allocation:
    """One container's allocation: its plan and its normalised resources. The node is
    charged the plan's pieces, ``memory_request`` and, for a NUMA-local plan,
    ``memory_request`` of that NUMA node's memory."""

    plan: Plan
    resources: Normalized


@dataclass(frozen=True, slots=True)
class NodeState:
    """A node record: configured capacity (``cores`` core id -> pieces, possibly above
    ``share_base`` to oversell; ``numa``; ``memory``; ``numa_memory``, None = not
    tracked), ``allocations`` container id -> ``Allocation``, ``version`` (+1 per
    change) and ``cpu_overcommit`` (the shared pool's oversell ratio, 1 = none; given as a
    decimal, kept as a Fraction). Building one checks invariants 1-3 (``invalid_request``
    otherwise); cost O(c log c + the allocations' cores).

    Derived (read-only): ``used`` pieces per core, ``memory_used``, ``numa_used`` NUMA id
    -> bytes of NUMA-local allocations; ``bound_cpu`` and ``unbound_cpu``, the pieces
    bound and unbound containers ask for; ``shared_cpu``, the shared pool's pieces, and
    ``shared_limit``, those times ``cpu_overcommit``.
    """

    name: str
    cores: dict[int, int]
    numa: dict[int, int] | None = None
    memory: int = 0
    numa_memory: dict[int, int] | None = None
    share_base: int = DEFAULT_SHARE_BASE
    allocations: dict[str, Allocation] = field(default_factory=dict)
    version: int = 0
    cpu_overcommit: Fraction = Fraction(1)
    used: dict[int, int] = field(init=False, repr=False, compare=False)
    memory_used: int = field(init=False, repr=False, compare=False)
    numa_used: dict[int, int] = field(init=False, repr=False, compare=False)
    bound_cpu: int = field(init=False, repr=False, compare=False)
    unbound_cpu: int = field(init=False, repr=False, compare=False)
    shared_cpu: int = field(init=False, repr=False, compare=False)
    shared_limit: int = field(init=False, repr=False, compare=False)
    _unbound_largest: int = field(init=False, repr=False, compare=False)
    _shared: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _view: Node | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        cores, numa, _memory, numa_memory = check_topology(
            self.name, self.cores, self.numa, self.memory, self.numa_memory, self.share_base
        )
        if type(self.version) is not int or self.version < 0:
            raise invalid_request(
                "version", self.version, "must be an integer >= 0", node=self.name
            )
        setattr_ = object.__setattr__
        setattr_(self, "cores", cores)
        setattr_(self, "numa", numa)
        setattr_(self, "numa_memory", numa_memory)
        setattr_(self, "cpu_overcommit", overcommit_ratio(self.cpu_overcommit))
        self._derive(dict(self.allocations), {})

    @classmethod
    def _with_allocations(cls, state: NodeState, allocations: dict[str, Allocation]) -> NodeState:
        """``state`` with these allocations and the next version. Its topology was checked
        when ``state`` was built and is not checked again: that check was the largest
        part of assigning a container (py-spy of bench/fleet.py), and every assign,
        release, replace and realloc made a new state. O(the allocations' cores)."""
        new = cls._next_of(state)
        new._derive(allocations, state.allocations)
        return new

    @classmethod
    def _with_added(cls, state: NodeState, container_id: str, alloc: Allocation) -> NodeState:
        """``state`` with one allocation more and the next version: its derived amounts
        moved by that allocation's alone, so charging a container costs O(its cores), not
        O(the node's containers). ``_derive`` over every allocation of the node was the
        largest part of ``assign`` in bench/fleet.py's profile (9 % of the coordinator
        during a deploy storm at 20 containers a node). Checks what ``_derive`` would."""
        name, cores = state.name, state.cores
        _check_container_id(name, container_id)
        _check_allocation(name, container_id, alloc, cores, state.numa, state.share_base)
        plan, resources = alloc.plan, alloc.resources
        used = state.used
        newly_bound = False
        if plan.cores:
            used = dict(used)
            for c, pieces in plan.cores.items():
                newly_bound = newly_bound or used[c] == 0
                used[c] += pieces
                _check_core_use(name, cores, c, used[c])
        memory_used = state.memory_used + resources.memory_request
        _check_memory_use(name, state.memory, memory_used)
        numa_used = state.numa_used
        if plan.numa is not None:
            numa_used = dict(numa_used)
            numa_used[plan.numa] += resources.memory_request
            _check_numa_use(name, state.numa_memory, plan.numa, numa_used[plan.numa])
        unbound_cpu, largest = state.unbound_cpu, state._unbound_largest
        if not resources.cpu_bind:
            unbound_cpu += resources.cpu_request
            largest = max(largest, resources.cpu_request, 1)
        new = cls._next_of(state)
        new._set_derived(
            {**state.allocations, container_id: alloc},
            used,
            memory_used,
            numa_used,
            unbound_cpu,
            largest,
            shared=None if newly_bound else (state._shared, state.shared_cpu),
        )
        return new

    @classmethod
    def _next_of(cls, state: NodeState) -> NodeState:
        """A state of ``state``'s (checked) topology and the next version, its
        allocations and derived fields not set yet."""
        new: NodeState = object.__new__(cls)
        setattr_ = object.__setattr__
        for name in (
            "name",
            "cores",
            "numa",
            "memory",
            "numa_memory",
            "share_base",
            "cpu_overcommit",
        ):
            setattr_(new, name, getattr(state, name))
        setattr_(new, "version", state.version + 1)
        return new

    def _derive(self, allocations: dict[str, Allocation], checked: dict[str, Allocation]) -> None:
        """Check ``allocations`` against the (checked) topology -- but for those that are
        the very objects in ``checked``, checked already on this topology -- and set them
        with the derived fields."""
        cores, numa = self.cores, self.numa
        used = dict.fromkeys(cores, 0)
        numa_used = dict.fromkeys(sorted(set(numa.values())) if numa else (), 0)
        memory_used = 0
        unbound_cpu = largest = 0
        # Allocations are immutable and a load gives equal ones one object (a deployment's
        # unbound containers): each object is checked on this topology once.
        passed: set[int] = set()
        for cid, alloc in allocations.items():
            if checked.get(cid) is not alloc:
                _check_container_id(self.name, cid)
                if id(alloc) not in passed:
                    _check_allocation(self.name, cid, alloc, cores, numa, self.share_base)
                    passed.add(id(alloc))
            for c, pieces in alloc.plan.cores.items():
                used[c] += pieces
            if not alloc.resources.cpu_bind:
                cpu = alloc.resources.cpu_request
                unbound_cpu += cpu
                # One without CPU (stored by an older version) still needs a core to run on.
                largest = max(largest, cpu, 1)
            memory_used += alloc.resources.memory_request
            if alloc.plan.numa is not None:
                numa_used[alloc.plan.numa] += alloc.resources.memory_request
        for c, pieces in used.items():
            _check_core_use(self.name, cores, c, pieces)
        _check_memory_use(self.name, self.memory, memory_used)
        for n, amount in numa_used.items():
            _check_numa_use(self.name, self.numa_memory, n, amount)
        self._set_derived(allocations, used, memory_used, numa_used, unbound_cpu, largest)

    def _set_derived(
        self,
        allocations: dict[str, Allocation],
        used: dict[int, int],
        memory_used: int,
        numa_used: dict[int, int],
        unbound_cpu: int,
        largest: int,
        shared: tuple[tuple[int, ...], int] | None = None,
    ) -> None:
        """Set the allocations and what follows from their totals; ``shared``: the shared
        pool and its pieces when known to be unchanged (no core newly bound), else worked
        out from ``used``: the cores no plan holds a piece of."""
        setattr_ = object.__setattr__
        if shared is None:
            cores = self.cores
            pool = tuple(c for c in cores if not used[c])
            shared = (pool, sum([cores[c] for c in pool]))
        setattr_(self, "allocations", allocations)
        setattr_(self, "used", used)
        setattr_(self, "memory_used", memory_used)
        setattr_(self, "numa_used", numa_used)
        setattr_(self, "bound_cpu", sum(used.values()))
        setattr_(self, "unbound_cpu", unbound_cpu)
        setattr_(self, "shared_cpu", shared[1])
        setattr_(self, "shared_limit", shared_limit(shared[1], self.cpu_overcommit))
        setattr_(self, "_unbound_largest", largest)
        setattr_(self, "_shared", shared[0])
        setattr_(self, "_view", None)

    def shared_pool(self) -> tuple[int, ...]:
        """The cores no bound container uses (neither whole nor fragment), ascending.
        Memory-mode containers run on it. Empty when every core is bound, which the
        operations allow only while no unbound container is there: the pool is never
        widened onto bound cores (the spec's section 6 fell back to every core). O(1)."""
        return self._shared

    def kept_cores(self, avoid: Collection[int] = ()) -> tuple[int, ...]:
        """The shared cores no bound plan may take: the fewest that still cover what the
        unbound containers ask for (``shared_cpu.kept_cores``; ``avoid``: cores to keep
        only if the others fall short). O(s) when one core covers them, else O(s log s)."""
        return kept_cores(
            self.cores,
            self._shared,
            self.cpu_overcommit,
            requested=self.unbound_cpu,
            largest=self._unbound_largest,
            avoid=avoid,
        )

    def overdrawn(self) -> tuple[int, int]:
        """By how many pieces the unbound containers' requests exceed the shared pool
        times ``cpu_overcommit``, and the biggest one's the pool; (0, 0) when they fit
        (invariant 4). O(1)."""
        return (
            max(0, self.unbound_cpu - self.shared_limit),
            max(0, self._unbound_largest - self.shared_cpu),
        )

    def view(self) -> Node:
        """The available view the engine plans on: capacity minus allocations, with the
        shared pool filled in. Built on first use and kept, since a state never changes
        (every operation returns a new one) and views are never changed either: O(c log c)
        once, then O(1). Every decision views every ready node, so on 1,000 nodes building
        it each time cost 30 ms a decision (bench/deployments.py)."""
        if self._view is None:
            object.__setattr__(self, "_view", self._build_view())
        assert self._view is not None
        return self._view

    def _build_view(self) -> Node:
        # The cores kept for the unbound containers show nothing free to bound plans.
        used = self.used
        numa_memory = None
        if self.numa_memory is not None:
            numa_memory = {n: b - self.numa_used[n] for n, b in self.numa_memory.items()}
        free = {c: pieces - used[c] for c, pieces in self.cores.items()}
        for core in self.kept_cores():
            free[core] = 0
        # Made of this state's checked topology (invariants 1-3: nothing free is below 0,
        # the ids stay in order), so it is not checked again (``Node.checked``).
        return Node.checked(
            self.name,
            free,
            self.numa,
            self.memory - self.memory_used,
            numa_memory,
            self.share_base,
            shared_pool=self._shared,
            shared_cpu=self.shared_cpu,
            shared_free=max(0, self.shared_limit - self.unbound_cpu),
        )

    def limits(self, container_id: str) -> Limits:
        """The Docker settings of one container (section 7). A replacing container gets
        exactly these (``replace``). O(its cores)."""
        alloc = self.allocations[container_id]
        return container_limits(alloc.plan, alloc.resources, self._shared)


@dataclass(frozen=True, slots=True)
class Change:
    """What an operation produced: the new ``state`` and the Docker settings to write,
    container id -> ``Limits``, for every container it created or changed (a realloc'd
    container always; memory-mode containers whenever the shared pool moved)."""

    state: NodeState
    updates: dict[str, Limits]


@dataclass(frozen=True, slots=True)
class Delta:
    """A realloc (section 10): signed deltas of the four amounts (CPU as decimals or
    numbers, "-0.5"; memory as bytes or quantities, "-512Mi"); ``cpu`` / ``memory`` are
    shorthands adding the same delta to the request and to the limit -- when the container
    has one: a limit of 0 (none) stays none -- and not together with an explicit field of
    the same kind; ``cpu_bind`` / ``soft_memory`` None = unchanged."""

    cpu_request: CpuValue = 0
    cpu_limit: CpuValue = 0
    memory_request: MemoryValue = 0
    memory_limit: MemoryValue = 0
    cpu: CpuValue | None = None
    memory: MemoryValue | None = None
    cpu_bind: bool | None = None
    soft_memory: bool | None = None


# --- helpers ----------------------------------------------------------------------------


def _check_allocation(
    node: str,
    cid: object,
    alloc: object,
    cores: Mapping[int, int],
    numa: Mapping[int, int] | None,
    share_base: int,
) -> None:
    """``alloc`` fits the node's topology (``cid``, checked apart, only names it)."""
    if not isinstance(alloc, Allocation):
        raise invalid_request(_where(cid), alloc, "is not an Allocation", node=node)
    plan, res = alloc.plan, alloc.resources
    if res.share_base != share_base:
        raise invalid_request(
            _where(cid),
            res.share_base,
            f"share_base differs from the node's {share_base}",
            node=node,
        )
    if plan.memory != res.memory_request:
        raise invalid_request(
            _where(cid), plan.memory, f"plan memory differs from {res.memory_request}", node=node
        )
    pieces = 0
    for c, v in plan.cores.items():
        if c not in cores:
            raise invalid_request(_where(cid), c, "uses a core the node does not have", node=node)
        if type(v) is not int or v <= 0:
            raise invalid_request(
                _where(cid), v, f"core {c}: pieces must be a positive integer", node=node
            )
        if plan.numa is not None and (numa is None or numa[c] != plan.numa):
            raise invalid_request(
                _where(cid), c, f"core {c} is not on NUMA node {plan.numa}", node=node
            )
        pieces += v
    expected = res.cpu_request if res.cpu_bind else 0
    if pieces != expected:
        raise invalid_request(_where(cid), pieces, f"plan pieces differ from {expected}", node=node)
    if plan.numa is not None and (numa is None or plan.numa not in numa.values()):
        raise invalid_request(
            _where(cid), plan.numa, "names a NUMA node the node does not have", node=node
        )


def _check_core_use(node: str, cores: Mapping[int, int], core: int, pieces: int) -> None:
    if pieces > cores[core]:
        raise invalid_request(
            f"cores[{core}]", cores[core], f"is below {pieces} allocated", node=node
        )


def _check_memory_use(node: str, memory: int, used: int) -> None:
    if used > memory:
        raise invalid_request("memory", memory, f"is below {used} allocated", node=node)


def _check_numa_use(node: str, numa_memory: Mapping[int, int] | None, numa: int, used: int) -> None:
    if numa_memory is not None and used > numa_memory[numa]:
        raise invalid_request(
            f"numa_memory[{numa}]", numa_memory[numa], f"is below {used} allocated", node=node
        )


def _check_container_id(node: str, cid: object) -> None:
    if type(cid) is not str or not cid:
        raise invalid_request(
            "allocations", cid, "container ids must be non-empty strings", node=node
        )


def _where(cid: object) -> str:
    """The allocation a refusal names (made only for a refusal: a load checks 200,000)."""
    return f"allocations[{cid!r}]"


def _evolve(state: NodeState, **changes: object) -> NodeState:
    if changes.keys() == {"allocations"}:  # the topology stays: checked once is enough
        allocations = changes["allocations"]
        assert isinstance(allocations, dict)
        return NodeState._with_allocations(state, allocations)
    return dataclasses.replace(state, version=state.version + 1, **changes)  # type: ignore[arg-type]


def _updates(old: NodeState, new: NodeState, always: Sequence[str] = ()) -> dict[str, Limits]:
    # Every container of `new` whose settings are new or differ from `old`'s, plus `always`.
    # A container's settings are a function of its allocation and the shared pool alone
    # (``container_limits``), so one whose allocation is the very same object under the
    # same shared pool is skipped unread: assigning the 20th container to a node computed
    # the other 19's cpusets twice each, and that cost grew with every container placed
    # (the largest part of a 1,000-container deployment's time in bench/fleet.py).
    same_pool = old._shared == new._shared
    out = {}
    for cid, alloc in new.allocations.items():
        if same_pool and cid not in always and old.allocations.get(cid) is alloc:
            continue
        limits = new.limits(cid)
        if cid in always or cid not in old.allocations or old.limits(cid) != limits:
            out[cid] = limits
    return out


def _short(node: str, message: str, **details: object) -> PlacementError:
    return PlacementError("insufficient_resource", f"node {node}: {message}", node=node, **details)


def _check_shared(old: NodeState, new: NodeState, kind: Kind, asked: int = 0) -> None:
    """Invariant 4 after an operation from ``old`` to ``new``: refused (``kind``, with
    the numbers) when ``new`` leaves the unbound containers less shared CPU than they ask
    for and ``old`` did not leave them as little (a record an older version stored may
    break it already; then nothing may make it worse). ``asked``: the CPU the operation's
    container asks for, for the message. O(1)."""
    over, over_largest = new.overdrawn()
    was, was_largest = old.overdrawn()
    if over <= was and over_largest <= was_largest:
        return
    p = new.share_base
    pool = describe_pool(new.shared_pool(), new.shared_cpu, new.cpu_overcommit, p)
    if over > was:
        text = (
            f"{format_cpu(new.unbound_cpu, share_base=p)} CPU requested by unbound containers"
            f" ({format_cpu(old.unbound_cpu, share_base=p)} before), above the shared pool's"
            f" {format_cpu(new.shared_limit, share_base=p)} ({pool})"
        )
    else:
        text = (
            f"an unbound container requests {format_cpu(new._unbound_largest, share_base=p)}"
            f" CPU, more than the shared pool's {pool}"
        )
    raise PlacementError(
        kind,
        f"node {new.name}: {text}; bound cores are never shared",
        node=new.name,
        short="shared_cpu",
        requested=old.unbound_cpu,
        asked=asked,
        shared_cpu=new.shared_cpu,
        shared_limit=new.shared_limit,
        cpu_overcommit=overcommit_text(new.cpu_overcommit),
    )


# --- assign, release, replace -----------------------------------------------------------


def assign(state: NodeState, container_id: str, plan: Plan, resources: Normalized) -> Change:
    """Charge one new container (a committed placement): its plan's pieces, memory and
    NUMA memory. ``insufficient_resource`` (core / memory / NUMA memory with both amounts)
    when the plan does not fit what is available, or would leave the unbound containers
    less shared CPU than they ask for (invariant 4: a bound plan on a shared core the
    view kept, an unbound container beyond the pool); ``invalid_request`` for an existing id
    or a plan that does not match the resources. Cost O(the plan's cores) while no core
    is newly bound, else O(c + the node's containers), besides copying the allocations'
    dict (``NodeState._with_added``)."""
    if container_id in state.allocations:
        raise invalid_request(
            "container", container_id, "already has an allocation", node=state.name
        )
    for c, pieces in plan.cores.items():
        free = state.cores.get(c, 0) - state.used.get(c, 0)
        if c in state.cores and pieces > free:
            raise _short(
                state.name,
                f"core {c} has {free} pieces free, {pieces} asked",
                short="core",
                core=c,
                available=free,
                asked=pieces,
            )
    m = resources.memory_request
    if m > state.memory - state.memory_used:
        free = state.memory - state.memory_used
        raise _short(
            state.name,
            f"{format_memory(free)} memory free, {format_memory(m)} asked",
            short="memory",
            available=free,
            asked=m,
        )
    if plan.numa is not None and state.numa_memory is not None and plan.numa in state.numa_memory:
        free = state.numa_memory[plan.numa] - state.numa_used[plan.numa]
        if m > free:
            raise _short(
                state.name,
                f"NUMA {plan.numa} has {free} bytes free, {m} asked",
                short="numa_memory",
                numa=plan.numa,
                available=free,
                asked=m,
            )
    new = NodeState._with_added(state, container_id, Allocation(plan, resources))
    _check_shared(state, new, "insufficient_resource", resources.cpu_request)
    if new._shared == state._shared:  # the others' settings stay: O(1), not O(the node)
        return Change(new, {container_id: new.limits(container_id)})
    return Change(new, _updates(state, new))


def release(state: NodeState, container_id: str) -> Change:
    """Give one container's allocation back. ``invalid_request`` for an unknown id."""
    if container_id not in state.allocations:
        raise invalid_request("container", container_id, "has no allocation", node=state.name)
    rest = {cid: a for cid, a in state.allocations.items() if cid != container_id}
    new = _evolve(state, allocations=rest)
    return Change(new, _updates(state, new))


def replace(state: NodeState, old_id: str, new_id: str) -> Change:
    """Re-point ``old_id``'s allocation to ``new_id`` (section 10's replace): nothing is
    planned and nothing is charged twice -- used pieces and memory are unchanged.

    The service creates the new container with ``state.limits(old_id)`` (identical
    settings), and calls this once it runs; so ``updates`` is empty. ``invalid_request``
    when ``old_id`` has no allocation or ``new_id`` already has one. O(allocations)."""
    if old_id not in state.allocations:
        raise invalid_request("container", old_id, "has no allocation", node=state.name)
    if new_id in state.allocations:
        raise invalid_request("container", new_id, "already has an allocation", node=state.name)
    allocations = {(new_id if cid == old_id else cid): a for cid, a in state.allocations.items()}
    return Change(_evolve(state, allocations=allocations), {})


def load(state: NodeState, resources: Normalized) -> tuple[float, float]:
    """(usage, rate) for GLOBAL and DRAINED (section 8): cpu-bind, allocated pieces / total
    pieces and request pieces / total pieces; memory mode, the same in memory. 0 for an
    empty total. O(c)."""
    if resources.cpu_bind:
        total, used, one = (
            sum(state.cores.values()),
            sum(state.used.values()),
            resources.cpu_request,
        )
    else:
        total, used, one = state.memory, state.memory_used, resources.memory_request
    return (used / total, one / total) if total else (0.0, 0.0)


# --- realloc (section 10) ---------------------------------------------------------------


def _whole_units(a: int, p: int) -> int:
    return a // p if a >= p and a % p == 0 else 0


def single_plan(
    avail: Mapping[int, int],
    ids: Sequence[int],
    p: int,
    x: int,
    y: int,
    own: Plan | None = None,
) -> dict[int, int] | None:
    """Section 5.3: one container's cores in one pool, own cores preferred, or None.

    Fragment candidates (a >= Y), in order: own fragment core; surplus own whole cores
    (beyond its X lowest-id ones), highest id first; other fragment cores (a asc, id);
    other whole cores (u asc, id); the remaining own whole cores, highest id first. The
    first one that leaves >= X whole candidates is taken. Whole candidates (without it):
    own whole cores (ascending id, qualifying when a >= P), the own fragment core if now
    whole, other whole cores (u desc, id asc); the first X. Without own cores this is plan
    0 of section 5.1 for n = 1. Cost O(c log c).
    """
    whole, candidates = _candidates(avail, ids, p, x, y, own)
    if not y:
        return dict.fromkeys(sorted(whole[:x]), p) if len(whole) >= x else None
    in_whole = set(whole)
    for g in candidates:
        if avail[g] >= y and len(whole) - (g in in_whole) >= x:
            cores = dict.fromkeys([c for c in whole if c != g][:x], p)
            cores[g] = y
            return dict(sorted(cores.items()))
    return None


def _candidates(
    avail: Mapping[int, int], ids: Sequence[int], p: int, x: int, y: int, own: Plan | None
) -> tuple[list[int], list[int]]:
    # Section 5.3's whole candidates and fragment candidates (before the a >= Y filter),
    # each in its order; see single_plan.
    pool = set(ids)
    own_frag = None
    own_whole: list[int] = []
    if own is not None:
        own_frag = own.fragment if own.fragment in pool else None
        own_whole = sorted(c for c in own.cores if c in pool and c != own.fragment)
    mine = {*own_whole, own_frag}
    others = [c for c in ids if c not in mine]
    units = {c: _whole_units(avail[c], p) for c in ids}
    whole = [c for c in own_whole if avail[c] >= p]
    if own_frag is not None and units[own_frag] >= 1:
        whole.append(own_frag)
    whole += sorted((c for c in others if units[c] >= 1), key=lambda c: (-units[c], c))
    if not y:
        return whole, []
    keep, surplus = own_whole[:x], own_whole[x:]
    candidates = [] if own_frag is None else [own_frag]
    candidates += reversed(surplus)
    candidates += sorted((c for c in others if units[c] == 0), key=lambda c: (avail[c], c))
    candidates += sorted((c for c in others if units[c] >= 1), key=lambda c: (units[c], c))
    candidates += reversed(keep)
    return whole, candidates


def _cpu_shortfall(
    avail: Mapping[int, int], ids: Sequence[int], p: int, x: int, y: int, own: Plan | None
) -> tuple[str, str]:
    # What a pool lacks for one container: whole cores when section 5.3 finds fewer than X
    # whole candidates, else a fragment core (one more core with Y pieces besides them).
    whole, candidates = _candidates(avail, ids, p, x, y, own)
    text = f"{len(whole)} whole core(s) usable ({x} needed)"
    if y:
        fitting = sum(1 for c in candidates if avail[c] >= y)
        text += f", {fitting} core(s) with {y} pieces free (a fragment core besides)"
    return ("whole_cores" if len(whole) < x else "fragment_core"), text


def realloc(state: NodeState, container_id: str, delta: Delta) -> Change:
    """Change one container's resources by ``delta`` (section 10), all or nothing.

    1. New amounts = old + delta, then section 4 (``invalid_request`` on a negative result,
       cpu-bind at 0 CPU, or removing a memory limit Docker cannot remove in place). The
       mode stays unless ``delta.cpu_bind`` is given. Equal amounts: nothing changes.
    2. On a snapshot without the container's allocation, cpu-bind tries its current pool
       (its NUMA node), the other NUMA pools ascending, then the cross pool (a cross-NUMA
       container: the cross pool only; one from memory mode: NUMA pools ascending, cross);
       a pool qualifies when its memory budget covers the new memory; the first pool where
       ``single_plan`` finds cores wins; the shared cores kept for the other unbound
       containers (``kept_cores``, its own cores kept last) are not used. Memory mode: new
       memory <= available memory. Either way the result keeps invariant 4.
    3. Nothing fits: ``insufficient_resource`` naming the node and, per pool, what was
       short (memory, NUMA memory, whole cores, a fragment core with Y pieces).

    Postcondition: a zero delta changes nothing; a realloc then its inverse restores the
    node's totals. Cost O(pools * c log c + allocations).
    """
    alloc = state.allocations.get(container_id)
    if alloc is None:
        raise invalid_request("container", container_id, "has no allocation", node=state.name)
    old = alloc.resources
    p = state.share_base
    d_cpu_req, d_cpu_lim, d_mem_req, d_mem_lim = _deltas(delta, old, p)
    cpu_bind = old.cpu_bind if delta.cpu_bind is None else delta.cpu_bind
    soft = old.soft_memory if delta.soft_memory is None else delta.soft_memory
    check_flag("cpu_bind", cpu_bind)
    check_flag("soft_memory", soft)
    new = normalize_amounts(
        old.cpu_request + d_cpu_req,
        old.cpu_limit + d_cpu_lim,
        old.memory_request + d_mem_req,
        old.memory_limit + d_mem_lim,
        cpu_bind=cpu_bind,
        soft_memory=soft,
        share_base=p,
    )
    if new == old:
        return Change(state, {})
    had = state.limits(container_id).mem_limit
    if had > 0 and (0 if new.soft_memory else new.memory_limit) == 0:
        raise invalid_request(
            "memory_limit",
            0,
            f"Docker cannot remove a memory limit ({had} bytes) in place"
            " (memory_limit to 0, or soft memory)",
            node=state.name,
            container=container_id,
        )
    plan = _realloc_plan(state, container_id, alloc, new)
    allocations = dict(state.allocations)
    allocations[container_id] = Allocation(plan, new)
    result = _evolve(state, allocations=allocations)
    _check_shared(state, result, "insufficient_resource", new.cpu_request)
    return Change(result, _updates(state, result, always=(container_id,)))


def _deltas(delta: Delta, old: Normalized, p: int) -> tuple[int, int, int, int]:
    # The four signed deltas. A shorthand moves the limit only when there is one: a limit
    # of 0 means "none", and none plus a delta stays none.
    if not isinstance(delta, Delta):
        raise invalid_request("delta", delta, "is not a Delta")
    cpu_req = signed_cpu(delta.cpu_request, field="cpu_request", share_base=p)
    cpu_lim = signed_cpu(delta.cpu_limit, field="cpu_limit", share_base=p)
    mem_req = signed_memory(delta.memory_request, field="memory_request")
    mem_lim = signed_memory(delta.memory_limit, field="memory_limit")
    if delta.cpu is not None:
        if cpu_req or cpu_lim:
            raise invalid_request(
                "cpu", delta.cpu, "is a shorthand for cpu_request and cpu_limit: not both"
            )
        cpu_req = signed_cpu(delta.cpu, field="cpu", share_base=p)
        cpu_lim = cpu_req if old.cpu_limit else 0
    if delta.memory is not None:
        if mem_req or mem_lim:
            raise invalid_request(
                "memory",
                delta.memory,
                "is a shorthand for memory_request and memory_limit: not both",
            )
        mem_req = signed_memory(delta.memory, field="memory")
        mem_lim = mem_req if old.memory_limit else 0
    return cpu_req, cpu_lim, mem_req, mem_lim


def _realloc_plan(state: NodeState, cid: str, alloc: Allocation, new: Normalized) -> Plan:
    p = state.share_base
    old_plan = alloc.plan
    m = new.memory_request
    # The snapshot: the container's allocation given back; the shared cores it must keep
    # for the unbound containers (other than it) show nothing free, its own cores last.
    snapshot = NodeState._with_allocations(
        state, {k: a for k, a in state.allocations.items() if k != cid}
    )
    avail = {c: state.cores[c] - state.used[c] + old_plan.cores.get(c, 0) for c in state.cores}
    kept = snapshot.kept_cores(avoid=old_plan.cores) if new.cpu_bind else ()
    for core in kept:
        avail[core] = 0
    left = state.memory - state.memory_used + alloc.resources.memory_request
    what = describe(new.cpu_request, m, p)
    if not new.cpu_bind:  # the shared pool is checked on the result (invariant 4)
        if m > left:
            raise _short(
                state.name,
                f"{what} asked, {format_memory(left)} memory available",
                container=cid,
                short="memory",
                available=left,
                asked=m,
            )
        return memory_plan(new)
    x, y = divmod(new.cpu_request, p)
    numa_ids = [n for n, _ in _pools(state)]
    if alloc.resources.cpu_bind and old_plan.numa is None:
        order: list[int | None] = [None]  # a cross-NUMA container: the cross pool only
    elif alloc.resources.cpu_bind:
        order = [old_plan.numa, *(n for n in numa_ids if n != old_plan.numa), None]
    else:
        order = [*numa_ids, None]
    own = old_plan if alloc.resources.cpu_bind else None
    pool_ids = dict(_pools(state))
    reasons: list[str] = []
    short: list[str] = []  # per pool tried: memory, numa_memory, whole_cores, fragment_core
    for n in order:
        ids = tuple(state.cores) if n is None else pool_ids[n]
        name = "cross" if n is None else f"NUMA {n}"
        budget = left
        if n is not None and state.numa_memory is not None:
            numa_left = state.numa_memory[n] - state.numa_used[n]
            if old_plan.numa == n:
                numa_left += alloc.resources.memory_request
            if numa_left < m:
                reasons.append(f"{name}: NUMA memory {format_memory(numa_left)} free")
                short.append("numa_memory")
                continue
            budget = min(budget, numa_left)
        if budget < m:
            reasons.append(f"{name}: memory {format_memory(left)} free")
            short.append("memory")
            continue
        cores = single_plan(avail, ids, p, x, y, own)
        if cores is not None:
            frag = next((c for c, v in cores.items() if v != p), None) if y else None
            return Plan(cores, n, m, frag)
        kind, text = _cpu_shortfall(avail, ids, p, x, y, own)
        held = [c for c in kept if c in ids]
        if held:
            text += (
                f"; core(s) {','.join(map(str, held))} kept for the unbound containers"
                f" ({format_cpu(snapshot.unbound_cpu, share_base=p)} CPU requested)"
            )
        reasons.append(f"{name}: {text}")
        short.append(kind)
    raise _short(
        state.name,
        f"container {cid} does not fit at {what}"
        f" ({format_cpu(new.cpu_request, share_base=p)} CPU = {x} whole cores + {y} pieces"
        f", {format_memory(m)} memory): " + "; ".join(reasons),
        container=cid,
        asked=new.cpu_request,
        memory=m,
        short=short,
        reasons=reasons,
    )


def _pools(state: NodeState) -> list[tuple[int, tuple[int, ...]]]:
    # NUMA pools (id ascending, cores ascending); empty without a map.
    if state.numa is None:
        return []
    grouped: dict[int, list[int]] = {}
    for c, n in state.numa.items():
        grouped.setdefault(n, []).append(c)
    return [(n, tuple(sorted(grouped[n]))) for n in sorted(grouped)]


# --- SetNode (section 11) ---------------------------------------------------------------


def set_node(
    state: NodeState,
    mode: str,
    *,
    cores: Mapping[int, int] | None = None,
    numa: Mapping[int, int] | None = None,
    memory: MemoryValue | None = None,
    numa_memory: Mapping[int, MemoryValue] | None = None,
    cpu_overcommit: object = None,
) -> Change:
    """SetNode (section 11): change the node's capacity, ``mode`` "absolute" or "delta".

    absolute: each given field replaces that field, omitted fields (None) stay; delta:
    pieces added per core (negative allowed; a new id creates a core), NUMA entries merged,
    memory added, NUMA memory added per NUMA node. Then cores at 0 pieces go with their
    NUMA entries, and a NUMA node left without cores loses its memory entry.

    Rejected as a whole, naming the core / NUMA node and both amounts:
    ``invalid_request`` -- negative pieces or memory, a NUMA map missing a core or naming
    one the node does not have, NUMA memory naming other NUMA ids or set without a map;
    ``below_allocation`` -- a core below its allocated pieces (so an allocated core is
    never removed), memory below allocated memory, a NUMA node's memory below its
    NUMA-local allocations, a core of a NUMA-local allocation moved to another NUMA node,
    a shared pool (or ``cpu_overcommit``) below what the unbound containers ask for.
    ``cpu_overcommit`` (a decimal, 1 to 100; None = unchanged) replaces the ratio in both
    modes. Nothing running moves; memory-mode containers get the recomputed shared pool
    in ``updates``. Cost O(c log c + allocations).
    """
    name = state.name
    if mode not in ("absolute", "delta"):
        raise invalid_request("mode", mode, 'must be "absolute" or "delta"', node=name)
    ratio = state.cpu_overcommit if cpu_overcommit is None else overcommit_ratio(cpu_overcommit)
    new_cores, new_numa, new_memory, new_numa_memory = _set_fields(
        state, mode, cores, numa, memory, numa_memory
    )
    # Cores at 0 pieces go, with their NUMA entries (so do the entries of cores an absolute
    # `cores` left out); a NUMA node left without cores loses its memory entry. Entries the
    # caller named for cores or NUMA nodes that do not exist stay, for check_topology to
    # reject.
    zero = {c for c, v in new_cores.items() if v == 0}
    new_cores = {c: v for c, v in new_cores.items() if v != 0}
    if new_numa is not None:
        named = set(numa or ())
        new_numa = {
            c: n for c, n in new_numa.items() if c in new_cores or (c in named and c not in zero)
        }
    if new_numa_memory is not None:
        live = set(new_numa.values()) if new_numa else set()
        old_ids = _numa_ids(state)
        new_numa_memory = {
            n: b for n, b in new_numa_memory.items() if n in live or n not in old_ids
        }
    # Section 2's rules (invalid_request): check_topology names the core or NUMA node.
    new_cores, new_numa, new_memory, new_numa_memory = check_topology(
        name, new_cores, new_numa or None, new_memory, new_numa_memory or None, state.share_base
    )
    _check_allocated(state, new_cores, new_numa, new_memory, new_numa_memory)
    if (new_cores, new_numa, new_memory, new_numa_memory, ratio) == (
        state.cores,
        state.numa,
        state.memory,
        state.numa_memory,
        state.cpu_overcommit,
    ):
        return Change(state, {})
    result = _evolve(
        state,
        cores=new_cores,
        numa=new_numa,
        memory=new_memory,
        numa_memory=new_numa_memory,
        cpu_overcommit=ratio,
    )
    _check_shared(state, result, "below_allocation")
    return Change(result, _updates(state, result))


def _numa_ids(state: NodeState) -> set[int]:
    return set(state.numa.values()) if state.numa else set()


def _set_fields(
    state: NodeState,
    mode: str,
    cores: Mapping[int, int] | None,
    numa: Mapping[int, int] | None,
    memory: MemoryValue | None,
    numa_memory: Mapping[int, MemoryValue] | None,
) -> tuple[dict[int, int], dict[int, int] | None, int, dict[int, int] | None]:
    # The fields after applying the change, before removals; negative results rejected.
    name = state.name
    for label, given in (("cores", cores), ("numa", numa), ("numa_memory", numa_memory)):
        if given is not None and not isinstance(given, Mapping):
            raise invalid_request(label, given, "must be a mapping", node=name)
    for c, v in (cores or {}).items():
        if type(c) is not int or c < 0:
            raise invalid_request("cores", c, "is not a non-negative integer core id", node=name)
        if type(v) is not int:
            raise invalid_request(f"cores[{c}]", v, "is not an integer number of pieces", node=name)
    new_cores = dict(state.cores)
    new_numa = None if state.numa is None else dict(state.numa)
    new_memory = state.memory
    new_numa_memory = None if state.numa_memory is None else dict(state.numa_memory)
    if mode == "absolute":
        if cores is not None:
            for c, v in cores.items():
                if v < 0:
                    raise _negative(name, f"core {c}", state.cores.get(c, 0), v, v)
            new_cores = dict(cores)
        if numa is not None:
            new_numa = dict(numa)
        if memory is not None:
            new_memory = signed_memory(memory, field="memory")
            if new_memory < 0:
                raise _negative(name, "memory", state.memory, new_memory, new_memory)
        if numa_memory is not None:
            new_numa_memory = {}
            for n, b in numa_memory.items():
                amount = signed_memory(b, field=f"numa_memory[{n}]")
                if amount < 0:
                    old = (state.numa_memory or {}).get(n, 0)
                    raise _negative(name, f"NUMA node {n} memory", old, amount, amount)
                new_numa_memory[n] = amount
        return new_cores, new_numa, new_memory, new_numa_memory
    for c, v in (cores or {}).items():
        old = state.cores.get(c, 0)
        if old + v < 0:
            raise _negative(name, f"core {c}", old, v, old + v)
        new_cores[c] = old + v
    if numa is not None:
        new_numa = {**(new_numa or {}), **numa}
    if memory is not None:
        change = signed_memory(memory, field="memory")
        if state.memory + change < 0:
            raise _negative(name, "memory", state.memory, change, state.memory + change)
        new_memory = state.memory + change
    if numa_memory is not None:
        new_numa_memory = dict(new_numa_memory or {})
        for n, b in numa_memory.items():
            change = signed_memory(b, field=f"numa_memory[{n}]")
            old = new_numa_memory.get(n, 0)
            if old + change < 0:
                raise _negative(name, f"NUMA node {n} memory", old, change, old + change)
            new_numa_memory[n] = old + change
    return new_cores, new_numa, new_memory, new_numa_memory


def _negative(node: str, what: str, old: int, given: int, result: int) -> PlacementError:
    return PlacementError(
        "invalid_request",
        f"node {node}: {what} would be {result} (now {old}, given {given}): cannot be negative",
        node=node,
        field=what,
        current=old,
        given=given,
        value=result,
        rule="cannot be negative",
    )


def _below(node: str, what: str, new: int, allocated: int, **details: object) -> PlacementError:
    return PlacementError(
        "below_allocation",
        f"node {node}: {what} would be {new}, below the {allocated} allocated",
        node=node,
        what=what,
        new=new,
        allocated=allocated,
        **details,
    )


def _check_allocated(
    state: NodeState,
    cores: Mapping[int, int],
    numa: Mapping[int, int] | None,
    memory: int,
    numa_memory: Mapping[int, int] | None,
) -> None:
    name = state.name
    for c, used in state.used.items():
        if used and cores.get(c, 0) < used:
            raise _below(name, f"core {c} pieces", cores.get(c, 0), used, core=c)
    if memory < state.memory_used:
        raise _below(name, "memory", memory, state.memory_used)
    for cid, alloc in state.allocations.items():
        n = alloc.plan.numa
        if n is None:
            continue
        for c in alloc.plan.cores:
            moved_to = None if numa is None else numa.get(c)
            if moved_to != n:
                where = "leave the NUMA map" if moved_to is None else f"move to NUMA {moved_to}"
                raise PlacementError(
                    "below_allocation",
                    f"node {name}: core {c} would {where}, but container {cid} is NUMA-local"
                    f" on NUMA {n} and holds {alloc.plan.cores[c]} pieces of it",
                    node=name,
                    what=f"core {c} NUMA node",
                    core=c,
                    container=cid,
                    allocated=n,
                    new=moved_to,
                )
    if numa_memory is not None:
        for n, used in state.numa_used.items():
            if used and numa_memory.get(n, 0) < used:
                raise _below(name, f"NUMA node {n} memory", numa_memory.get(n, 0), used, numa=n)
