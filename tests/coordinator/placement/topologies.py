"""Named topologies and hypothesis strategies shared by the placement tests; defined once.

``TOPO_*`` are available views (``Node``), ``STATE_*`` stored records (``NodeState``);
both are immutable, so sharing them between tests is safe.
"""

from __future__ import annotations

from hypothesis import strategies as st

from coordinator.placement import GiB, MiB, Node, NodeState, Normalized, assign, cpu_plans

# --- named topologies (immutable: the engine never changes a Node or a NodeState) -------

# The seed's NUMA example: 2 NUMA nodes of 2 cores and 1 GiB each, 2 GiB in all.
TOPO_SEED_NUMA = Node(
    "seed",
    {0: 100, 1: 100, 2: 100, 3: 100},
    numa={0: 0, 1: 0, 2: 1, 3: 1},
    memory=2 * GiB,
    numa_memory={0: GiB, 1: GiB},
)


def bench_node(name: str) -> Node:
    """The benchmark node: 24 cores, NUMA 0 = cores 0-11, NUMA 1 = 12-23, 128 GiB, 64 each."""
    return Node(
        name,
        dict.fromkeys(range(24), 100),
        numa={c: c // 12 for c in range(24)},
        memory=128 * GiB,
        numa_memory={0: 64 * GiB, 1: 64 * GiB},
    )


TOPO_BENCH_24 = bench_node("node-0000")
# 4 fresh cores, no NUMA map, 8 GiB.
TOPO_FLAT_4 = Node("flat", {0: 100, 1: 100, 2: 100, 3: 100}, memory=8 * GiB)
# 6 cores, some partly used (30, 50 free) and one full, no NUMA map, 8 GiB.
TOPO_PARTIAL_6 = Node("partial", {0: 30, 1: 50, 2: 100, 3: 100, 4: 100, 5: 0}, memory=8 * GiB)
# 3 oversold cores offering 200, 200 and 150 pieces, 8 GiB.
TOPO_OVERSOLD_3 = Node("oversold", {0: 200, 1: 200, 2: 150}, memory=8 * GiB)
# 2 NUMA nodes of 2 cores, NUMA memory not tracked, 1 GiB.
TOPO_NUMA_UNTRACKED = Node(
    "untracked", {0: 100, 1: 100, 2: 100, 3: 100}, numa={0: 0, 1: 0, 2: 1, 3: 1}, memory=GiB
)

TOPOLOGIES: dict[str, Node] = {
    "seed-numa": TOPO_SEED_NUMA,
    "bench-24": TOPO_BENCH_24,
    "flat-4": TOPO_FLAT_4,
    "partial-6": TOPO_PARTIAL_6,
    "oversold-3": TOPO_OVERSOLD_3,
    "numa-untracked": TOPO_NUMA_UNTRACKED,
}

# The same shapes as stored records, nothing allocated yet.
STATE_SEED_NUMA = NodeState(
    "seed",
    {0: 100, 1: 100, 2: 100, 3: 100},
    numa={0: 0, 1: 0, 2: 1, 3: 1},
    memory=2 * GiB,
    numa_memory={0: GiB, 1: GiB},
)
STATE_FLAT_4 = NodeState("flat", {0: 100, 1: 100, 2: 100, 3: 100}, memory=8 * GiB)


def bound(cpu: int, memory: int = 0, share_base: int = 100, limit: int = 0) -> Normalized:
    """Normalised cpu-bind resources: ``cpu`` pieces, ``memory`` bytes (limit = request)."""
    return Normalized(cpu, 0, memory, limit or memory, True, False, share_base)


def memory_mode(cpu: int, memory: int, share_base: int = 100, cpu_limit: int = 0) -> Normalized:
    """Normalised memory-mode resources (memory limit = request)."""
    return Normalized(cpu, cpu_limit, memory, memory, False, False, share_base)


def placed(state: NodeState, resources: Normalized, count: int, prefix: str) -> NodeState:
    """``state`` with ``count`` more containers ``prefix-0``... planned and assigned."""
    plans = cpu_plans(state.view(), resources, count)
    for i, plan in enumerate(plans):
        state = assign(state, f"{prefix}-{i}", plan, resources).state
    return state


def record(node: Node) -> NodeState:
    """A stored record whose capacity is the view's availability, nothing allocated."""
    return NodeState(
        node.name, node.cores, node.numa, node.memory, node.numa_memory, node.share_base
    )


def is_oversold(node: Node) -> bool:
    return any(v > node.share_base for v in node.cores.values())


# --- hypothesis strategies --------------------------------------------------------------

SHARE_BASES = st.sampled_from([100, 10, 4])


@st.composite
def small_nodes(draw: st.DrawFn, oversold: bool = True, max_cores: int = 6) -> Node:
    """A node of 1..max_cores cores with random free pieces (fresh, used, partly used and,
    when ``oversold``, above P), sometimes two NUMA nodes, random (NUMA) memory."""
    p = draw(SHARE_BASES)
    n = draw(st.integers(1, max_cores))
    piece = st.one_of(
        st.just(p),
        st.just(0),
        st.integers(0, p),
        *([st.integers(0, 2 * p), st.just(2 * p)] if oversold else []),
    )
    cores = {c: draw(piece) for c in range(n)}
    numa = None
    numa_memory = None
    if n >= 2 and draw(st.booleans()):
        split = draw(st.integers(1, n - 1))
        numa = {c: 0 if c < split else 1 for c in range(n)}
        if draw(st.booleans()):
            numa_memory = {k: draw(st.sampled_from([0, 512, 1024, 2048])) * MiB for k in (0, 1)}
    memory = draw(st.sampled_from([0, 600, 1024, 2048, 4096, 1 << 20])) * MiB
    return Node("n", cores, numa=numa, memory=memory, numa_memory=numa_memory, share_base=p)


@st.composite
def bound_requests(draw: st.DrawFn, share_base: int) -> Normalized:
    """A cpu-bind request: 1 piece .. 3 cores, memory 0 or 512 MiB .. 1 GiB."""
    cpu = draw(st.integers(1, 3 * share_base))
    memory = draw(st.sampled_from([0, 0, 512 * MiB, 600 * MiB, GiB]))
    return bound(cpu, memory, share_base)
