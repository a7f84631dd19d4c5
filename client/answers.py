"""The coordinator's answers as a client reads them: one struct per JSON object the API
returns, holding the fields a client shows.

    nodes: msgspec.json.Decoder[NodeList] = json_decoder(NodeList)
    nodes.decode(ApiClient(server, token).get("/v1/nodes")).nodes[0].state  -> "ready"

The coordinator encodes its own types (its node and container records, the views its
handlers build); a client decodes the same JSON with these, so it imports nothing of the
server and an answer that gains a field still reads (unknown fields are ignored). Names
and field names are the server's; values the server keeps as enums or literals are plain
strings here. tests/allotctl/test_answers.py checks every field against the server's
type, and allotctl's tests decode real answers of an in-process coordinator.
"""

from __future__ import annotations

import msgspec

from shared.inventory import Inventory
from shared.protocol import ContainerStatus, Limits

# -- nodes: GET /v1/nodes, /v1/nodes/{name} ----------------------------------------------


class NodeRecord(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    state: str  # ready, degraded, lost
    reason: str  # why the node is degraded or lost; "" when ready
    inventory: Inventory
    address: str  # the agent's peer address at its last hello
    agent_version: str
    registered_at: float  # wall-clock seconds: first hello ever
    state_since: float  # wall-clock seconds: last change of state


class NodeList(msgspec.Struct, frozen=True):
    nodes: list[NodeRecord]


# -- capacity leases: GET /v1/resources, /v1/resources/{id}/status, .../leases ---------


class Algorithm(msgspec.Struct, frozen=True, kw_only=True):
    kind: str  # STATIC, PROPORTIONAL_SHARE, FAIR_SHARE, ...
    lease_length: float
    refresh_interval: float
    learning_mode_duration: float | None = None  # None: the lease length


class ResourceTemplate(msgspec.Struct, frozen=True, kw_only=True):
    identifier_glob: str
    capacity: float
    algorithm: Algorithm
    safe_capacity: float | None = None  # None: computed per lease; -1: unlimited
    description: str = ""

    @property
    def learning_window(self) -> float:
        """Seconds of learning mode after a start without persisted leases."""
        duration = self.algorithm.learning_mode_duration
        return self.algorithm.lease_length if duration is None else duration


class ResourceStatus(msgspec.Struct, frozen=True, kw_only=True):
    resource_id: str
    template: str  # the identifier_glob that configures it
    kind: str
    capacity: float
    safe_capacity: float | None
    lease_length: float
    refresh_interval: float
    sum_has: float
    sum_wants: float
    clients: int
    learning: bool


class ResourceList(msgspec.Struct, frozen=True):
    templates: list[ResourceTemplate]
    resources: list[ResourceStatus]


class ClientLease(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str  # "" for the cluster's own clients
    client_id: str
    has: float
    wants: float
    subclients: int
    priority: int
    expiry_time: float


class OtherLeases(msgspec.Struct, frozen=True, kw_only=True):
    """The leases a token may not see by name, as totals."""

    clients: int
    has: float
    wants: float


class ResourceLeases(msgspec.Struct, frozen=True, kw_only=True):
    leases: list[ClientLease]
    others: OtherLeases


# -- what-if placement: POST /v1/plans -------------------------------------------------


class PlannedContainer(msgspec.Struct, frozen=True, kw_only=True):
    cores: dict[int, int]  # core id -> pieces; empty in memory mode
    fragment: int | None  # the fragment core, if the request has a fraction of a core
    numa: int | None  # the NUMA node of a NUMA-local plan
    docker: Limits


class PlannedNode(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    capacity: int
    existing: int
    deploy: int
    containers: list[PlannedContainer]


class PlanResponse(msgspec.Struct, frozen=True, kw_only=True):
    cpu_pieces: int
    share_base: int
    memory: int
    cpu_bind: bool
    strategy: str
    count: int
    capacity: int  # the sum over the nodes
    nodes: list[PlannedNode]
    skipped_nodes: dict[str, str] = {}  # registered nodes left out -> why


# -- quotas: GET /v1/quotas ------------------------------------------------------------


class QuotaStatus(msgspec.Struct, frozen=True, kw_only=True):
    used: dict[str, int | str]
    over_quota: dict[str, int | str]  # max(0, used - min) per resource of min


class QuotaView(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    kind: str  # "ElasticQuota" or "CompositeElasticQuota"
    namespaces: list[str]
    min: dict[str, int | str]
    max: dict[str, int | str] | None
    status: QuotaStatus


class QuotaSummary(msgspec.Struct, frozen=True, kw_only=True):
    quotas: list[QuotaView]
    warnings: list[str]  # guarantees the cluster cannot honour all at once


# -- deployments, containers, events: /v1/namespaces/{ns}/deployments, /v1/containers,
# /v1/events -------------------------------------------------------------------------


class ResourcesSpec(msgspec.Struct, frozen=True, kw_only=True):
    """As the user wrote them: cpu in cores ("1.7", "500m", 2), memory in bytes or a
    quantity ("512Mi")."""

    cpu: str | int | float
    memory: str | int = 0
    cpu_limit: str | int | float | None = None
    memory_limit: str | int | None = None


class DeploymentSpec(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    image: str
    command: list[str] = []
    env: dict[str, str] = {}
    labels: dict[str, str] = {}
    count: int = 1
    resources: ResourcesSpec
    cpu_bind: bool = False
    soft_memory: bool = False
    strategy: str = "auto"
    nodes_limit: int = 0
    pool: str = ""  # "" = the namespace's pool
    priority: int = 0
    restart_policy: str = "no"


class DeploymentRecord(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str
    spec: DeploymentSpec
    created: float


class HistoryEntry(msgspec.Struct, frozen=True, kw_only=True):
    at: float
    event: str  # placed, realloc'd, relabelled, ...
    detail: str


class ContainerRecord(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    namespace: str
    deployment: str
    node: str
    image: str
    command: list[str]
    env: dict[str, str]
    labels: dict[str, str]
    restart_policy: str
    cpu_bind: bool
    requests: dict[str, int | str]  # for quotas: {"cpu": "1.7", "memory": bytes}
    priority: int
    pool: str
    created: float
    capacity: str  # "in-quota", "over-quota", or "" when no quota governs it
    limits: Limits
    gpus: list[str] = []  # GPU and MIG device UUIDs
    extended: dict[str, int] = {}  # extended resource -> units held
    history: list[HistoryEntry] = []
    replaces: str = ""  # a swap under way: the container this one replaces
    replaced_by: str = ""  # ... or the one replacing it


class ContainerView(msgspec.Struct, frozen=True, kw_only=True):
    record: ContainerRecord
    state: str  # as the node's agent last reported it; "pending" before it has
    observed: ContainerStatus | None


class ContainerList(msgspec.Struct, frozen=True):
    containers: list[ContainerView]


class DeploymentView(msgspec.Struct, frozen=True, kw_only=True):
    deployment: DeploymentRecord
    containers: list[ContainerView]


class PlacedView(DeploymentView, frozen=True, kw_only=True):
    """A deployment just created or scaled, and the ready nodes its placement left out."""

    skipped_nodes: dict[str, str] = {}  # node -> why it cannot be used


class DeploymentList(msgspec.Struct, frozen=True):
    deployments: list[DeploymentView]


class Deleted(msgspec.Struct, frozen=True):
    deleted: str
    containers: list[str] = []  # a deployment's, as they were removed with it


class Event(msgspec.Struct, frozen=True, kw_only=True):
    sequence: int
    at: float  # when it happened: when decided, or for drift when the agent put it back
    kind: str  # admitted, placed, refused, realloc, deleted, released, drift, lost
    reason: str
    namespace: str = ""
    deployment: str = ""
    container: str = ""
    node: str = ""


class EventList(msgspec.Struct, frozen=True):
    events: list[Event]


# -- node administration: /v1/nodes/{name}/allocation, capacity, cordon, drain ---------


class Allocation(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    cordoned: bool
    share_base: int
    cores: dict[int, int]  # core id -> pieces offered
    used: dict[int, int]  # core id -> pieces allocated
    memory: int
    memory_used: int
    numa: dict[int, int] | None
    numa_memory: dict[int, int] | None
    shared_pool: list[int]
    containers: list[str]  # those a namespace token may see: its namespaces' only
    version: int
    extended: dict[str, int] = {}  # named extended resource -> units offered
    extended_used: dict[str, int] = {}  # -> units its containers hold


class Cordoned(msgspec.Struct, frozen=True):
    node: str
    cordoned: bool
    released: list[str] = []  # drain's: the containers moved off the node
    placed_again: dict[str, str | None] = {}  # drain's: each one's replacement, if any
