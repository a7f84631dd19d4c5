"""The pool tree in the coordinator: the pools as committed, the fair-share update run
every ``fair_share_update_period``, and what to store of them.

Store keys:
    /pools/config   {pool name: pool config} (the tree's settings come from [pools])
    /pools/state    what ``PoolTree.state()`` returns: volumes, last shares, updated_at

Every write is a decision on the deployments' sequencer (``deployments.pool_writes``), as
quotas are: a pool put or delete is checked on the configuration the decisions before it
left (``check``), its writes made when its batch commits (``staged``: the whole
configuration and the state of the tree it leaves) and applied only once committed
(``confirm``). A failed commit changes nothing here. Deployments are decided on the
configuration as the same batch leaves it, so a deployment into a pool created just
before sees it, and one after a delete does not.

The fair-share update (``update``) changes the volumes in memory only: it is time
passing, not a decision, and the agents apply its shares whether or not a store write
follows. The state is a checkpoint of it, stored at least every ``STATE_WRITE_SECONDS``
(``state_due``) and on shutdown, by a decision (``DeploymentService.save_pool_state``)
whose state is taken when its batch commits, so it is always the state of the
configuration committed with or before it. Memory thus runs ahead of the stored state by
design, by at most that period plus a failed write's retry: a failed state write leaves
memory as it is and the last stored checkpoint standing, and the next update tries
again. A restart loses no accrual either way: its first update credits the whole gap
since the stored ``updated_at`` (up to one saturation period), as the agents kept the
last quotas.

A pool's demand comes from its containers. A pool that holds containers but is not
configured (a namespace's own) joins the tree on demand, top level with weight 1
(``coordinator.pools.on_demand``), until its last container goes; it is listed and shown
like the others, with ``{}`` for its config, and is never stored.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from coordinator.config import PoolSettings
from coordinator.pools import ROOT, PoolTree, Share
from coordinator.pools.on_demand import on_demand, tree_pools
from coordinator.store import Store
from shared.api.nodes import NodeHealth, NodePressure, NodeRecord
from shared.codec import json_decoder, to_json
from shared.logs import get_logger

log = get_logger("allot.coordinator.pools")

CONFIG_KEY = "/pools/config"
STATE_KEY = "/pools/state"
STATE_WRITE_SECONDS = 10.0
# The most of one core an update (the tree, the pools' demands and usages, and walking
# their containers' weights) may take: at 200,000 containers one took 240 ms of CPU, and
# every second that was a quarter of the coordinator during a deploy storm.
UPDATE_CPU_SHARE = 0.05

_decode_object: msgspec.json.Decoder[dict[str, Any]] = json_decoder(dict[str, Any])


class PoolView(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    config: dict[str, Any]  # as written ({} for the root)
    share: dict[str, float] | None  # strong, integral, weight_proportional, total; None before
    introspection: dict[str, Any]
    # GET /v1/pools/{name} only: the CPU pressure of each node the containers of the
    # pool and of the pools below it run on (None: its agent has reported none).
    hosts: dict[str, NodePressure | None] = {}


class PoolFigures(msgspec.Struct, frozen=True, kw_only=True):
    """The last fair-share update's inputs and result (what /metrics shows): the
    cluster's total (cores, bytes) and per leaf pool its demand and usage, per pool its
    share."""

    total: dict[str, float]
    demands: dict[str, dict[str, float]]
    usages: dict[str, dict[str, float]]
    shares: dict[str, Share]


@dataclass(frozen=True)
class StagedPools:
    """A batch's pool writes, made when it commits: ``pools`` the whole configuration it
    leaves (None: unchanged), ``puts`` what to store, ``state_at`` when the stored state
    was taken (None: no state stored); ``tree`` the tree of ``pools`` as it was staged,
    at the service's ``version``."""

    pools: dict[str, dict[str, Any]] | None
    puts: dict[str, bytes]
    state_at: float | None
    tree: PoolTree | None = None
    version: int = 0


class PoolService:
    def __init__(
        self,
        settings: PoolSettings,
        pools: Mapping[str, dict[str, Any]],
        tree: PoolTree,
        *,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = msgspec.structs.asdict(settings)
        # As configured: what the store holds. Replaced whole, never changed in place, so
        # the deciding thread may read it (``configured``).
        self._pools = dict(pools)
        self._on_demand: list[str] = []  # in the tree too, while they hold containers
        self._tree = tree
        self._wall = wall_clock
        self._shares: dict[str, Share] = {}
        self._figures = PoolFigures(total={}, demands={}, usages={}, shares={})
        self._state_written_at = wall_clock()
        self._version = 0  # moved by every change of the tree: an update, its pools

    @classmethod
    async def load(
        cls, store: Store, settings: PoolSettings, *, wall_clock: Callable[[], float] = time.time
    ) -> PoolService:
        stored = {entry.key: entry.value for entry in await store.range("/pools/")}
        pools = _decode_object.decode(stored.get(CONFIG_KEY, b"{}"))
        state = _decode_object.decode(stored[STATE_KEY]) if STATE_KEY in stored else None
        config = {"settings": msgspec.structs.asdict(settings), "pools": pools}
        tree = PoolTree.from_config(config, state)
        log.info(
            "pools loaded",
            pools=len(pools),
            updated_at=None if state is None else state.get("updated_at"),
        )
        return cls(settings, pools, tree, wall_clock=wall_clock)

    @property
    def update_period(self) -> float:
        return float(self._settings["fair_share_update_period"])

    def pause_after(self, cpu_seconds: float) -> float:
        """The seconds to wait before the next update, after one that took
        ``cpu_seconds`` of CPU: ``fair_share_update_period``, or longer so that updates
        take at most ``UPDATE_CPU_SHARE`` of a core. The tree accrues integral volumes by
        the clock, not by the period, so a longer pause delays shares but loses nothing."""
        return max(self.update_period, cpu_seconds / UPDATE_CPU_SHARE)

    @property
    def alerts(self) -> list[str]:
        return list(self._tree.alerts)

    @property
    def figures(self) -> PoolFigures:
        return self._figures

    def config(self) -> dict[str, Any]:
        """The whole tree as ``PoolTree.from_config`` takes it, the pools created on
        demand included (as ``{}``)."""
        return {"settings": dict(self._settings), "pools": tree_pools(self._pools, self._on_demand)}

    def names(self) -> list[str]:
        """Every pool of the tree: the configured ones and those created on demand."""
        return sorted([*self._pools, *self._on_demand])

    def subtree(self, name: str) -> list[str]:
        """``name`` and every pool below it, by name (every pool for the root). O(pools)."""
        if name == ROOT:
            return self.names()
        below = [name]
        for pool in below:  # grows as children are found
            below += [
                n for n, config in sorted(self._pools.items()) if config.get("parent") == pool
            ]
        return below

    def view(self, name: str) -> PoolView | None:
        if name != ROOT and name not in self._pools and name not in self._on_demand:
            return None
        share = self._shares.get(name)
        return PoolView(
            name=name,
            config=self._pools.get(name, {}),
            share=None if share is None else share.as_dict(),
            introspection=self._tree.introspect(name),
        )

    def configured(self) -> Mapping[str, dict[str, Any]]:
        """The configured pools as committed (to read, not to change)."""
        return self._pools

    def on_demand_names(self) -> list[str]:
        """The pools in the tree only while they hold containers, by name."""
        return self._on_demand

    def check(self, pools: Mapping[str, dict[str, Any]]) -> None:
        """``PoolConfigError`` unless ``pools``, the whole configuration, makes a valid tree
        alone: no pool may sit below one that exists only on demand. Reads only the
        settings, so a decider may call it off the event loop."""
        PoolTree.from_config({"settings": self._settings, "pools": dict(pools)})

    def staged(self, changes: Mapping[str, dict[str, Any] | None], *, state: bool) -> StagedPools:
        """The writes of a batch that makes ``changes`` (pool -> its config, None once
        deleted) and, with ``state``, stores the tree's state: the whole configuration and
        the state of the tree it leaves, taken now from the tree in memory (a config
        change stores the state too, so that a deleted pool's volume is never stored
        beside a configuration without it). Called on the event loop when the batch
        commits, after the batch before it was confirmed (its configuration is this
        one's base, as for ``EventLog.stage``). O(pools)."""
        if not changes and not state:
            return StagedPools(pools=None, puts={}, state_at=None)
        now = self._wall()
        if not changes:
            return StagedPools(
                pools=None, puts={STATE_KEY: to_json(self._tree.state())}, state_at=now
            )
        pools = dict(self._pools)
        for name, config in changes.items():
            if config is None:
                pools.pop(name, None)
            else:
                pools[name] = config
        tree = self._tree_of(pools, on_demand(pools, self._on_demand), self._tree.state())
        puts = {CONFIG_KEY: to_json(pools), STATE_KEY: to_json(tree.state())}
        return StagedPools(pools, puts, now, tree, self._version)

    def confirm(self, staged: StagedPools) -> None:
        """``staged`` is committed: the configuration it wrote is the tree's, carrying on
        from the state in memory now. The tree it staged when nothing changed the tree
        since, else one made again (an update accrued meanwhile: memory is then that
        update ahead of the store, which a restart credits). O(1), or O(pools)."""
        if staged.pools is not None:
            pools = staged.pools
            kept = on_demand(pools, self._on_demand)
            if staged.tree is not None and staged.version == self._version:
                self._tree = staged.tree
            else:
                self._tree = self._tree_of(pools, kept, self._tree.state())
            self._pools, self._on_demand = pools, kept
            self._version += 1
            self._shares = {
                n: s for n, s in self._shares.items() if n in pools or n in kept or n == ROOT
            }
        if staged.state_at is not None:
            self._state_written_at = staged.state_at

    def _tree_of(
        self, pools: Mapping[str, dict[str, Any]], added: list[str], state: Mapping[str, Any]
    ) -> PoolTree:
        config = {"settings": self._settings, "pools": tree_pools(pools, added)}
        return PoolTree.from_config(config, state)

    def _follow_demand(self, named: Mapping[str, object]) -> None:
        """Create on demand the pools of ``named`` the configuration lacks, and drop those
        created on demand that ``named`` no longer holds (the tree carries on from its
        state)."""
        wanted = on_demand(self._pools, named)
        if wanted == self._on_demand:
            return
        self._tree = self._tree_of(self._pools, wanted, self._tree.state())
        for pool in sorted(set(wanted) - set(self._on_demand)):
            log.info("pool created on demand", pool=pool, weight=1.0)
        for pool in sorted(set(self._on_demand) - set(wanted)):
            log.info("pool on demand removed", pool=pool, reason="no containers")
        self._on_demand = wanted

    def update(
        self,
        total: Mapping[str, float],
        demands: Mapping[str, Mapping[str, float]] | None = None,
        usages: Mapping[str, Mapping[str, float]] | None = None,
    ) -> dict[str, Share]:
        """One fair-share update at the wall clock's now, in memory (``state_due`` says
        when to store its state).
        ``demands`` / ``usages``: leaf pool -> what its containers ask for / use (a pool
        not configured joins the tree on demand, a configured pool that is not a leaf is
        left out); usages are what a pool is charged by with ``charge_volume_by_usage``,
        and its ``usage_share``."""
        now = self._wall()
        self._version += 1
        self._follow_demand(demands or {})
        leaves = set(self._on_demand) | (
            set(self._pools) - {p.get("parent") for p in self._pools.values()}
        )

        def per_leaf(amounts: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
            return {leaf: dict(amounts.get(leaf, {})) for leaf in leaves}

        self._shares = self._tree.update(
            dict(total),
            per_leaf(demands or {}),
            now,
            usages=None if usages is None else per_leaf(usages),
        )
        self._figures = PoolFigures(
            total=dict(total),
            demands=per_leaf(demands or {}),
            usages=per_leaf(usages or {}),
            shares=self._shares,
        )
        for alert in self._tree.alerts:
            log.warning("pool guarantees exceed the cluster", alert=alert)
        return self._shares

    def state_due(self) -> bool:
        """Whether the state was last stored ``STATE_WRITE_SECONDS`` ago or more."""
        return self._wall() - self._state_written_at >= STATE_WRITE_SECONDS


def cluster_total(nodes: Sequence[NodeRecord]) -> dict[str, float]:
    """What the ready nodes offer, in the pools' units: cores and bytes. The reference
    for the total the registry keeps as records change (``NodeRegistry.total``, which the
    fair-share update reads): O(nodes)."""
    ready = [node.inventory for node in nodes if node.state == NodeHealth.READY]
    return {
        "cpu": float(sum(len(inventory.offered()) for inventory in ready)),
        "memory": float(sum(inventory.memory for inventory in ready)),
    }
