"""Reading and checking a pool tree's configuration (spec sections 2 and 7).

Invariant of a ``ParsedConfig``: every rule of section 7 holds, so the engine never
checks again. Its pools are ordered parents first (by depth, then in the order the
configuration lists them), every amount is a finite float >= 0 under a resource name
allot knows, and the effective multiplier of every relaxed pool is set.

    parse_config({"pools": {"prod": {"integral_guarantees": {"guarantee_type": "burst",
        "resource_flow": {"cpu": 1000}, "burst_guarantee_resources": {"cpu": 2000}}}}})
        -> ParsedConfig(settings=TreeSettings(...), pools={"prod": PoolSpec(...)})
    parse_config({"pools": {"a": {"weight": 0}}})
        -> PoolConfigError invalid_weight: "pool 'a': field 'weight' = 0: must be a finite
           number > 0"

Accepted amounts: plain JSON numbers (int or float; not booleans, not strings such as
"500m"), finite and >= 0, in the cluster's units: ``cpu`` in cores, ``memory`` and
``gpu-memory`` in bytes or whatever unit the cluster total uses for them, devices in
units. Names are those allot knows everywhere: ``cpu``, ``memory``, ``gpu-memory`` (the
spec's ``gpu_memory``) and ``<domain>/<name>`` such as ``nvidia.com/gpu``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from coordinator.pools.errors import PoolConfigError
from shared.resource_names import is_rfc1123_label, resource_name_problem

ROOT: Final = "<root>"
NONE, BURST, RELAXED = "none", "burst", "relaxed"
GUARANTEE_TYPES: Final = (NONE, BURST, RELAXED)

# Relative tolerance of the children_exceed_parent sums: 0.1 + 0.2 cores must fit in 0.3.
SUM_TOLERANCE: Final = 1e-9

Amounts = dict[str, float]

_POOL_FIELDS = frozenset(
    {
        "parent",
        "strong_guarantee_resources",
        "weight",
        "resource_limits",
        "integral_guarantees",
        "namespaces",
    }
)
_INTEGRAL_FIELDS = frozenset(
    {
        "guarantee_type",
        "resource_flow",
        "burst_guarantee_resources",
        "relaxed_share_multiplier_limit",
    }
)


@dataclass(frozen=True, slots=True)
class TreeSettings:
    """The tree's settings (section 2) with their defaults; seconds and plain numbers."""

    fair_share_update_period: float = 1.0
    smooth_period: float = 60.0
    pool_capacity_saturation_period: float = 86_400.0
    relaxed_share_multiplier_limit: float = 3.0
    charge_volume_by_usage: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "fair_share_update_period": self.fair_share_update_period,
            "smooth_period": self.smooth_period,
            "pool_capacity_saturation_period": self.pool_capacity_saturation_period,
            "relaxed_share_multiplier_limit": self.relaxed_share_multiplier_limit,
            "charge_volume_by_usage": self.charge_volume_by_usage,
        }


# (name, lowest allowed, highest allowed, lowest included)
_SETTING_RANGES: Final = {
    "fair_share_update_period": (0.01, 60.0, True),
    "smooth_period": (0.0, math.inf, False),
    "pool_capacity_saturation_period": (0.0, math.inf, False),
    "relaxed_share_multiplier_limit": (1.0, 10.0, True),
}


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """One pool as configured, checked. ``parent`` is None for a top-level pool;
    ``multiplier`` is the effective relaxed multiplier (the pool's or the tree's) of a
    relaxed pool and None otherwise; ``multiplier_set`` tells whether the pool set it."""

    name: str
    parent: str | None = None
    strong_guarantee_resources: Amounts = field(default_factory=dict)
    weight: float = 1.0
    resource_limits: Amounts = field(default_factory=dict)
    guarantee_type: str = NONE
    resource_flow: Amounts = field(default_factory=dict)
    burst_guarantee_resources: Amounts = field(default_factory=dict)
    multiplier: float | None = None
    multiplier_set: bool = False
    # Namespaces opened to the pool: their deployments may name it or a pool below it
    # (besides the namespace of the pool's own name). Not part of the fair share.
    namespaces: tuple[str, ...] = ()

    @property
    def is_integral(self) -> bool:
        return self.guarantee_type != NONE


@dataclass(frozen=True, slots=True)
class ParsedConfig:
    """A checked configuration: settings and pools, parents before children."""

    settings: TreeSettings
    pools: dict[str, PoolSpec]


def _fail(code: str, pool: str | None, message: str, **details: object) -> PoolConfigError:
    where = f"pool {pool!r}: " if pool is not None else ""
    return PoolConfigError(code, where + message, pool=pool, details=details)


def _plain(value: object) -> object:
    """``value`` as a JSON-safe detail."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return repr(value)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _settings(raw: object) -> TreeSettings:
    if raw is None:
        return TreeSettings()
    if not isinstance(raw, Mapping):
        raise _fail("invalid_config", None, "'settings' must be a map", field="settings")
    values: dict[str, Any] = {}
    for name, value in raw.items():
        if name == "charge_volume_by_usage":
            if not isinstance(value, bool):
                raise _fail(
                    "invalid_setting",
                    None,
                    f"setting 'charge_volume_by_usage' = {value!r}: must be true or false",
                    field=f"settings.{name}",
                    value=_plain(value),
                )
            values[name] = value
            continue
        if name not in _SETTING_RANGES:
            raise _fail(
                "invalid_setting",
                None,
                f"unknown setting {name!r} (known: {', '.join(sorted(_SETTING_RANGES))}, "
                "charge_volume_by_usage)",
                field=f"settings.{name}",
            )
        low, high, closed = _SETTING_RANGES[name]
        ok = _is_number(value) and math.isfinite(value) and value <= high
        ok = ok and (value >= low if closed else value > low)
        if not ok:
            bound = f"in {low:g}..{high:g}" if math.isfinite(high) else f"> {low:g}"
            raise _fail(
                "invalid_setting",
                None,
                f"setting {name!r} = {value!r}: must be a number {bound}",
                field=f"settings.{name}",
                value=_plain(value),
            )
        values[name] = float(value)
    return TreeSettings(**values)


def _amounts(pool: str, field_name: str, raw: object) -> Amounts:
    """The resource map ``raw`` (None is empty), or ``invalid_resource`` naming the
    resource. O(r)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _fail(
            "invalid_resource",
            pool,
            f"field {field_name!r} = {raw!r}: must be a map of resource name -> amount",
            field=field_name,
            value=_plain(raw),
        )
    parsed: Amounts = {}
    for name, value in raw.items():
        where = f"{field_name}.{name}"
        if resource_name_problem(name) is not None:
            raise _fail(
                "invalid_resource",
                pool,
                f"field {where!r}: unknown resource name {name!r} (cpu, memory, gpu-memory "
                "or <domain>/<name> such as nvidia.com/gpu)",
                field=field_name,
                resource=_plain(name),
            )
        if not _is_number(value) or not math.isfinite(value) or value < 0:
            raise _fail(
                "invalid_resource",
                pool,
                f"field {where!r} = {value!r}: an amount must be a finite number >= 0",
                field=field_name,
                resource=name,
                value=_plain(value),
            )
        parsed[name] = float(value)
    return parsed


def _pool(name: object, raw: object, settings: TreeSettings) -> PoolSpec:
    if not isinstance(name, str) or not name or name == ROOT:
        raise _fail(
            "invalid_pool_name",
            None,
            f"pool name {name!r}: must be a non-empty string other than {ROOT!r}",
            value=_plain(name),
        )
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise _fail("invalid_config", name, f"the pool must be a map, not {raw!r}")
    unknown = sorted(str(k) for k in raw if k not in _POOL_FIELDS)
    if unknown:
        raise _fail(
            "invalid_config",
            name,
            f"unknown field {unknown[0]!r} (known: {', '.join(sorted(_POOL_FIELDS))})",
            field=unknown[0],
        )
    parent = raw.get("parent")
    if parent == ROOT:
        parent = None
    if parent is not None and not isinstance(parent, str):
        raise _fail(
            "unknown_parent",
            name,
            f"field 'parent' = {parent!r}: must be a pool name or null",
            field="parent",
            parent=_plain(parent),
        )
    weight = raw.get("weight")
    if weight is None:
        weight = 1.0
    if not _is_number(weight) or not math.isfinite(weight) or weight <= 0:
        raise _fail(
            "invalid_weight",
            name,
            f"field 'weight' = {weight!r}: must be a finite number > 0",
            field="weight",
            value=_plain(weight),
        )
    strong = _amounts(name, "strong_guarantee_resources", raw.get("strong_guarantee_resources"))
    limits = _amounts(name, "resource_limits", raw.get("resource_limits"))
    namespaces = _namespaces(name, raw.get("namespaces"))
    integral = raw.get("integral_guarantees")
    if integral is None:
        integral = {}
    if not isinstance(integral, Mapping):
        raise _fail(
            "invalid_config",
            name,
            f"field 'integral_guarantees' = {integral!r}: must be a map",
            field="integral_guarantees",
        )
    unknown = sorted(str(k) for k in integral if k not in _INTEGRAL_FIELDS)
    if unknown:
        raise _fail(
            "invalid_config",
            name,
            f"unknown field 'integral_guarantees.{unknown[0]}' "
            f"(known: {', '.join(sorted(_INTEGRAL_FIELDS))})",
            field=f"integral_guarantees.{unknown[0]}",
        )
    flow = _amounts(name, "integral_guarantees.resource_flow", integral.get("resource_flow"))
    burst = _amounts(
        name,
        "integral_guarantees.burst_guarantee_resources",
        integral.get("burst_guarantee_resources"),
    )
    kind = integral.get("guarantee_type", NONE)
    if kind not in GUARANTEE_TYPES:
        raise _fail(
            "invalid_guarantee_type",
            name,
            f"field 'integral_guarantees.guarantee_type' = {kind!r}: must be none, burst "
            "or relaxed",
            field="integral_guarantees.guarantee_type",
            value=_plain(kind),
        )
    if kind != NONE and not flow:
        raise _fail(
            "missing_resource_flow",
            name,
            f"a {kind} pool needs 'integral_guarantees.resource_flow' (zero amounts are "
            "allowed, an empty map is not)",
            field="integral_guarantees.resource_flow",
        )
    if kind == BURST and not burst:
        raise _fail(
            "missing_burst_guarantee",
            name,
            "a burst pool needs 'integral_guarantees.burst_guarantee_resources'",
            field="integral_guarantees.burst_guarantee_resources",
        )
    if kind == RELAXED and burst:
        raise _fail(
            "burst_guarantee_on_relaxed_pool",
            name,
            "a relaxed pool takes no 'integral_guarantees.burst_guarantee_resources'",
            field="integral_guarantees.burst_guarantee_resources",
        )
    multiplier = integral.get("relaxed_share_multiplier_limit")
    if multiplier is not None:
        if kind != RELAXED:
            raise _fail(
                "invalid_multiplier",
                name,
                "'integral_guarantees.relaxed_share_multiplier_limit' is for relaxed pools "
                f"only, this one is {kind}",
                field="integral_guarantees.relaxed_share_multiplier_limit",
                value=_plain(multiplier),
            )
        if not _is_number(multiplier) or not 1 <= multiplier <= 10:
            raise _fail(
                "invalid_multiplier",
                name,
                f"field 'integral_guarantees.relaxed_share_multiplier_limit' = "
                f"{multiplier!r}: must be a number in 1..10",
                field="integral_guarantees.relaxed_share_multiplier_limit",
                value=_plain(multiplier),
            )
    effective: float | None = None
    if kind == RELAXED:
        effective = (
            float(multiplier) if multiplier is not None else settings.relaxed_share_multiplier_limit
        )
    return PoolSpec(
        name=name,
        parent=parent,
        strong_guarantee_resources=strong,
        weight=float(weight),
        resource_limits=limits,
        guarantee_type=kind,
        resource_flow=flow,
        burst_guarantee_resources=burst,
        multiplier=effective,
        multiplier_set=multiplier is not None,
        namespaces=namespaces,
    )


def _namespaces(pool: str, raw: object) -> tuple[str, ...]:
    """The ``namespaces`` list (None is empty), or ``invalid_namespaces`` naming the first
    entry that is not a namespace name. O(n)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _fail(
            "invalid_namespaces",
            pool,
            f"field 'namespaces' = {raw!r}: must be a list of namespace names",
            field="namespaces",
            value=_plain(raw),
        )
    for entry in raw:
        if not is_rfc1123_label(entry):
            raise _fail(
                "invalid_namespaces",
                pool,
                f"field 'namespaces' has {entry!r}: not a namespace name (a-z, 0-9 and '-',"
                " starting and ending with a letter or digit, at most 63 characters)",
                field="namespaces",
                value=_plain(entry),
            )
    return tuple(dict.fromkeys(raw))


def _depths(pools: Mapping[str, PoolSpec]) -> dict[str, int]:
    """Each pool's depth (1 for top level), or ``unknown_parent`` / ``pool_cycle``.
    O(n) amortised: every chain is walked once."""
    for spec in pools.values():
        if spec.parent is not None and spec.parent not in pools:
            raise _fail(
                "unknown_parent",
                spec.name,
                f"field 'parent' = {spec.parent!r}: no such pool",
                field="parent",
                parent=spec.parent,
            )
    depth: dict[str, int] = {}
    for name in pools:
        chain: list[str] = []
        on_chain: set[str] = set()
        current: str | None = name
        while current is not None and current not in depth:
            if current in on_chain:
                cycle = chain[chain.index(current) :]
                raise _fail(
                    "pool_cycle",
                    current,
                    f"field 'parent' makes a loop: {' -> '.join([*cycle, current])}",
                    field="parent",
                    cycle=cycle,
                )
            chain.append(current)
            on_chain.add(current)
            current = pools[current].parent
        base = 0 if current is None else depth[current]
        for offset, member in enumerate(reversed(chain), start=1):
            depth[member] = base + offset
    return depth


def _check_nesting(pools: Mapping[str, PoolSpec]) -> None:
    """``nested_integral_pool``: below an integral pool, no pool is integral nor carries a
    flow or a burst. O(n * depth)."""
    for spec in pools.values():
        if not (spec.is_integral or spec.resource_flow or spec.burst_guarantee_resources):
            continue
        ancestor = spec.parent
        while ancestor is not None:
            above = pools[ancestor]
            if above.is_integral:
                what = (
                    f"a {spec.guarantee_type} pool"
                    if spec.is_integral
                    else "a pool with resource_flow or burst_guarantee_resources"
                )
                raise _fail(
                    "nested_integral_pool",
                    spec.name,
                    f"{what} cannot be below the {above.guarantee_type} pool {ancestor!r}",
                    field="parent",
                    integral_ancestor=ancestor,
                )
            ancestor = above.parent


_SUMMED_FIELDS: Final = (
    ("strong_guarantee_resources", "strong_guarantee_resources"),
    ("resource_flow", "integral_guarantees.resource_flow"),
    ("burst_guarantee_resources", "integral_guarantees.burst_guarantee_resources"),
)


def _check_children_sums(pools: Mapping[str, PoolSpec]) -> None:
    """``children_exceed_parent``: per non-root parent, field and resource, the children's
    sum is at most the parent's amount (missing = 0), up to a relative 1e-9. O(n * r)."""
    children: dict[str, list[PoolSpec]] = {}
    for spec in pools.values():
        if spec.parent is not None:
            children.setdefault(spec.parent, []).append(spec)
    for parent, kids in children.items():
        for attribute, field_name in _SUMMED_FIELDS:
            mine: Amounts = getattr(pools[parent], attribute)
            resources = dict.fromkeys(r for kid in kids for r in getattr(kid, attribute))
            for resource in resources:
                summed = math.fsum(getattr(kid, attribute).get(resource, 0.0) for kid in kids)
                allowed = mine.get(resource, 0.0)
                if summed > allowed + SUM_TOLERANCE * max(1.0, allowed):
                    raise _fail(
                        "children_exceed_parent",
                        parent,
                        f"the children's {field_name}.{resource} add up to {summed:g}, more "
                        f"than the parent's {allowed:g}",
                        field=field_name,
                        resource=resource,
                        children_sum=summed,
                        parent_amount=allowed,
                        children=[kid.name for kid in kids],
                    )


def parse_config(config: object) -> ParsedConfig:
    """The checked configuration, or ``PoolConfigError`` for the first broken rule.

    Rules in order: the document's shape, the settings, each pool in the order given
    (name, fields, weight, resource maps, guarantee type, flow, burst, multiplier), then
    the tree (unknown parent, cycle), nesting, and the children's sums. A parent of
    ``"<root>"`` means top level. Cost O(n * depth + n * r).
    """
    if not isinstance(config, Mapping):
        raise _fail("invalid_config", None, "the configuration must be a map")
    unknown = sorted(str(k) for k in config if k not in ("settings", "pools"))
    if unknown:
        raise _fail(
            "invalid_config",
            None,
            f"unknown top-level field {unknown[0]!r} (known: pools, settings)",
            field=unknown[0],
        )
    settings = _settings(config.get("settings"))
    raw_pools = config.get("pools")
    if raw_pools is None:
        raw_pools = {}
    if not isinstance(raw_pools, Mapping):
        raise _fail("invalid_config", None, "'pools' must be a map of name -> pool")
    pools = {name: _pool(name, raw, settings) for name, raw in raw_pools.items()}
    depth = _depths(pools)
    _check_nesting(pools)
    _check_children_sums(pools)
    ordered = sorted(pools, key=depth.__getitem__)  # stable: config order within a depth
    return ParsedConfig(settings, {name: pools[name] for name in ordered})
