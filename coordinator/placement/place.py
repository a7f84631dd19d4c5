"""Placing a deployment (placement spec section 9): every node's capacity, the strategy,
then each node's plans for its share. Pure: nothing is committed.

    placement = place(nodes, Request("1.7", 512 * MiB, cpu_bind=True), 10_000, "auto")
    placement.capacities["node-0000"]   -> 12
    placement.deploy["node-0000"]       -> 10
    placement.plans["node-0000"][0]     -> Plan({0: 70, 6: 100}, numa=0, ...)
    placement.limits("node-0000")[0]    -> Limits(cpuset_cpus="0,6", cpuset_mems="0", ...)

Invariant of a ``Placement``: ``sum(deploy.values()) == count`` for AUTO, GLOBAL and
DRAINED (EACH and FILL: as section 8 says), ``deploy[n] <= capacities[n]``, and
``len(plans[n]) == deploy[n]`` for every node in ``deploy``; the plans of one node fit
together (``cpu_plans``).

Speed (spec section 15). Capacity depends only on a node's signature (per-pool multisets
of available pieces and the memory figures), and plans only on its exact layout and
share; a ``Planner`` computes each distinct one once per call and hands the same
immutable ``Plan`` objects to every identical node. 1,000 fresh 24-core nodes, 10,000
cpu-bind containers of 1.7 CPU + 512Mi with AUTO: 7.5 ms in all (capacities 3.2,
strategy 1.9, plans 2.4; goal 65 ms, Eru ~650 ms); memory mode 2.4 ms (goal 10 ms).
Views remember their capacities between calls (``node.Memo``), so the next decision over
mostly the same views is lookups. Figures and the rejected alternatives in ``Planner``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter
from typing import cast

from coordinator.placement.docker import container_limits
from coordinator.placement.engine import (
    AnyRequest,
    demand,
    fast_caps,
    fast_plans,
    general_walk,
    kept_signature,
    memory_capacity,
    memory_plan,
    node_caps,
    oversold,
    remember_caps,
    shortage,
)
from coordinator.placement.errors import invalid_request
from coordinator.placement.node import Node, Plan, Signature
from coordinator.placement.pressure import prefer_calm
from coordinator.placement.request import Normalized
from coordinator.placement.strategies import Columns, distribute
from shared.protocol import Limits


@dataclass(frozen=True)
class Placement:
    """The what-if result of ``place``.

    ``capacities``: node -> how many more containers it could take (every node);
    ``deploy``: node -> containers added (zeros omitted, ascending names);
    ``plans``: node -> its ``deploy[node]`` plans, in section 5.2's order (cpu-bind:
    NUMA-local pools ascending, then cross-NUMA; memory mode: that many times the one
    memory-mode plan, no cores, so that every container has a plan to commit);
    ``resources``: the normalised request; ``shared_pools``: node -> its shared pool
    (memory mode, deployed nodes only; cpu-bind: empty).

    Plans are shared between identical nodes: never mutate them.
    """

    capacities: dict[str, int]
    deploy: dict[str, int]
    plans: dict[str, list[Plan]]
    resources: Normalized
    shared_pools: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def limits(self, node: str) -> list[Limits]:
        """The Docker settings of each planned container on ``node`` (section 7), in plan
        order; a memory-mode container's cpuset is the node's shared pool. Cost O(plans),
        one computation per distinct plan."""
        pool = self.shared_pools.get(node, ())
        seen: dict[int, Limits] = {}
        out = []
        for plan in self.plans.get(node, ()):
            limits = seen.get(id(plan))
            if limits is None:
                limits = seen[id(plan)] = container_limits(plan, self.resources, pool)
            out.append(limits)
        return out


_first = itemgetter(0)


class Planner:
    """Capacities and plans of one request over many nodes, sharing the work between
    identical nodes (the three phases of ``place``, separately callable for the bench).

        planner = Planner(nodes, request)
        capacities = planner.capacities()              # node -> capacity
        plans = planner.plans({"n1": 3, "n2": 1})      # node -> list of plans

    Why caches and not a plain loop over nodes (measured on the 2-core development VM,
    CPython 3.11.7, best of 7, ``bench/placement.py``): on the benchmark (1,000 identical
    fresh 24-core nodes, 1.7 CPU + 512Mi, AUTO 10,000) the capacity walk and the ten plans
    are computed once instead of 1,000 times; what remains per node is its signature (two
    sorted 12-tuples, 2.4 us), a dict lookup, and for the plans a layout key (1.9 us).
    Capacities 3.2 ms, plans 2.4 ms; the same loop without the caches: 7.5 ms and 33 ms.
    On 1,000 distinct, partly used nodes nothing is shared and the caches cost ~4 us per
    node: capacities 10.6 ms, plans 36 ms (5.4 us per plan).

    Across calls, each view remembers its signature and its capacities for the last few
    requests (``node.Memo``, filled by ``engine.kept_signature`` and ``engine.remember_caps``). A
    decision changes only the nodes it placed on, and ``NodeState.view()`` keeps every
    other view, so the next decision looks nearly every capacity up. One container of
    1.7 CPU + 512Mi (AUTO) on 10,000 heterogeneous nodes (``bench/placement.py``) took
    294-379 ms of CPU on the loaded development VM (167 ms in issue 16's profile), nearly
    all of it every node's signature and ``fast_caps`` in ``capacities`` (``plans`` sees
    only the node placed on), then 10,000 ``NodeInfo`` objects and the strategy's Python
    loops; on kept views 15-21 ms: lookups, and the strategy given columns built in C
    (``columns``, ``strategies.Columns``, AUTO's path for fewer containers than nodes).
    A cache keyed by signature across calls was rejected: a tuple's hash is not kept, so
    each lookup rehashes the whole signature (0.5 us a node, 5 ms on 10,000, against
    0.1 us for the memo), and it would need a bound of its own.
    The memo cannot go stale (a view never changes; a changed node is a new view), is
    bounded (``MEMO_REQUESTS`` per view) and goes with its view; the benchmark times
    fresh views to tell the work from the lookups.
    """

    def __init__(self, nodes: Sequence[Node], request: AnyRequest) -> None:
        self.nodes = list(nodes)
        self.by_name: dict[str, Node] = {}
        for node in self.nodes:
            if not isinstance(node, Node):
                raise invalid_request("nodes", node, "must be Node views")
            if node.name in self.by_name:
                raise invalid_request("nodes", node.name, "node names must be unique")
            self.by_name[node.name] = node
        bases = {node.share_base for node in self.nodes}
        if len(bases) > 1:
            raise invalid_request(
                "share_base", sorted(bases), "is cluster-wide: one value for all nodes"
            )
        self.share_base = bases.pop() if bases else 100
        self.resources = demand(request, self.share_base)
        self._capacities: dict[str, int] | None = None

    def capacities(self) -> dict[str, int]:
        """node -> capacity, in the order of ``nodes``. Equivalent to
        ``{n.name: node_capacity(n, request) for n in nodes}``. Cost O(nodes) for the
        views that remember this request; for the others O(c log c) each for the
        signatures, plus one walk per distinct signature."""
        need = self.resources
        m = need.memory_request
        out: dict[str, int] = {}
        if not need.cpu_bind:
            for node in self.nodes:
                out[node.name] = memory_capacity(node, need)
            self._capacities = out
            return out
        x, y = divmod(need.cpu_request, self.share_base)
        key = (x, y, m)
        # 1. What each view remembers from an earlier call (a decision changes only the
        #    views of the nodes it placed on, so on the next one nearly every view hits);
        found: list[tuple[int, tuple[int, ...]] | None]
        found = [node.memo.caps.get(key) for node in self.nodes]
        if None in found:
            # 2. the others worked out, once per distinct signature in this call.
            known: dict[Signature, tuple[int, ...]] = {}
            for k in [k for k, hit in enumerate(found) if hit is None]:
                node = self.nodes[k]
                sig = kept_signature(node)
                pool_caps = known.get(sig)
                if pool_caps is None:
                    if oversold(sig):
                        reports, _ = general_walk(node, x, y, m, None)
                        pool_caps = tuple(r.taken for r in reports)
                    else:
                        pool_caps = fast_caps(sig, x, y, m)
                    known[sig] = pool_caps
                found[k] = remember_caps(node, key, pool_caps)
        every = cast(list[tuple[int, tuple[int, ...]]], found)
        out = dict(zip(self.by_name, map(_first, every), strict=True))  # names in node order
        self._capacities = out
        return out

    def plans(self, deploy: Mapping[str, int]) -> dict[str, list[Plan]]:
        """node -> its ``deploy[node]`` plans (section 5.2 order), for every node in
        ``deploy``. Equivalent to ``cpu_plans(node, request, deploy[node])``; raises
        ``insufficient_resource`` the same way. Identical nodes with the same share get the
        same list. Cost O(nodes) plus one build per distinct (layout, share)."""
        capacities = self._capacities if self._capacities is not None else self.capacities()
        need = self.resources
        m = need.memory_request
        out: dict[str, list[Plan]] = {}
        if not need.cpu_bind:
            plan = memory_plan(need)
            for name, d in deploy.items():
                if d > capacities[name]:
                    raise shortage(self.by_name[name], need, d, capacities[name])
                out[name] = [plan] * d
            return out
        x, y = divmod(need.cpu_request, self.share_base)
        built: dict[object, list[Plan]] = {}
        for name, d in deploy.items():
            node = self.by_name[name]
            if d > capacities[name]:
                raise shortage(node, need, d, capacities[name])
            # Plans depend on the exact layout (ids, pieces, NUMA map, memory) and d.
            key = (
                tuple(node.cores.items()),
                node.pools,
                node.memory,
                None if node.numa_memory is None else tuple(node.numa_memory.values()),
                d,
            )
            plans = built.get(key)
            if plans is None:
                if oversold(kept_signature(node)):
                    plans = general_walk(node, x, y, m, d)[1]
                else:
                    plans = fast_plans(node, x, y, m, node_caps(node, need), d)
                built[key] = plans
            out[name] = plans
        return out

    def columns(
        self,
        existing: Mapping[str, int] | None = None,
        load: Mapping[str, tuple[float, float]] | None = None,
    ) -> Columns:
        """What ``distribute`` is given: per node (capacity included when 0) its capacity,
        its count from ``existing`` and (usage, rate) from ``load`` (0 when absent; see
        ``state.load``), as ``Columns``. Equivalent to one ``NodeInfo`` per node, column
        by column; built in C (``map`` over the names), no object per node: 10,000 nodes
        in 0.2 ms instead of 10-13 ms for the ``NodeInfo`` list."""
        capacities = self._capacities if self._capacities is not None else self.capacities()
        names = list(capacities)
        n = len(names)
        counts = list(map(existing.get, names, repeat(0, n))) if existing else [0] * n
        if not load:
            return Columns(names, list(capacities.values()), counts, [0.0] * n, [0.0] * n)
        pairs = list(map(load.get, names, repeat((0.0, 0.0), n)))
        return Columns(
            names,
            list(capacities.values()),
            counts,
            list(map(itemgetter(0), pairs)),
            list(map(itemgetter(1), pairs)),
        )

    def shared_pools(self, deploy: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
        """Memory mode: node -> its shared pool, for the deployed nodes; cpu-bind: {}."""
        if self.resources.cpu_bind:
            return {}
        return {name: self.by_name[name].shared_cores for name in deploy}


def place(
    nodes: Sequence[Node],
    request: AnyRequest,
    count: int,
    strategy: str,
    nodes_limit: int = 0,
    existing: Mapping[str, int] | None = None,
    *,
    load: Mapping[str, tuple[float, float]] | None = None,
    pressured: frozenset[str] = frozenset(),
) -> Placement:
    """Section 9: every node's capacity, the strategy's view of each node with count =
    ``existing.get(name, 0)`` (and usage, rate from ``load``; ``Planner.columns``),
    ``distribute(strategy, columns, count, nodes_limit)``, then each node's plans for its
    share.

    ``request``: a ``Request`` (cpu and memory stand for request and limit) or
    ``Normalized`` resources (for the Docker settings of distinct limits). All nodes share
    one share_base. Unbound containers under AUTO prefer the nodes not in ``pressured``
    (those under CPU pressure: ``pressure.prefer_calm``). Postcondition: the
    ``Placement`` invariant, or ``PlacementError``
    (the strategy's kinds, ``invalid_request``) and nothing is returned. Cost: see
    ``Planner``; the strategy's own cost (``distribute``) on top.
    """
    planner = Planner(nodes, request)
    capacities = planner.capacities()
    columns = planner.columns(existing, load)
    if strategy == "auto" and pressured and not planner.resources.cpu_bind:
        deploy = prefer_calm(columns, count, nodes_limit, pressured)
    else:
        deploy = distribute(strategy, columns, count, nodes_limit)
    plans = planner.plans(deploy)
    return Placement(capacities, deploy, plans, planner.resources, planner.shared_pools(deploy))
