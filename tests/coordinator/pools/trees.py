"""Pool configurations and helpers shared by the pool tests.

Pools are built with ``burst(...)``, ``relaxed(...)`` and ``pool(...)``; amounts are
cores unless a test says otherwise. ``run`` is ``simulate`` with its steps returned
per pool as columns, so a test reads ``cols["prod"]["integral"][k]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from coordinator.pools import simulate

Config = dict[str, Any]


def pool(
    parent: str | None = None,
    *,
    strong: float | None = None,
    weight: float | None = None,
    limit: float | None = None,
    **integral: Any,
) -> dict[str, Any]:
    """A pool entry; cpu amounts in cores; ``integral`` becomes ``integral_guarantees``."""
    spec: dict[str, Any] = {"parent": parent}
    if strong is not None:
        spec["strong_guarantee_resources"] = {"cpu": strong}
    if weight is not None:
        spec["weight"] = weight
    if limit is not None:
        spec["resource_limits"] = {"cpu": limit}
    if integral:
        spec["integral_guarantees"] = integral
    return spec


def burst(flow: float, burst_cores: float, parent: str | None = None, **extra: Any) -> Any:
    return pool(
        parent,
        guarantee_type="burst",
        resource_flow={"cpu": flow},
        burst_guarantee_resources={"cpu": burst_cores},
        **extra,
    )


def relaxed(flow: float, parent: str | None = None, **extra: Any) -> Any:
    multiplier = extra.pop("multiplier", None)
    spec = pool(parent, guarantee_type="relaxed", resource_flow={"cpu": flow}, **extra)
    if multiplier is not None:
        spec["integral_guarantees"]["relaxed_share_multiplier_limit"] = multiplier
    return spec


def tree_config(pools: Mapping[str, Any], **settings: Any) -> Config:
    return {"settings": dict(settings), "pools": dict(pools)}


def volumes(**by_pool: float) -> dict[str, Any]:
    """A state with these volumes (share * s), nothing charged, no previous time."""
    return {
        "updated_at": None,
        "pools": {
            name: {"volume_ratio_s": v, "last_integral_share": 0.0, "last_strong_share": 0.0}
            for name, v in by_pool.items()
        },
    }


def columns(steps: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, list[Any]]]:
    """{pool: {field: [value per step]}} plus {"<time>": {"time", "dt", "alerts"}}."""
    out: dict[str, dict[str, list[Any]]] = {"<time>": {"time": [], "dt": [], "alerts": []}}
    for step in steps:
        for key in ("time", "dt", "alerts"):
            out["<time>"][key].append(step[key])
        for name, values in step["pools"].items():
            into = out.setdefault(name, {})
            for key, value in values.items():
                into.setdefault(key, []).append(value)
    return out


def run(
    config: Config,
    total: Mapping[str, float],
    timeline: Sequence[Mapping[str, Any]],
    state: Mapping[str, Any] | None = None,
    *,
    substep: float | None = None,
) -> dict[str, dict[str, list[Any]]]:
    return columns(simulate(config, total, timeline, state, start=0.0, substep=substep))
