"""The errors of the pool engine: a code naming the broken rule, the pool it concerns, a
message naming the pool, the field and the rule, and JSON-safe details.

    raise PoolConfigError("invalid_weight", "pool 'a': weight = 0 must be > 0",
                          pool="a", details={"field": "weight", "value": 0})
    error.code, error.pool, error.message, error.details

The service answers ``{"error": {"code": error.code, "message": error.message,
"details": error.details}}`` with HTTP 422 for both kinds: a configuration (or state) that
cannot be used, and update or simulation inputs that cannot be read.
"""

from __future__ import annotations

from collections.abc import Mapping

# Spec section 7, in the order the rules are checked, then allot-engine extensions:
# a document that is not shaped as the spec describes, a pool name that cannot be used,
# and a persisted state that cannot be read.
CONFIG_CODES = (
    "invalid_config",  # extension: not a mapping, unknown field, wrong type
    "invalid_setting",
    "invalid_pool_name",  # extension: empty, not a string, or the reserved "<root>"
    "invalid_weight",
    "invalid_resource",
    "invalid_guarantee_type",
    "missing_resource_flow",
    "missing_burst_guarantee",
    "burst_guarantee_on_relaxed_pool",
    "invalid_multiplier",
    "invalid_namespaces",  # extension: the namespaces a pool is opened to
    "unknown_parent",
    "pool_cycle",
    "nested_integral_pool",
    "children_exceed_parent",
    "invalid_state",  # extension: the state given to from_config
)

# Inputs of update() and simulate() (never stored, so never a configuration error).
INPUT_CODES = (
    "invalid_total",
    "invalid_demand",
    "invalid_usage",
    "unknown_pool",
    "not_a_leaf",
    "invalid_time",
    "invalid_timeline",
    "too_many_steps",
)


class PoolError(ValueError):
    """``code`` names the broken rule, ``pool`` the pool concerned (None for tree-wide
    problems), ``message`` says what, where and why, ``details`` holds plain JSON values
    (always including ``pool``)."""

    codes: tuple[str, ...] = CONFIG_CODES + INPUT_CODES

    def __init__(
        self,
        code: str,
        message: str,
        *,
        pool: str | None = None,
        details: Mapping[str, object] | None = None,
    ) -> None:
        if code not in self.codes:
            raise ValueError(f"unknown pool error code {code!r}")
        super().__init__(message)
        self.code = code
        self.pool = pool
        self.message = message
        self.details: dict[str, object] = {"pool": pool, **(details or {})}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r})"


class PoolConfigError(PoolError):
    """A configuration (or a persisted state) breaks a rule of spec section 7; nothing
    was built."""

    codes = CONFIG_CODES


class PoolInputError(PoolError):
    """An input of ``update`` or ``simulate`` (total, demands, usages, time, timeline)
    cannot be used; the tree is unchanged."""

    codes = INPUT_CODES
