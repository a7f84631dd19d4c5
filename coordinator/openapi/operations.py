"""The table the OpenAPI document is built from: one ``Operation`` per route.

An operation names its request and success bodies (a struct type, or the name of a
schema in ``schemas``), who may call it, the error statuses it can answer and an
example of every body. Add an entry with every new route; tests/coordinator/
test_openapi.py fails until there is one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from coordinator.http.deployments import DeltaSpec, ReplaceSpec, ScaleSpec
from coordinator.http.node_admin import CapacitySpec
from coordinator.http.plans import PlanRequest
from coordinator.http.pools import SimulationRequest
from coordinator.http.quotas import CompositeQuotaBody, ElasticQuotaBody
from coordinator.openapi import examples as ex
from coordinator.openapi.schemas import INTEGER, STRING, Schema
from coordinator.services.pool_service import PoolView
from shared.api.containers import ContainerView
from shared.api.deployments import (
    MAX_COUNT,
    DeploymentSpec,
    DeploymentView,
    DeployPreview,
    PlacedView,
)
from shared.api.events import Event
from shared.api.leases import ResourceLeases, ResourceStatus, ResourceTemplate
from shared.api.node_admin import Allocation
from shared.api.nodes import NodeView
from shared.api.plans import PlanResponse
from shared.api.quotas import QuotaSummary, QuotaView
from shared.lease_protocol import CapacityRequest, CapacityResponse, ReleaseRequest
from shared.protocol import SUBPROTOCOL

OPENAPI_PATH = "/v1/openapi.json"

# A body: a struct or dataclass type, or the name of a schema in schemas.SCHEMAS.
Body = type[Any] | str

# Who may call an operation; the document says it in words and in ``security``.
Who = Literal["open", "join", "any", "admin", "namespace", "filtered", "owner"]

WHO: dict[Who, str] = {
    "open": "Open: no token needed.",
    "join": "Needs the agents' join token (not an API token).",
    "any": "Any API token.",
    "admin": "Needs an admin token; a namespace token gets 403.",
    "namespace": "An admin token, or a namespace token for {namespace}; 403 otherwise.",
    "filtered": "Any API token; a namespace token sees only its namespaces.",
    "owner": (
        "An admin token, or a namespace token for the container's namespace; to any other"
        " token the container does not exist (404)."
    ),
}

# Error statuses: the name of their shared response, and what they mean.
ERROR_RESPONSES: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "The request cannot be read: malformed JSON, a wrong field or filter."),
    401: ("Unauthorized", "The token is missing or is not one this coordinator accepts."),
    403: ("Forbidden", "The token's role may not do this, or a quota's max refuses it."),
    404: ("NotFound", "Nothing by that name (or nothing this token may see)."),
    409: (
        "Conflict",
        "Valid, but the cluster cannot satisfy it (capacity), it clashes with what exists"
        " (a rule between quotas, a deployment of that name), another writer came first,"
        " or the node cannot be used (unusable_node: its record, stored by an older"
        " version, breaks today's rules; details.reason says how). Nothing changed.",
    ),
    413: ("PayloadTooLarge", "The body is larger than 1 MiB."),
    422: ("Unprocessable", "Well-formed, but it breaks a rule of what it describes."),
    503: ("StoreUnavailable", "The state store failed; nothing changed. Retry."),
}

TAGS: dict[str, str] = {
    "system": "Health, metrics and this document.",
    "nodes": "Registered hosts and the agents' websocket.",
    "leases": "Capacity leases and resource templates.",
    "plans": "What-if placements; nothing is committed.",
    "quotas": "ElasticQuotas and CompositeElasticQuotas.",
    "pools": "The integral-pool tree and its simulator.",
    "deployments": "Deployments in a namespace.",
    "containers": "Containers: inspect, realloc live, delete.",
    "events": "The decisions made, with their reasons.",
}


@dataclass(frozen=True)
class Param:
    name: str
    description: str
    schema: Schema = field(default_factory=lambda: dict(STRING))


@dataclass(frozen=True)
class Alternative:
    """Another success answer of an operation: a dry run's 200 beside a deploy's 201."""

    status: int
    response: Body
    description: str
    examples: Mapping[str, object]


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    id: str  # the operationId
    summary: str
    tag: str
    who: Who
    response: Body | None  # the success body; None for the websocket upgrade
    examples: Mapping[str, object]  # success examples, by what they show
    status: int = 200
    request: Body | None = None
    request_examples: Mapping[str, object] = field(default_factory=dict)
    errors: tuple[int, ...] = ()
    params: tuple[Param, ...] = ()  # path parameters, in path order
    query: tuple[Param, ...] = ()
    description: str = ""
    media: str = "application/json"
    alternatives: tuple[Alternative, ...] = ()


WRITE = (401, 403, 413, 503)  # every admin write with a body, before its own refusals
_SKIPPED = (
    "A ready node that is cordoned, or cannot be used (its record, stored by an older"
    " version, breaks today's rules), is left out and named with the reason in"
    " skipped_nodes (cordoned, or the rule): in the answer, or in the refusal's"
    " details."
)
_COUNT_CAP = (
    f"A deployment holds at most {MAX_COUNT:,} containers (count, here and when scaling);"
    " a larger count is refused (400 invalid_request) and changes nothing: split the"
    " workload into several deployments. "
)
_UNUSABLE = (
    "A node whose record breaks today's rules (one an older version stored) answers 409"
    " unusable_node with details.reason until its agent says hello again, unless it holds"
    " containers (whose allocation is stored apart)."
)
NODE = Param("name", "the node's name")
NAMESPACE = Param("namespace", "the namespace: an RFC 1123 label (422 invalid_namespace otherwise)")
DEPLOYMENT = Param("name", "the deployment's name")
RESOURCE = Param("id", "a resource id")
GLOB = Param("id", "the template's identifier glob")
CONTAINER = Param("id", "the container's id, e.g. team-a-web-c558628a")


def _quota_operations(
    kind: str, path: str, body: type[Any], request_example: object, view: object
) -> list[Operation]:
    name = (Param("name", f"the {kind}'s name"),)
    return [
        Operation(
            "PUT",
            path,
            id=f"put{kind}",
            summary=f"Create or replace a {kind}",
            tag="quotas",
            who="admin",
            response=QuotaView,
            examples={"stored in canonical form, with status": view},
            request=body,
            request_examples={"a quota": request_example},
            errors=(400, *WRITE, 409, 422),
            params=name,
            description="Every quota must still hold together with it, or nothing changes.",
        ),
        Operation(
            "GET",
            path,
            id=f"get{kind}",
            summary=f"A {kind} with its status",
            tag="quotas",
            who="any",
            response=QuotaView,
            examples={"with status": view},
            errors=(401, 404),
            params=name,
        ),
        Operation(
            "DELETE",
            path,
            id=f"delete{kind}",
            summary=f"Delete a {kind}",
            tag="quotas",
            who="admin",
            response="Empty",
            examples={"deleted": {}},
            errors=(401, 403, 404, 503),
            params=name,
            description="Its namespaces' containers keep running, no longer governed.",
        ),
    ]


_SYSTEM = (
    Operation(
        "GET",
        "/healthz",
        id="getHealth",
        summary="Liveness",
        tag="system",
        who="open",
        response="Health",
        examples={"healthy": {"status": "ok"}},
    ),
    Operation(
        "GET",
        "/readyz",
        id="getReadiness",
        summary="Readiness: this coordinator leads",
        tag="system",
        who="open",
        response="Readiness",
        examples={"the leader": {"status": "ok", "role": "leader"}},
        description="For load balancers: 200 on the leader only. With several coordinators"
        ' on etcd a standby answers 503 {"status": "standby", "role": "standby",'
        ' "leader": <the leader\'s URL, or empty while none is known>}. A leader whose'
        ' SQLite store cannot write (a full disk) answers 503 {"status": "degraded", "role":'
        ' "leader", "reason": <the cause and the free bytes>} until a write succeeds.',
    ),
    Operation(
        "GET",
        "/metrics",
        id="getMetrics",
        summary="Prometheus metrics",
        tag="system",
        who="open",
        response="MetricsText",
        examples={"a scrape": ex.METRICS},
        media="text/plain",
    ),
    Operation(
        "GET",
        OPENAPI_PATH,
        id="getOpenApi",
        summary="This document",
        tag="system",
        who="any",
        response="OpenApiDocument",
        examples={"its start": {"openapi": "3.1.0", "info": {"title": "allot"}, "paths": {}}},
        errors=(401,),
    ),
)

_NODES = (
    Operation(
        "GET",
        "/v1/nodes",
        id="listNodes",
        summary="Every registered node",
        tag="nodes",
        who="any",
        response="NodeList",
        examples={"one node": {"nodes": [ex.NODE]}},
        errors=(401,),
    ),
    Operation(
        "GET",
        "/v1/nodes/{name}",
        id="getNode",
        summary="A node with its inventory",
        tag="nodes",
        who="any",
        response=NodeView,
        examples={"a ready node": ex.NODE},
        errors=(401, 404),
        params=(NODE,),
    ),
    Operation(
        "GET",
        "/v1/nodes/{name}/allocation",
        id="getNodeAllocation",
        summary="What a node offers and what is allocated there",
        tag="nodes",
        who="any",
        response=Allocation,
        examples={"two containers": ex.ALLOCATION},
        errors=(401, 404, 409),
        params=(NODE,),
        description=_UNUSABLE,
    ),
    Operation(
        "PATCH",
        "/v1/nodes/{name}/capacity",
        id="setNodeCapacity",
        summary="Change what a node offers (SetNode)",
        tag="nodes",
        who="admin",
        response=Allocation,
        examples={"a core more": ex.GROWN},
        request=CapacitySpec,
        request_examples={"add core 2": ex.CAPACITY_GROW, "offer 2Gi": ex.CAPACITY_MEMORY},
        errors=(400, *WRITE, 404, 409, 422),
        params=(NODE,),
        description=(
            "absolute: each field given replaces the node's; delta: added to it (negative"
            " pieces remove). Refused as a whole (409 below_allocation) where it would take"
            " away what is allocated; running containers stay where they are. " + _UNUSABLE
        ),
    ),
    *[
        Operation(
            "POST",
            f"/v1/nodes/{{name}}/{action}",
            id=f"{action}Node",
            summary=summary,
            tag="nodes",
            who="admin",
            response="NodeCordon",
            examples={action + "ed": {"node": "node-b", "cordoned": action == "cordon"}},
            errors=(401, 403, 404, 409, 503),
            params=(NODE,),
            description=_UNUSABLE,
        )
        for action, summary in (
            ("cordon", "Cordon a node: it takes no new containers"),
            ("uncordon", "Uncordon a node"),
        )
    ],
    Operation(
        "POST",
        "/v1/nodes/{name}/drain",
        id="drainNode",
        summary="Drain a node: cordon it and move its containers elsewhere",
        tag="nodes",
        who="admin",
        response="NodeDrained",
        examples={"one moved, one pending": ex.DRAINED},
        errors=(401, 403, 404, 409, 503),
        params=(NODE,),
        description=(
            "Each container is released and leaves a stand-in (a new id) that keeps its"
            " deployment's count; the stand-ins are placed on the other nodes in the same"
            " commit where there is room, and the rest stay pending, with the reason, until"
            " room appears. Drain never lowers a count. " + _UNUSABLE
        ),
    ),
    Operation(
        "DELETE",
        "/v1/nodes/{name}",
        id="deleteNode",
        summary="Take a lost node off the books",
        tag="nodes",
        who="admin",
        response="NodeDeleted",
        examples={"one container moved": ex.NODE_DELETED},
        errors=(401, 403, 404, 409, 503),
        params=(NODE,),
        description=(
            "Only a node that is lost can be deleted: one that is ready or degraded (its"
            " agent connected) is refused, 409 node_not_lost, nothing changed. Its record,"
            " allocation state and cordon go, in one commit with its containers, which are"
            " handled as a lost node's past its grace: each live one is released and leaves"
            " a stand-in, placed on the other nodes where there is room; its stopping ones"
            " are let go. An agent of that name that says hello later registers a new node;"
            " nothing of the old one comes back."
        ),
    ),
    Operation(
        "GET",
        "/v1/agent",
        id="agentSocket",
        summary="The agents' websocket",
        tag="nodes",
        who="join",
        response=None,
        examples={},
        status=101,
        errors=(400, 401),
        description=(
            f"Upgrades to a websocket with subprotocol `{SUBPROTOCOL}`, which the request"
            " must offer (400 otherwise). Every binary frame is one MessagePack map whose"
            " `type` names it: hello, heartbeat, status and error from the agent; welcome,"
            " desired and error from the coordinator (see shared/protocol.py). Frames are"
            " not HTTP bodies and are not described here. Every frame is checked as it is"
            " decoded; one that fails is answered with an error frame and the socket is"
            " closed (1007 malformed or out of range, 1003 text, 1008 refused hello:"
            " invalid_inventory names the field and the value), and changes nothing. A"
            " refusal that names a node is a refused event of that node."
        ),
    ),
)

# Whose client a capacity request or a release acts for; both descriptions say it.
_NAMED_NAMESPACE = (
    "A namespace token may name only its namespaces (403 otherwise) and may leave it"
    " out if it has just one; a token of several must name one (400"
    " namespace_required). An admin token leaving it out acts for the cluster's own"
    " clients (the empty namespace), and naming one, for the clients of that namespace."
)

_LEASES = (
    Operation(
        "POST",
        "/v1/capacity",
        id="requestCapacity",
        summary="Ask for capacity",
        tag="leases",
        who="any",
        response=CapacityResponse,
        examples={"granted": ex.CAPACITY_RESPONSE},
        request=CapacityRequest,
        request_examples={
            "one resource": ex.CAPACITY_REQUEST,
            "every field": ex.CAPACITY_REQUEST_FULL,
        },
        errors=(400, 401, 403, 413, 503),
        description=(
            "One request covers every resource of one client; each answer says what the"
            " client gets, until when, and when to come back. The client is client_id"
            f" within a namespace. {_NAMED_NAMESPACE}"
        ),
    ),
    Operation(
        "POST",
        "/v1/capacity/release",
        id="releaseCapacity",
        summary="Give capacity back",
        tag="leases",
        who="any",
        response="Empty",
        examples={"released": {}},
        request=ReleaseRequest,
        request_examples={
            "one resource": ex.RELEASE_REQUEST,
            "an admin, for a namespace's client": ex.RELEASE_FOR_NAMESPACE,
        },
        errors=(400, 401, 403, 413, 503),
        description=(
            "Releasing a lease the client does not hold is not an error. The client is"
            f" client_id within a namespace. {_NAMED_NAMESPACE}"
        ),
    ),
    Operation(
        "GET",
        "/v1/resources",
        id="listResources",
        summary="Every template and every resource's status",
        tag="leases",
        who="any",
        response="ResourceList",
        examples={"one of each": ex.RESOURCE_LIST},
        errors=(401,),
    ),
    Operation(
        "PUT",
        "/v1/resources/{id}",
        id="putTemplate",
        summary="Create or replace a resource template",
        tag="leases",
        who="admin",
        response=ResourceTemplate,
        examples={"stored": ex.TEMPLATE},
        request="ResourceTemplateBody",
        request_examples={"licence seats": ex.TEMPLATE_BODY},
        errors=(400, *WRITE),
        params=(GLOB,),
        description="Leases of the resources it configures are kept.",
    ),
    Operation(
        "GET",
        "/v1/resources/{id}",
        id="getTemplate",
        summary="A resource template",
        tag="leases",
        who="any",
        response=ResourceTemplate,
        examples={"licence seats": ex.TEMPLATE},
        errors=(401, 404),
        params=(GLOB,),
    ),
    Operation(
        "DELETE",
        "/v1/resources/{id}",
        id="deleteTemplate",
        summary="Delete a resource template",
        tag="leases",
        who="admin",
        response="Empty",
        examples={"deleted": {}},
        errors=(400, 401, 403, 404, 503),
        params=(GLOB,),
    ),
    Operation(
        "GET",
        "/v1/resources/{id}/status",
        id="getResourceStatus",
        summary="A resource's status",
        tag="leases",
        who="any",
        response=ResourceStatus,
        examples={"two clients": ex.RESOURCE_STATUS},
        errors=(401, 404),
        params=(RESOURCE,),
    ),
    Operation(
        "GET",
        "/v1/resources/{id}/leases",
        id="listLeases",
        summary="A resource's live leases",
        tag="leases",
        who="filtered",
        response=ResourceLeases,
        examples={
            "to an admin token": ex.RESOURCE_LEASES,
            "to a token for team-a": ex.RESOURCE_LEASES_OF_TEAM_A,
        },
        errors=(401,),
        params=(RESOURCE,),
        description=(
            "Each lease with its namespace and client id; the cluster's own clients have"
            ' the namespace "". The leases of namespaces the token may not use are left'
            " out and counted in others."
        ),
    ),
)

_PLANS = (
    Operation(
        "POST",
        "/v1/plans",
        id="plan",
        summary="A what-if placement",
        tag="plans",
        who="any",
        response=PlanResponse,
        examples={
            "1.7 cores, bound and NUMA-local": ex.PLAN_RESPONSE,
            "a registered node skipped": ex.PLAN_SKIPPING,
        },
        request=PlanRequest,
        request_examples={
            "on inline nodes": ex.PLAN_REQUEST,
            "on the registered ready nodes": ex.PLAN_ON_REGISTERED,
        },
        errors=(400, 401, 409, 413),
        description=(
            "Each node's capacity for the request and where the strategy would put each"
            " container, with its cores and Docker settings; nothing is committed. On the"
            " registered nodes it places as a deploy does, so AUTO puts unbound containers"
            " on nodes not under CPU pressure first; inline nodes know no pressure. 409"
            " names the rule that failed and every node's capacity. " + _SKIPPED
        ),
    ),
)

_QUOTAS = (
    *_quota_operations(
        "ElasticQuota",
        "/v1/elasticquotas/{name}",
        ElasticQuotaBody,
        ex.ELASTIC_QUOTA_BODY,
        ex.ELASTIC_QUOTA,
    ),
    *_quota_operations(
        "CompositeElasticQuota",
        "/v1/compositeelasticquotas/{name}",
        CompositeQuotaBody,
        ex.COMPOSITE_QUOTA_BODY,
        ex.COMPOSITE_QUOTA,
    ),
    Operation(
        "GET",
        "/v1/quotas",
        id="listQuotas",
        summary="Every quota, the sum of the guarantees, and warnings",
        tag="quotas",
        who="any",
        response=QuotaSummary,
        examples={"two quotas": ex.QUOTA_SUMMARY},
        errors=(401,),
    ),
)

_POOLS = (
    Operation(
        "GET",
        "/v1/pools",
        id="listPools",
        summary="Every pool, and the last update's alerts",
        tag="pools",
        who="any",
        response="PoolList",
        examples={"the root and one pool": ex.POOL_LIST},
        errors=(401,),
    ),
    Operation(
        "POST",
        "/v1/pools/simulate",
        id="simulatePools",
        summary="Run a timeline of demands through a pool tree",
        tag="pools",
        who="any",
        response="SimulationResult",
        examples={"bursting while the volume lasts": ex.SIMULATION_RESULT},
        request=SimulationRequest,
        request_examples={"idle, then busy": ex.SIMULATION_REQUEST},
        errors=(400, 401, 413, 422),
        description="Every update's shares and volumes; nothing is stored.",
    ),
    Operation(
        "GET",
        "/v1/pools/{name}",
        id="getPool",
        summary="A pool with its share, introspection and its hosts' CPU pressure",
        tag="pools",
        who="any",
        response=PoolView,
        examples={"a burst pool": ex.PRODUCTION_POOL_SHOWN, "the root": ex.ROOT_POOL},
        errors=(401, 404),
        params=(Param("name", "the pool's name, or <root>"),),
    ),
    Operation(
        "PUT",
        "/v1/pools/{name}",
        id="putPool",
        summary="Create or replace a pool",
        tag="pools",
        who="admin",
        response=PoolView,
        examples={"a burst pool": ex.PRODUCTION_POOL},
        request="PoolConfig",
        request_examples={"burst": ex.BURST_POOL},
        errors=(400, *WRITE, 422),
        params=(Param("name", "the pool's name (not <root>, which the config file sets)"),),
        description="Volumes carry over.",
    ),
    Operation(
        "DELETE",
        "/v1/pools/{name}",
        id="deletePool",
        summary="Delete a pool",
        tag="pools",
        who="admin",
        response="Empty",
        examples={"deleted": {}},
        errors=(401, 403, 404, 422, 503),
        params=(Param("name", "the pool's name"),),
        description="A pool that still has child pools cannot be deleted (422).",
    ),
)

_DEPLOYMENTS_PATH = "/v1/namespaces/{namespace}/deployments"
_DEPLOYMENTS = (
    Operation(
        "POST",
        _DEPLOYMENTS_PATH,
        id="createDeployment",
        summary="Deploy: admit, place, commit and push to the nodes",
        tag="deployments",
        who="namespace",
        response=PlacedView,
        examples={
            "two containers placed": ex.DEPLOYMENT,
            "a node skipped": ex.DEPLOYMENT_SKIPPING,
        },
        status=201,
        request=DeploymentSpec,
        request_examples={
            "two half cores, bound": ex.DEPLOYMENT_SPEC,
            "batch": ex.BATCH_SPEC,
            "one FPGA each": ex.FPGA_SPEC,
        },
        errors=(400, 401, 403, 409, 413, 422, 503),
        params=(NAMESPACE,),
        query=(
            Param(
                "dry_run",
                "true: answer what the deploy would do (200), change nothing",
                {"enum": ["true", "false"]},
            ),
        ),
        alternatives=(
            Alternative(
                200,
                DeployPreview,
                "A dry run: what would be placed, where, with which quota labels, and which"
                " containers would be preempted. Nothing changed.",
                {"a dry run": ex.DEPLOYMENT_PREVIEW},
            ),
        ),
        description=(
            "With dry_run=true nothing changes and no event is written: the answer is 200"
            " with what the deploy would do, or the very refusal it would meet. "
            "A refusal (quota or pool 403; capacity, conflict or an existing name 409;"
            " invalid 422) gives its reason in details.reason and changes nothing. The"
            " pool must be one the namespace may use: its own (named like it), a pool"
            " below it, or one whose namespaces (or an ancestor's) name it (403"
            " pool_forbidden; 422 unknown_pool). What the agent could never run is 422"
            " invalid_container: an image that is not a reference, a label under allot.,"
            " an env name with '=', a NUL character. Containers that need GPUs or"
            ' extended resources (resources.extended, e.g. {"example.com/fpga": 1}) go one'
            " at a time to the ready nodes with enough free units; when none has, the 409"
            " insufficient_devices gives details.needed and details.free per node. "
            + _COUNT_CAP
            + _SKIPPED
        ),
    ),
    Operation(
        "GET",
        _DEPLOYMENTS_PATH,
        id="listDeployments",
        summary="A namespace's deployments",
        tag="deployments",
        who="namespace",
        response="DeploymentList",
        examples={"one deployment": {"deployments": [ex.DEPLOYMENT]}},
        errors=(401, 403, 422),
        params=(NAMESPACE,),
    ),
    Operation(
        "GET",
        _DEPLOYMENTS_PATH + "/{name}",
        id="getDeployment",
        summary="A deployment with its containers",
        tag="deployments",
        who="namespace",
        response=DeploymentView,
        examples={"two containers": ex.DEPLOYMENT},
        errors=(401, 403, 404, 422),
        params=(NAMESPACE, DEPLOYMENT),
    ),
    Operation(
        "DELETE",
        _DEPLOYMENTS_PATH + "/{name}",
        id="deleteDeployment",
        summary="Delete a deployment and all its containers",
        tag="deployments",
        who="namespace",
        response="DeploymentDeleted",
        examples={"two containers": ex.DEPLOYMENT_DELETED},
        errors=(401, 403, 404, 422, 503),
        params=(NAMESPACE, DEPLOYMENT),
    ),
    Operation(
        "POST",
        _DEPLOYMENTS_PATH + "/{name}/scale",
        id="scaleDeployment",
        summary="Scale a deployment to a number of containers",
        tag="deployments",
        who="namespace",
        response=PlacedView,
        examples={"down to one": ex.SCALED_DEPLOYMENT},
        request=ScaleSpec,
        request_examples={"three": {"count": 3}, "one": {"count": 1}},
        errors=(400, 401, 403, 404, 409, 413, 422, 503),
        params=(NAMESPACE, DEPLOYMENT),
        description=(
            "New containers go beside the existing ones; scaling down removes the newest."
            " Growing is refused (403 pool_forbidden) once the deployment's pool is no"
            " longer open to its namespace. " + _COUNT_CAP + _SKIPPED
        ),
    ),
)

_CONTAINERS = (
    Operation(
        "GET",
        "/v1/containers",
        id="listContainers",
        summary="Containers, filtered",
        tag="containers",
        who="filtered",
        response="ContainerList",
        examples={"one container": {"containers": [ex.CONTAINER]}},
        errors=(400, 401),
        query=(
            Param("namespace", "only this namespace's"),
            Param("deployment", "only this deployment's"),
            Param("node", "only those on this node"),
            Param(
                "state",
                "only those in this state: pending, starting, running, succeeded, failed"
                " (or replaced, during a swap, or stopping: no longer desired, its cores,"
                " memory and devices held on its node until its agent reports it gone)",
            ),
            Param("capacity", "in-quota or over-quota"),
        ),
        description="Every filter given must match; an unknown filter is 400.",
    ),
    Operation(
        "GET",
        "/v1/containers/{id}",
        id="getContainer",
        summary="A container: placement, limits, label, history",
        tag="containers",
        who="owner",
        response=ContainerView,
        examples={
            "starting": ex.CONTAINER,
            "running": ex.RUNNING_CONTAINER,
            "failed": ex.FAILED_CONTAINER,
            "stopping": ex.STOPPING_CONTAINER,
        },
        errors=(401, 404),
        params=(CONTAINER,),
    ),
    Operation(
        "PATCH",
        "/v1/containers/{id}",
        id="reallocContainer",
        summary="Change a container's resources, live",
        tag="containers",
        who="owner",
        response=ContainerView,
        examples={"half a core and 32Mi more": ex.REALLOCATED},
        request=DeltaSpec,
        request_examples={"grow": ex.REALLOC_DELTA, "give the memory back": ex.REALLOC_SHRINK},
        errors=(400, 401, 403, 404, 409, 413, 422, 503),
        params=(CONTAINER,),
        description=(
            "Signed changes, applied without a restart; `cpu` and `memory` change request"
            " and limit together. A refusal changes nothing."
        ),
    ),
    Operation(
        "POST",
        "/v1/containers/{id}/replace",
        id="replaceContainer",
        summary="Replace a container: a new image in the same allocation",
        tag="containers",
        who="owner",
        response=ContainerView,
        examples={"a new image": ex.REPLACED},
        status=201,
        request=ReplaceSpec,
        request_examples={
            "a new image": {"image": "busybox:2"},
            "a new image and command": {"image": "busybox:1.36", "command": ["sleep", "7200"]},
        },
        errors=(400, 401, 404, 409, 413, 422, 503),
        params=(CONTAINER,),
        description=(
            "The new container (a new id) takes over the old one's cores and limits in one"
            " commit; nothing is planned or charged twice. The command stays unless given."
            " The node's agent stops the old container, starts the new one and removes the"
            " old one once the new one has run for its settle time; if the new one does not"
            " keep running, it is removed, the old one runs again and gets its allocation"
            " back. Until then the new record says `replaces` and the old one `replaced_by`;"
            " 409 `swap_under_way` for a container already in a swap; 422"
            " `invalid_container` for an image the agent could never run."
        ),
    ),
    Operation(
        "DELETE",
        "/v1/containers/{id}",
        id="deleteContainer",
        summary="Delete a container",
        tag="containers",
        who="owner",
        response="ContainerDeleted",
        examples={
            "deleted": {
                "deleted": "team-a-web-c558628a",
                "stand_in": "team-a-web-0d15ea5e",
                "node": "node-b",
                "pending": "",
                "hosts_acknowledged": True,
            }
        },
        errors=(401, 404, 409, 503),
        params=(CONTAINER,),
        description=(
            "Stops the container, like Nomad's `alloc stop` or deleting a Kubernetes pod:"
            " a stand-in keeps its deployment's count, placed at once where there is room,"
            " else pending. Scale the deployment to count fewer; 409 `container_pending`"
            " for a pending container, `container_stopping` for one already stopping. The"
            " container is `stopping` until its node's agent reports it gone (or the node"
            " is lost past its grace): until then its cores, memory and devices stay"
            " charged to the node, and what waits for them is pending with that reason."
        ),
    ),
)

_EVENTS = (
    Operation(
        "GET",
        "/v1/events",
        id="listEvents",
        summary="Decisions and their reasons, newest last",
        tag="events",
        who="filtered",
        response="EventList",
        examples={"placed, refused, lost": ex.EVENTS},
        errors=(400, 401),
        query=(
            Param("namespace", "only this namespace's"),
            Param("deployment", "only this deployment's"),
            Param("container", "only this container's"),
            Param("node", "only this node's"),
            Param(
                "kind",
                "e.g. admitted, placed, refused, realloc, deleted, drift, restarted, failed, lost",
            ),
            Param("since", "only events after this sequence number", {**INTEGER, "minimum": 0}),
        ),
        description="An unknown filter is 400.",
    ),
)

OPERATIONS: tuple[Operation, ...] = (
    *_SYSTEM,
    *_NODES,
    *_LEASES,
    *_PLANS,
    *_QUOTAS,
    *_POOLS,
    *_DEPLOYMENTS,
    *_CONTAINERS,
    *_EVENTS,
)

# Structs that only hand-written schemas refer to (by name), so msgspec must see them.
REFERENCED: tuple[type[Any], ...] = (
    NodeView,
    ResourceTemplate,
    ResourceStatus,
    PoolView,
    DeploymentView,
    ContainerView,
    Event,
)
