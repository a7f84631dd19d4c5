"""The JSON Schemas of the OpenAPI document that no struct gives us.

Most bodies are msgspec structs and get their schema from msgspec. The rest are plain
dicts that handlers build (``{"nodes": [...]}``, ``{}``, the error body, the pool
simulation's steps) or ``dict[str, Any]`` fields whose shape lives in the code that reads
them (a pool's config); those are written here, named, and end up in
``components/schemas`` next to the generated ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Schema = dict[str, Any]

STRING: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer"}
NUMBER: Schema = {"type": "number"}
BOOLEAN: Schema = {"type": "boolean"}
OBJECT: Schema = {"type": "object"}
MAP_OF_STRINGS: Schema = {"type": "object", "additionalProperties": STRING}


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


def map_of(values: Schema) -> Schema:
    return {"type": "object", "additionalProperties": values}


def nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


def described(schema: Schema, description: str) -> Schema:
    return {**schema, "description": description}


def obj(
    properties: Mapping[str, Schema],
    *,
    required: Sequence[str] | None = None,
    closed: bool = False,
    description: str = "",
) -> Schema:
    """An object schema; every property is required unless ``required`` says otherwise.
    ``closed`` refuses unknown properties, as the request decoders that forbid them do."""
    schema: Schema = {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties if required is None else required),
    }
    if closed:
        schema["additionalProperties"] = False
    if description:
        schema["description"] = description
    return schema


# Plain numbers in the cluster's units (cores, bytes, devices), as the pool engine takes them.
AMOUNTS = described(map_of(NUMBER), "resource -> amount: cpu in cores, memory in bytes")
# Quota quantities as written: numbers or quantity strings ("500m", "1Gi").
QUANTITIES = described(
    map_of({"anyOf": [INTEGER, NUMBER, STRING]}),
    'resource -> quantity: cpu in cores (2, "500m"), memory in bytes or a quantity'
    ' ("1Gi"), devices in units ("nvidia.com/gpu": 1)',
)
# What a drain or a deletion of a node answers of the containers it took off the node.
_MOVED_OFF = {
    "released": described(array(STRING), "the ids of the containers moved off it"),
    "stand_ins": described(
        MAP_OF_STRINGS, "each released id -> the id of the container in its stead"
    ),
    "placed": described(MAP_OF_STRINGS, "the stand-ins placed at once -> their node"),
    "pending": described(MAP_OF_STRINGS, "the stand-ins left pending -> why they do not fit yet"),
}
_SHARES = dict.fromkeys(("strong", "integral", "weight_proportional", "total"), NUMBER)

SCHEMAS: dict[str, Schema] = {
    "Error": obj(
        {
            "error": obj(
                {
                    "code": described(STRING, "the rule or failure, e.g. not_found"),
                    "message": described(STRING, "what went wrong, for people"),
                    "details": described(OBJECT, "the numbers and names behind it"),
                }
            )
        },
        description="Every error answer has this body.",
    ),
    "Health": obj({"status": {"enum": ["ok"]}}),
    "Readiness": obj(
        {"status": {"enum": ["ok"]}, "role": {"enum": ["leader"]}},
        description="This coordinator leads and decides. A standby (several coordinators"
        " on etcd) answers 503 with role standby and the leader's URL in leader; a leader"
        " whose store cannot write, 503 with status degraded and the cause in reason.",
    ),
    "Empty": obj({}, closed=True, description="An empty object: done, nothing to say."),
    "NodeList": obj({"nodes": array(ref("NodeView"))}),
    "NodeCordon": obj({"node": STRING, "cordoned": BOOLEAN}),
    "NodeDrained": obj(
        {
            "node": STRING,
            "cordoned": BOOLEAN,
            **_MOVED_OFF,
            "hosts_acknowledged": described(
                BOOLEAN,
                "false when the answer went out before every node concerned acknowledged"
                " the removal (removal_ack_seconds passed)",
            ),
        }
    ),
    "NodeDeleted": obj({"node": STRING, "deleted": BOOLEAN, **_MOVED_OFF}),
    "ResourceList": obj(
        {"templates": array(ref("ResourceTemplate")), "resources": array(ref("ResourceStatus"))}
    ),
    "PoolList": obj(
        {
            "pools": array(ref("PoolView")),
            "alerts": described(array(STRING), "what the last fair-share update warned of"),
        }
    ),
    "PoolConfig": obj(
        {
            "parent": described(STRING, "the parent pool; absent for a top-level pool"),
            "strong_guarantee_resources": AMOUNTS,
            "weight": described(NUMBER, "> 0; default 1"),
            "resource_limits": AMOUNTS,
            "integral_guarantees": obj(
                {
                    "guarantee_type": {"enum": ["none", "burst", "relaxed"]},
                    "resource_flow": AMOUNTS,
                    "burst_guarantee_resources": AMOUNTS,
                    "relaxed_share_multiplier_limit": NUMBER,
                },
                required=[],
                closed=True,
            ),
            "namespaces": described(
                array({"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}),
                "namespaces opened to the pool: their deployments may name it or a pool"
                " below it (the namespace of the pool's own name always may)",
            ),
        },
        required=[],
        closed=True,
        description="One pool as written; every field is optional.",
    ),
    "PoolSettings": obj(
        {
            "fair_share_update_period": NUMBER,
            "smooth_period": NUMBER,
            "pool_capacity_saturation_period": NUMBER,
            "relaxed_share_multiplier_limit": NUMBER,
            "charge_volume_by_usage": BOOLEAN,
        },
        required=[],
        description="The tree's settings, in seconds and plain numbers.",
    ),
    "PoolTree": obj(
        {"settings": ref("PoolSettings"), "pools": map_of(ref("PoolConfig"))},
        required=[],
        description="A whole tree: its settings and every pool by name.",
    ),
    "PoolIntrospection": obj(
        {
            "integral_guarantee_type": {"enum": ["none", "burst", "relaxed"]},
            "fair_share": obj(_SHARES),
            "limit_share": NUMBER,
            "demand_share": NUMBER,
            "usage_share": nullable(NUMBER),
            "total_burst_ratio": NUMBER,
            "total_resource_flow_ratio": NUMBER,
            "specified_burst_ratio": NUMBER,
            "specified_resource_flow_ratio": NUMBER,
            "effective_burst_ratio": NUMBER,
            "strong_guarantee_share": NUMBER,
            "accumulated_resource_ratio_volume": NUMBER,
            "accumulated_resource_volume": AMOUNTS,
            "integral_pool_capacity": AMOUNTS,
            "estimated_burst_usage_duration_seconds": nullable(NUMBER),
        },
        required=[
            "integral_guarantee_type",
            "fair_share",
            "limit_share",
            "demand_share",
            "usage_share",
        ],
        description=(
            "A pool after the last fair-share update. Integral pools add the volumes;"
            " burst pools the estimated burst duration; the root has only the totals."
        ),
    ),
    "TimelineEntry": obj(
        {
            "dt": described(NUMBER, "the entry lasts this many seconds (or give at)"),
            "duration": described(NUMBER, "another name for dt"),
            "at": described(NUMBER, "the entry ends at this time"),
            "demands": map_of({"anyOf": [AMOUNTS, NUMBER]}),
            "usages": map_of({"anyOf": [AMOUNTS, NUMBER]}),
            "total": AMOUNTS,
        },
        required=[],
        description=(
            "One stretch of the timeline: leaf pool -> demand (amounts, or a number: that"
            " share of every resource), constant for the entry."
        ),
    ),
    "SimulatedPool": obj(
        {
            "integral_guarantee_type": {"enum": ["none", "burst", "relaxed"]},
            **_SHARES,
            "demand": NUMBER,
            "usage": NUMBER,
            "demand_resources": AMOUNTS,
            "usage_resources": AMOUNTS,
            "volume": nullable(NUMBER),
            "accumulated_resource_volume": nullable(AMOUNTS),
            "integral_pool_capacity": nullable(AMOUNTS),
            "estimated_burst_usage_duration_seconds": nullable(NUMBER),
        }
    ),
    "SimulationStep": obj(
        {
            "time": NUMBER,
            "entry": described(INTEGER, "index of the timeline entry"),
            "dt": NUMBER,
            "total": AMOUNTS,
            "alerts": array(STRING),
            "warnings": array(STRING),
            "pools": described(map_of(ref("SimulatedPool")), "pool name (or <root>) -> shares"),
        }
    ),
    "SimulationResult": obj({"steps": array(ref("SimulationStep"))}),
    "DeploymentList": obj({"deployments": array(ref("DeploymentView"))}),
    "DeploymentDeleted": obj(
        {
            "deleted": STRING,
            "containers": described(array(STRING), "the ids of its containers"),
            "hosts_acknowledged": described(
                BOOLEAN,
                "false when the answer went out before every node concerned acknowledged"
                " the removal (removal_ack_seconds passed)",
            ),
        }
    ),
    "ContainerList": obj({"containers": array(ref("ContainerView"))}),
    "ContainerDeleted": obj(
        {
            "deleted": described(STRING, "the container's id"),
            "stand_in": described(STRING, "the container that keeps its deployment's count"),
            "node": described(STRING, "where the stand-in went; empty while it is pending"),
            "pending": described(STRING, "why the stand-in is pending; empty once placed"),
            "hosts_acknowledged": described(
                BOOLEAN,
                "false when the answer went out before every node concerned acknowledged"
                " the removal (removal_ack_seconds passed)",
            ),
        }
    ),
    "EventList": obj({"events": described(array(ref("Event")), "oldest first")}),
    "MetricsText": described(STRING, "The Prometheus text exposition format, version 0.0.4."),
    "OpenApiDocument": obj(
        {"openapi": {"enum": ["3.1.0"]}, "info": OBJECT, "paths": OBJECT},
        description="This document.",
    ),
}

# Fields that are ``dict[str, Any]`` in a struct, given the shape that is really there:
# (component, property) -> schema.
REFINED: dict[tuple[str, str], Schema] = {
    ("PoolView", "config"): ref("PoolConfig"),
    ("PoolView", "introspection"): ref("PoolIntrospection"),
    ("SimulationRequest", "timeline"): array(ref("TimelineEntry")),
    ("SimulationRequest", "config"): described(
        nullable(ref("PoolTree")), "the tree to simulate; absent: the coordinator's own"
    ),
    ("SimulationRequest", "total"): AMOUNTS,
    ("ElasticQuotaBody", "min"): QUANTITIES,
    ("ElasticQuotaBody", "max"): nullable(QUANTITIES),
    ("CompositeQuotaBody", "min"): QUANTITIES,
    ("CompositeQuotaBody", "max"): nullable(QUANTITIES),
}
