"""Example bodies for the OpenAPI document, taken from the coordinator's tests and from
answers of a test coordinator with the two-CPU test host registered as ``node-a``.

Every example must validate against the schema it illustrates (tests/coordinator/
test_openapi.py checks), so a change of shape shows up there first.
"""

from __future__ import annotations

from typing import Any

MIB = 2**20
GIB = 2**30
CREATED = 1795267348.908

INVENTORY: dict[str, Any] = {
    "hostname": "host-a",
    "cpus": [
        {"id": 0, "core": 0, "package": 0, "numa": 0},
        {"id": 1, "core": 1, "package": 0, "numa": 0},
    ],
    "online": "0-1",
    "isolated": "",
    "reserved": "",
    "numa_nodes": [{"id": 0, "cpus": "0-1", "memory": GIB, "distances": {"0": 10}}],
    "memory": GIB,
    "gpus": [],
    "driver_version": "",
    "extended": {"example.com/fpga": 2},
    "problems": [],
}

NODE: dict[str, Any] = {
    "name": "node-a",
    "state": "ready",
    "reason": "",
    "inventory": INVENTORY,
    "address": "10.0.0.7",
    "agent_version": "0.1.0",
    "registered_at": 1795267348.871,
    "state_since": 1795267348.871,
    "cordoned": False,
    "pressure": {
        "under": True,
        "source": "psi",
        "avg10": 72.5,
        "avg60": 64.1,
        "at": 1795267410.2,
        "since": 1795267380.9,
    },
}

ALLOCATION: dict[str, Any] = {
    "node": "node-a",
    "cordoned": False,
    "share_base": 100,
    "cores": {"0": 100, "1": 100},
    "used": {"0": 50, "1": 0},
    "memory": GIB,
    "memory_used": 128 * MIB,
    "numa": {"0": 0, "1": 0},
    "numa_memory": {"0": GIB},
    "shared_pool": [1],
    "containers": ["team-a-batch-6d790269", "team-a-web-970859de"],
    "version": 2,
    "extended": {"example.com/fpga": 2},
    "extended_used": {"example.com/fpga": 1},
}
CAPACITY_GROW: dict[str, Any] = {"mode": "delta", "cores": {"2": 100}, "numa": {"2": 0}}
CAPACITY_MEMORY: dict[str, Any] = {"mode": "absolute", "memory": "2Gi"}
GROWN: dict[str, Any] = {
    **ALLOCATION,
    "cores": {"0": 100, "1": 100, "2": 100},
    "used": {"0": 50, "1": 0, "2": 0},
    "numa": {"0": 0, "1": 0, "2": 0},
    "shared_pool": [1, 2],
    "version": 3,
}
DRAINED: dict[str, Any] = {
    "node": "node-a",
    "cordoned": True,
    "released": ["team-a-batch-6d790269", "team-a-web-970859de"],
    "stand_ins": {
        "team-a-batch-6d790269": "team-a-batch-1c0ffee5",
        "team-a-web-970859de": "team-a-web-5ca1ab1e",
    },
    "placed": {"team-a-batch-1c0ffee5": "node-b"},
    "pending": {
        "team-a-web-5ca1ab1e": "needs 2 CPU on one node; the most free is 1.5 CPU, on node-b"
    },
    "hosts_acknowledged": True,
}
NODE_DELETED: dict[str, Any] = {
    "node": "node-c",
    "deleted": True,
    "released": ["team-a-web-0ddba11a"],
    "stand_ins": {"team-a-web-0ddba11a": "team-a-web-5eed1e55"},
    "placed": {"team-a-web-5eed1e55": "node-b"},
    "pending": {},
}

# --- leases -------------------------------------------------------------------------

TEMPLATE_BODY: dict[str, Any] = {
    "capacity": 7,
    "safe_capacity": 1,
    "description": "licence seats",
    "algorithm": {"kind": "STATIC", "lease_length": 30, "refresh_interval": 10},
}
TEMPLATE: dict[str, Any] = {
    "identifier_glob": "seats-*",
    "capacity": 7.0,
    "algorithm": {
        "kind": "STATIC",
        "lease_length": 30.0,
        "refresh_interval": 10.0,
        "learning_mode_duration": None,
    },
    "safe_capacity": 1.0,
    "description": "licence seats",
}
CAPACITY_REQUEST: dict[str, Any] = {
    "client_id": "web-7",
    "resources": [{"resource_id": "db.write", "wants": 25}],
}
CAPACITY_REQUEST_FULL: dict[str, Any] = {
    "client_id": "batch-2",
    "namespace": "team-a",
    "resources": [
        {"resource_id": "db.write", "wants": 100, "has": 20, "subclients": 4, "priority": 0}
    ],
}
CAPACITY_RESPONSE: dict[str, Any] = {
    "resources": [
        {
            "resource_id": "db.write",
            "gets": {"capacity": 25.0, "expiry_time": 1795267408.883, "refresh_interval": 5.0},
            "safe_capacity": 120.0,
        }
    ]
}
RELEASE_REQUEST: dict[str, Any] = {"client_id": "web-7", "resource_ids": ["db.write"]}
RELEASE_FOR_NAMESPACE: dict[str, Any] = RELEASE_REQUEST | {"namespace": "team-b"}
RESOURCE_STATUS: dict[str, Any] = {
    "resource_id": "db-orders",
    "template": "db-*",
    "kind": "FAIR_SHARE",
    "capacity": 10.0,
    "safe_capacity": None,
    "lease_length": 60.0,
    "refresh_interval": 5.0,
    "sum_has": 10.0,
    "sum_wants": 54.0,
    "clients": 2,
    "learning": False,
}
RESOURCE_LIST: dict[str, Any] = {"templates": [TEMPLATE], "resources": [RESOURCE_STATUS]}
_LEASE_OF_TEAM_A: dict[str, Any] = {
    "namespace": "team-a",
    "client_id": "web-7",
    "has": 8.0,
    "wants": 50.0,
    "subclients": 1,
    "priority": 0,
    "expiry_time": 1795267408.883,
}
_LEASE_OF_TEAM_B: dict[str, Any] = {
    "namespace": "team-b",
    "client_id": "web-7",
    "has": 2.0,
    "wants": 4.0,
    "subclients": 2,
    "priority": 1,
    "expiry_time": 1795267408.885,
}
RESOURCE_LEASES: dict[str, Any] = {
    "resource_id": "db-orders",
    "leases": [_LEASE_OF_TEAM_A, _LEASE_OF_TEAM_B],
    "others": {"clients": 0, "has": 0.0, "wants": 0.0},
}
RESOURCE_LEASES_OF_TEAM_A: dict[str, Any] = {
    "resource_id": "db-orders",
    "leases": [_LEASE_OF_TEAM_A],
    "others": {"clients": 1, "has": 2.0, "wants": 4.0},
}

# --- plans --------------------------------------------------------------------------

PLAN_REQUEST: dict[str, Any] = {
    "request": {"cpu": "1.7", "memory": "512Mi", "cpu_bind": True},
    "count": 2,
    "strategy": "auto",
    "nodes": [
        {
            "name": "n1",
            "cores": 4,
            "numa": {"0": 0, "1": 0, "2": 1, "3": 1},
            "memory": "8Gi",
            "numa_memory": {"0": "4Gi", "1": "4Gi"},
        }
    ],
}
PLAN_ON_REGISTERED: dict[str, Any] = {
    "request": {"cpu": "0.5", "memory": "256Mi"},
    "count": 2,
}


def _planned(cores: dict[str, int], fragment: int, numa: int, cpus: str) -> dict[str, Any]:
    return {
        "cores": cores,
        "fragment": fragment,
        "numa": numa,
        "memory": 512 * MIB,
        "docker": {
            "cpuset_cpus": cpus,
            "cpuset_mems": str(numa),
            "cpu_shares": 717,
            "cpu_quota": -1,
            "cpu_period": 100000,
            "mem_limit": 512 * MIB,
            "memswap_limit": 512 * MIB,
            "mem_reservation": 256 * MIB,
        },
    }


PLAN_RESPONSE: dict[str, Any] = {
    "cpu_pieces": 170,
    "share_base": 100,
    "memory": 512 * MIB,
    "cpu_bind": True,
    "strategy": "auto",
    "count": 2,
    "capacity": 2,
    "nodes": [
        {
            "name": "n1",
            "capacity": 2,
            "existing": 0,
            "deploy": 2,
            "containers": [
                _planned({"0": 70, "1": 100}, 0, 0, "0,1"),
                _planned({"2": 70, "3": 100}, 2, 1, "2,3"),
            ],
        }
    ],
}

# A node record an older version stored, which today's rules refuse: placement skips it.
SKIPPED_NODES: dict[str, str] = {"node-old": "inventory.memory = -5: Expected `int` >= 1"}
PLAN_SKIPPING = PLAN_RESPONSE | {"skipped_nodes": SKIPPED_NODES}

# --- quotas -------------------------------------------------------------------------

ELASTIC_QUOTA_BODY: dict[str, Any] = {
    "namespace": "team-a",
    "min": {"cpu": "500m", "memory": "1Gi"},
    "max": {"cpu": 2},
}
ELASTIC_QUOTA: dict[str, Any] = {
    "name": "team-a",
    "kind": "ElasticQuota",
    "namespaces": ["team-a"],
    "min": {"cpu": "0.5", "memory": GIB},
    "max": {"cpu": "2"},
    "status": {"used": {"cpu": "0", "memory": 0}, "over_quota": {"cpu": "0", "memory": 0}},
}
COMPOSITE_QUOTA_BODY: dict[str, Any] = {"namespaces": ["ml-1", "ml-2"], "min": {"gpu-memory": 40}}
COMPOSITE_QUOTA: dict[str, Any] = {
    "name": "ml",
    "kind": "CompositeElasticQuota",
    "namespaces": ["ml-1", "ml-2"],
    "min": {"gpu-memory": 40},
    "max": None,
    "status": {"used": {"gpu-memory": 0}, "over_quota": {"gpu-memory": 0}},
}
QUOTA_SUMMARY: dict[str, Any] = {
    "quotas": [COMPOSITE_QUOTA, ELASTIC_QUOTA],
    "total_min": {"gpu-memory": 40, "cpu": "0.5", "memory": GIB},
    "capacity": {"cpu": "2", "memory": GIB},
    "warnings": [],
}

# --- pools --------------------------------------------------------------------------

BURST_POOL: dict[str, Any] = {
    "integral_guarantees": {
        "guarantee_type": "burst",
        "resource_flow": {"cpu": 1000},
        "burst_guarantee_resources": {"cpu": 2000},
    }
}
_FAIR_ZERO = {"strong": 0.0, "integral": 0.0, "weight_proportional": 0.0, "total": 0.0}
ROOT_POOL: dict[str, Any] = {
    "name": "<root>",
    "config": {},
    "share": None,
    "introspection": {
        "integral_guarantee_type": "none",
        "total_burst_ratio": 0.0,
        "total_resource_flow_ratio": 0.0,
        "limit_share": 1.0,
        "demand_share": 0.0,
        "usage_share": None,
        "fair_share": _FAIR_ZERO,
    },
}
PRODUCTION_POOL: dict[str, Any] = {
    "name": "production",
    "config": BURST_POOL,
    "share": {"strong": 0.0, "integral": 0.1, "weight_proportional": 0.0, "total": 0.1},
    "introspection": {
        "integral_guarantee_type": "burst",
        "accumulated_resource_ratio_volume": 60.0,
        "accumulated_resource_volume": {"cpu": 600000.0},
        "integral_pool_capacity": {"cpu": 86400000.0},
        "specified_burst_ratio": 0.2,
        "specified_resource_flow_ratio": 0.1,
        "total_burst_ratio": 0.2,
        "total_resource_flow_ratio": 0.1,
        "estimated_burst_usage_duration_seconds": 600.0,
        "effective_burst_ratio": 0.2,
        "strong_guarantee_share": 0.0,
        "limit_share": 1.0,
        "demand_share": 0.1,
        "usage_share": None,
        "fair_share": {"strong": 0.0, "integral": 0.1, "weight_proportional": 0.0, "total": 0.1},
    },
}
# GET /v1/pools/{name} adds the hosts of the pool's containers, with their CPU pressure.
PRODUCTION_POOL_SHOWN: dict[str, Any] = PRODUCTION_POOL | {
    "hosts": {"node-a": NODE["pressure"], "node-b": None}
}
POOL_LIST: dict[str, Any] = {"pools": [ROOT_POOL, PRODUCTION_POOL], "alerts": []}
SIMULATION_REQUEST: dict[str, Any] = {
    "config": {"settings": {"smooth_period": 60}, "pools": {"burst": BURST_POOL}},
    "total": {"cpu": 10000},
    "timeline": [
        {"dt": 600, "demands": {}},
        {"dt": 1800, "demands": {"burst": {"cpu": 10000}}},
    ],
    "substep": 60,
}
_NOT_INTEGRAL = {
    "volume": None,
    "accumulated_resource_volume": None,
    "integral_pool_capacity": None,
    "estimated_burst_usage_duration_seconds": None,
}
SIMULATION_RESULT: dict[str, Any] = {
    "steps": [
        {
            "time": 660.0,
            "entry": 1,
            "dt": 60.0,
            "total": {"cpu": 10000},
            "alerts": [],
            "warnings": [],
            "pools": {
                "<root>": {
                    "integral_guarantee_type": "none",
                    "strong": 0.0,
                    "integral": 0.2,
                    "weight_proportional": 0.8,
                    "total": 1.0,
                    "demand": 1.0,
                    "usage": 1.0,
                    "demand_resources": {"cpu": 10000.0},
                    "usage_resources": {"cpu": 10000.0},
                    **_NOT_INTEGRAL,
                },
                "burst": {
                    "integral_guarantee_type": "burst",
                    "strong": 0.0,
                    "integral": 0.2,
                    "weight_proportional": 0.8,
                    "total": 1.0,
                    "demand": 1.0,
                    "usage": 1.0,
                    "demand_resources": {"cpu": 10000},
                    "usage_resources": {"cpu": 10000.0},
                    "volume": 54.0,
                    "accumulated_resource_volume": {"cpu": 540000.0},
                    "integral_pool_capacity": {"cpu": 86400000.0},
                    "estimated_burst_usage_duration_seconds": 540.0,
                },
            },
        }
    ]
}

# --- deployments and containers -----------------------------------------------------

DEPLOYMENT_SPEC: dict[str, Any] = {
    "name": "web",
    "image": "busybox",
    "command": ["sleep", "3600"],
    "count": 2,
    "resources": {"cpu": "0.5", "memory": "64Mi"},
    "cpu_bind": True,
}
BATCH_SPEC: dict[str, Any] = {
    "name": "batch",
    "image": "busybox",
    "count": 1,
    "resources": {"cpu": "0.5", "memory": "32Mi", "cpu_limit": 1},
    "env": {"MODE": "nightly"},
    "restart_policy": "on-failure",
    "priority": 5,
    "stop_timeout_seconds": 30,
}
FPGA_SPEC: dict[str, Any] = {
    "name": "decode",
    "image": "busybox",
    "count": 2,
    "resources": {"cpu": "0.25", "memory": "32Mi", "extended": {"example.com/fpga": 1}},
}
_LIMITS = {
    "cpuset_cpus": "0",
    "cpuset_mems": "0",
    "cpu_shares": 512,
    "cpu_quota": -1,
    "cpu_period": 100000,
    "mem_limit": 64 * MIB,
    "memswap_limit": 64 * MIB,
    "mem_reservation": 32 * MIB,
}


def _container(container_id: str, capacity: str) -> dict[str, Any]:
    return {
        "record": {
            "id": container_id,
            "namespace": "team-a",
            "deployment": "web",
            "node": "node-a",
            "image": "busybox",
            "command": ["sleep", "3600"],
            "env": {},
            "labels": {},
            "restart_policy": "always",
            "cpu_bind": True,
            "requests": {"cpu": "0.5", "memory": "64Mi"},
            "priority": 0,
            "pool": "team-a",
            "created": CREATED,
            "capacity": capacity,
            "limits": _LIMITS,
            "history": [{"at": CREATED, "event": "placed", "detail": "on node-a"}],
            "stop_timeout_seconds": 10,
        },
        "state": "starting",
        "observed": None,
        "reason": "not reported by node node-a yet",
    }


CONTAINER = _container("team-a-web-c558628a", "in-quota")
RUNNING_CONTAINER: dict[str, Any] = {
    **CONTAINER,
    "state": "running",
    "reason": "",
    "observed": {
        "id": "team-a-web-c558628a",
        "state": "running",
        "namespace": "team-a",
        "deployment": "web",
        "capacity": "in-quota",
        "limits": _LIMITS,
        "revision": 3,
        "started_at": "2026-11-21T09:22:28.911Z",
        "exit_code": None,
        "error": "",
        "drift": [],
        "drift_at": 0.0,
    },
}
_NO_IMAGE = "create failed: No such image: busybox:nope"
_RETRYING = f"{_NO_IMAGE} (try 3 in a row; the next 4s after it)"
FAILED_CONTAINER: dict[str, Any] = {
    **CONTAINER,
    "state": "failed",
    "reason": _RETRYING,
    "observed": {
        "id": "team-a-web-c558628a",
        "state": "failed",
        "namespace": "team-a",
        "deployment": "web",
        "capacity": "in-quota",
        "error": _RETRYING,
        "attempt": {"outcome": "failed", "reason": _RETRYING, "number": 3, "at": CREATED + 7},
    },
}
STOPPING_CONTAINER: dict[str, Any] = {
    **CONTAINER,
    "record": {
        **CONTAINER["record"],
        "stopping": "deleted on request",
        "history": [
            *CONTAINER["record"]["history"],
            {"at": CREATED + 60, "event": "stopping", "detail": "deleted on request"},
        ],
    },
    "state": "stopping",
    "reason": "deleted on request; held on node-a until its agent reports it removed",
}
_DEPLOYMENT_RECORD: dict[str, Any] = {
    "namespace": "team-a",
    "spec": {
        "name": "web",
        "image": "busybox",
        "command": ["sleep", "3600"],
        "env": {},
        "labels": {},
        "count": 2,
        "resources": {"cpu": "0.5", "memory": "64Mi", "cpu_limit": None, "memory_limit": None},
        "cpu_bind": True,
        "soft_memory": False,
        "strategy": "auto",
        "nodes_limit": 0,
        "pool": "",
        "priority": 0,
        "restart_policy": "always",
        "stop_timeout_seconds": 10,
    },
    "created": CREATED,
}
DEPLOYMENT: dict[str, Any] = {
    "deployment": _DEPLOYMENT_RECORD,
    "containers": [CONTAINER, _container("team-a-web-dd918deb", "over-quota")],
}
DEPLOYMENT_SKIPPING = DEPLOYMENT | {"skipped_nodes": SKIPPED_NODES}
DEPLOYMENT_PREVIEW = DEPLOYMENT | {"dry_run": True, "preempted": []}
SCALED_DEPLOYMENT: dict[str, Any] = {
    "deployment": {**_DEPLOYMENT_RECORD, "spec": {**_DEPLOYMENT_RECORD["spec"], "count": 1}},
    "containers": [CONTAINER],
}
DEPLOYMENT_DELETED: dict[str, Any] = {
    "deleted": "web",
    "containers": ["team-a-web-c558628a", "team-a-web-dd918deb"],
    "hosts_acknowledged": True,
}
REALLOC_DELTA: dict[str, Any] = {"cpu": "0.5", "memory": "32Mi"}
REALLOC_SHRINK: dict[str, Any] = {"memory": "-32Mi"}
REALLOCATED: dict[str, Any] = {
    **CONTAINER,
    "record": {
        **CONTAINER["record"],
        "requests": {"cpu": "1", "memory": 96 * MIB},
        "limits": {
            **_LIMITS,
            "cpu_shares": 1024,
            "mem_limit": 96 * MIB,
            "memswap_limit": 96 * MIB,
            "mem_reservation": 48 * MIB,
        },
        "history": [
            {"at": CREATED, "event": "placed", "detail": "on node-a"},
            {
                "at": 1795267348.925,
                "event": "realloc",
                "detail": "cpu_shares 512 -> 1024; mem_limit 67108864 -> 100663296;"
                " memswap_limit 67108864 -> 100663296; mem_reservation 33554432 -> 50331648",
            },
        ],
    },
}
REPLACED: dict[str, Any] = {
    **CONTAINER,
    "record": {
        **CONTAINER["record"],
        "id": "team-a-web-5e0b7a12",
        "image": "busybox:2",
        "created": 1795267412.031,
        "history": [
            {"at": CREATED, "event": "placed", "detail": "on node-a"},
            {"at": 1795267412.031, "event": "replaced", "detail": "team-a-web-c558628a (busybox)"},
        ],
    },
}
EVENTS: dict[str, Any] = {
    "events": [
        {
            "sequence": 1,
            "at": 1795267348.91,
            "kind": "placed",
            "reason": "on node-a",
            "namespace": "team-a",
            "deployment": "web",
            "container": "team-a-web-c558628a",
            "node": "node-a",
        },
        {
            "sequence": 2,
            "at": 1795267349.203,
            "kind": "refused",
            "reason": "capacity: need 9 containers, the nodes have room for 3",
            "namespace": "team-a",
            "deployment": "huge",
            "container": "",
            "node": "",
        },
        {
            "sequence": 3,
            "at": 1795267362.5,
            "kind": "lost",
            "reason": "no heartbeat for 15s",
            "namespace": "",
            "deployment": "",
            "container": "",
            "node": "node-b",
        },
    ]
}

# --- errors, one per status ---------------------------------------------------------


def _error(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details}}


ERRORS: dict[int, dict[str, Any]] = {
    400: _error("invalid_request", "invalid deployment: Expected `int` >= 1 - at `$.count`"),
    401: _error(
        "unauthorized",
        "missing or invalid API token",
        expected="an 'Authorization: Bearer <token>' header",
    ),
    403: _error(
        "forbidden",
        "changing ElasticQuotas needs an admin token; this is a token for namespaces team-a",
        needs="admin",
        namespaces=["team-a"],
    ),
    404: _error("not_found", "no node named 'ghost'", node="ghost"),
    409: _error(
        "insufficient_capacity",
        "need 5 containers, the nodes have room for 2",
        need=5,
        available=2,
        capacities={"n1": 2},
    ),
    413: _error("request_entity_too_large", "Request Entity Too Large: POST /v1/plans"),
    422: _error(
        "max_below_min",
        "ElasticQuota 'b': max is below min: resource='cpu' min='4' max='2'",
        quota="b",
        kind="ElasticQuota",
        items=[{"resource": "cpu", "min": "4", "max": "2"}],
    ),
    503: _error("store_unavailable", "the state store failed; nothing changed"),
}

# More examples of a status's errors, by what they show.
MORE_ERRORS: dict[int, dict[str, dict[str, Any]]] = {
    503: {
        "outcome unknown": _error(
            "outcome_unknown",
            "the state store failed while this change was being committed: it may or may not"
            " have been made. This coordinator stands down, so whichever leads next holds the"
            " store's answer; read the object back, or send the request again",
        )
    },
    409: {
        "unusable node": _error(
            "unusable_node",
            "node node-old cannot be used until its agent says hello again: "
            + SKIPPED_NODES["node-old"],
            node="node-old",
            reason=SKIPPED_NODES["node-old"],
        )
    },
}

METRICS = """\
# HELP allot_nodes Nodes by state.
# TYPE allot_nodes gauge
allot_nodes{state="ready"} 1.0
allot_nodes{state="degraded"} 0.0
allot_nodes{state="lost"} 0.0
# HELP allot_agent_connections Open agent websockets.
# TYPE allot_agent_connections gauge
allot_agent_connections 1.0
# HELP allot_lease_capacity Capacity of a leased resource.
# TYPE allot_lease_capacity gauge
allot_lease_capacity{resource="db-orders"} 10.0
"""
