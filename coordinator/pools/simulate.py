"""What-if runs of the pool engine (spec section 8): a tree, a cluster total and a
timeline of demands in, every update's shares and volumes out; nothing is stored.

Invariant: a simulation is exactly a sequence of ``PoolTree.update`` calls on a fresh
tree built from ``config`` and ``state``, the first one ``dt`` after ``start`` (which
counts as the previous update, so the first step already accrues volume); the output
is plain JSON (dicts, lists, floats, strings, None).

    simulate({"pools": {"p": {...burst...}}}, {"cpu": 1000},
             [{"dt": 600, "demands": {"p": {"cpu": 100}}}], substep=1)
        -> [{"time": 1.0, "entry": 0, "dt": 1.0, "pools": {"p": {"total": 0.1, ...}}},
            ... 600 steps]

Input. ``timeline`` is a list of entries, each a map with exactly one of
- ``"dt"`` (or its alias ``"duration"``): the entry lasts that many seconds (> 0);
- ``"at"``: the entry ends at that absolute time (> the previous entry's end);
and optionally
- ``"demands"``: {leaf pool: {resource: amount} or a share (a number: that fraction of
  every resource of the total)}, constant within the entry; pools left out demand 0;
- ``"usages"``: the same shape, the measured usage (read with
  ``charge_volume_by_usage``; without it the granted share counts as used);
- ``"total"``: {resource: amount}, the cluster during this entry (default: ``total``).
An entry is one update at its end, or ``ceil(dt / substep)`` equal updates when
``substep`` is given (the service may pass the tree's ``fair_share_update_period``).

Output: one step per update, in time order::

    {"time": float,            # the update's now
     "entry": int,             # index of the timeline entry
     "dt": float,              # seconds since the previous step
     "total": {resource: amount},
     "alerts": [code, ...],    # guarantee_overcommit, flow_overcommit
     "warnings": [str, ...],   # on an entry's first step: steps longer than smooth_period
     "pools": {name or "<root>": {
         "integral_guarantee_type": "none" | "burst" | "relaxed",
         "strong", "integral", "weight_proportional", "total": float,   # shares
         "demand": float, "usage": float,                               # shares
         "demand_resources": {resource: amount},
         "usage_resources": {resource: amount},  # min(total share * total_r, demand_r)
                                                 # per leaf unless usages are given;
                                                 # parents: sums of their children
         "volume": float | None,                 # V in share * s, integral pools
         "accumulated_resource_volume": {resource: amount * s} | None,
         "integral_pool_capacity": {resource: amount * s} | None,
         "estimated_burst_usage_duration_seconds": float | None}}}

Cost: the steps times one update, plus O(pools * resources) per step for the output.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from coordinator.pools.config import NONE, ROOT
from coordinator.pools.errors import PoolInputError
from coordinator.pools.tree import PoolTree

MAX_STEPS: Final = 200_000
_ENTRY_FIELDS: Final = frozenset({"dt", "duration", "at", "demands", "usages", "total"})

Amounts = dict[str, float]


def _bad(index: int, message: str, **details: object) -> PoolInputError:
    return PoolInputError(
        "invalid_timeline", f"timeline[{index}]: {message}", details={"entry": index, **details}
    )


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _resources(
    index: int, what: str, given: object, total: Mapping[str, float]
) -> dict[str, Amounts]:
    """{pool: resources}, a share x becoming x * total_r for every resource."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise _bad(index, f"{what} must be a map of pool -> resources or share", field=what)
    out: dict[str, Amounts] = {}
    for pool, value in given.items():
        if isinstance(value, Mapping):
            out[pool] = dict(value)
        elif _finite(value) and value >= 0:
            out[pool] = {r: value * t for r, t in total.items() if t > 0}
        else:
            raise _bad(
                index,
                f"{what}.{pool} = {value!r}: must be a map of resources or a share >= 0",
                field=what,
                pool=str(pool),
            )
    return out


def _plan(
    timeline: Sequence[object], total: Mapping[str, float], start: float, substep: float | None
) -> list[tuple[int, float, int, Mapping[str, Any]]]:
    """(entry index, its start time, its number of steps, the entry) per entry, checked;
    ``PoolInputError`` before anything runs."""
    plan = []
    now = start
    steps = 0
    for index, entry in enumerate(timeline):
        if not isinstance(entry, Mapping):
            raise _bad(index, "each entry must be a map")
        unknown = sorted(str(k) for k in entry if k not in _ENTRY_FIELDS)
        if unknown:
            raise _bad(index, f"unknown field {unknown[0]!r}", field=unknown[0])
        timing = [k for k in ("dt", "duration", "at") if k in entry]
        if len(timing) != 1:
            raise _bad(index, "needs exactly one of 'dt', 'duration' or 'at'")
        value = entry[timing[0]]
        if not _finite(value):
            raise _bad(index, f"{timing[0]} = {value!r}: must be a finite number of seconds")
        length = float(value) - now if timing[0] == "at" else float(value)
        if length <= 0:
            raise _bad(
                index,
                f"{timing[0]} = {value!r}: the entry must last > 0 s (it starts at {now:g})",
                field=timing[0],
            )
        count = 1 if substep is None else max(1, math.ceil(length / substep - 1e-9))
        steps += count
        if steps > MAX_STEPS:
            raise PoolInputError(
                "too_many_steps",
                f"the timeline needs more than {MAX_STEPS} updates; use a larger substep",
                details={"max_steps": MAX_STEPS},
            )
        plan.append((index, now, count, entry))
        now += length
    return plan


def simulate(
    config: Mapping[str, object],
    total: Mapping[str, float],
    timeline: Sequence[Mapping[str, Any]],
    state: Mapping[str, object] | None = None,
    *,
    start: float | None = None,
    substep: float | None = None,
) -> list[dict[str, Any]]:
    """Run ``timeline`` (see the module docstring for both shapes) through a fresh tree
    of ``config`` continuing from ``state``; ``start`` is the time of the previous update
    (default ``state["updated_at"]``, else 0). Raises ``PoolConfigError`` for the
    configuration or state and ``PoolInputError`` for the rest: the timeline's shape and
    ``too_many_steps`` (above 200,000 updates) before any update runs, a bad demand
    (unknown pool, negative amount) when its step is reached; no partial result is
    returned. Cost: one update per step plus O(pools * r) per step for the output.
    """
    if substep is not None and not (_finite(substep) and substep > 0):
        raise PoolInputError(
            "invalid_timeline", f"substep = {substep!r}: must be a number of seconds > 0"
        )
    if not isinstance(timeline, list | tuple):
        raise PoolInputError("invalid_timeline", "the timeline must be a list of entries")
    if start is None:
        remembered = (state or {}).get("updated_at")
        start = float(remembered) if _finite(remembered) else 0.0  # type: ignore[arg-type]
    if not _finite(start):
        raise PoolInputError("invalid_time", f"start = {start!r}: must be a finite number")
    tree = PoolTree.from_config(config, state, now=start)
    plan = _plan(timeline, total, float(start), substep)
    names = [ROOT, *tree.pools]
    parents = {name: tree.spec(name).parent or ROOT for name in tree.pools}
    smooth = tree.settings.smooth_period
    steps: list[dict[str, Any]] = []
    for index, begin, count, entry in plan:
        entry_total = entry.get("total", total)
        if not isinstance(entry_total, Mapping):
            raise _bad(index, "total must be a map of resource -> amount", field="total")
        demands = _resources(index, "demands", entry.get("demands"), entry_total)
        given = entry.get("usages")
        usages = None if given is None else _resources(index, "usages", given, entry_total)
        length = (
            float(entry["at"]) - begin
            if "at" in entry
            else float(entry.get("dt", entry.get("duration")))
        )
        step = length / count
        warnings = []
        if step > smooth:
            warnings.append(
                f"timeline[{index}]: steps of {step:g} s are longer than smooth_period "
                f"({smooth:g} s): each pays a whole step at V/T_s and over-grants; "
                "give a substep"
            )
        previous = begin
        for j in range(1, count + 1):
            now = begin + length * j / count
            shares = tree.update(entry_total, demands, now, usages)
            record = _record(tree, names, parents, shares, entry_total, demands, usages)
            steps.append(
                {
                    "time": now,
                    "entry": index,
                    "dt": now - previous,
                    "total": dict(entry_total),
                    "alerts": tree.alerts,
                    "warnings": warnings if j == 1 else [],
                    "pools": record,
                }
            )
            previous = now
    return steps


def _add(into: Amounts, amounts: Mapping[str, float]) -> None:
    for r, v in amounts.items():
        into[r] = into.get(r, 0.0) + v


def _record(
    tree: PoolTree,
    names: list[str],
    parents: Mapping[str, str],
    shares: Mapping[str, Any],
    total: Mapping[str, float],
    demands: Mapping[str, Amounts],
    usages: Mapping[str, Amounts] | None,
) -> dict[str, dict[str, Any]]:
    demand_resources: dict[str, Amounts] = {name: {} for name in names}
    usage_resources: dict[str, Amounts] = {name: {} for name in names}
    for name in reversed(names[1:]):  # children before parents
        if tree.is_leaf(name):
            wanted = demands.get(name, {})
            demand_resources[name] = dict(wanted)
            if usages is not None:
                usage_resources[name] = dict(usages.get(name, {}))
            else:
                t = shares[name].total
                usage_resources[name] = {
                    r: min(t * total.get(r, 0.0), v) for r, v in wanted.items()
                }
        _add(demand_resources[parents[name]], demand_resources[name])
        _add(usage_resources[parents[name]], usage_resources[name])
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        seen = tree.introspect(name)
        fair = seen["fair_share"]
        assert isinstance(fair, dict)
        usage = seen["usage_share"] if usages is not None else fair["total"]
        out[name] = {
            "integral_guarantee_type": seen["integral_guarantee_type"],
            **fair,
            "demand": seen["demand_share"],
            "usage": usage,
            "demand_resources": demand_resources[name],
            "usage_resources": usage_resources[name],
            "volume": seen.get("accumulated_resource_ratio_volume"),
            "accumulated_resource_volume": seen.get("accumulated_resource_volume"),
            "integral_pool_capacity": seen.get("integral_pool_capacity"),
            "estimated_burst_usage_duration_seconds": seen.get(
                "estimated_burst_usage_duration_seconds"
            ),
        }
        if seen["integral_guarantee_type"] == NONE:
            out[name]["volume"] = None
    return out
