"""What a deployment request says, and what the coordinator stores for each deployment
and container. Store keys: ``/deployments/<namespace>/<name>``, ``/containers/<id>``,
``/allocations/<node>`` (``node_records``)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from shared.protocol import Limits, RestartPolicy
from shared.resource_names import Rfc1123Label

Strategy = Literal["auto", "each", "fill", "global", "drained"]
MAX_COUNT = 1000

DEPLOYMENT_PREFIX = "/deployments/"
CONTAINER_PREFIX = "/containers/"


MigProfile = Annotated[str, Meta(pattern=r"^[1-9][0-9]*g\.[1-9][0-9]*gb(\+me)?$(?!\n)")]


class ResourcesSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """As the user writes them: cpu in cores ("1.7", "500m", 2), memory in bytes or a
    quantity ("512Mi"). The limits default to the requests. ``gpus``: whole GPUs per
    container; ``mig``: MIG devices per container by profile ({"1g.10gb": 1});
    ``extended``: named extended resources per container ({"example.com/fpga": 1}),
    their names checked by the service so that a bad one is refused by name."""

    cpu: str | int | float
    memory: str | int = 0
    cpu_limit: str | int | float | None = None
    memory_limit: str | int | None = None
    gpus: Annotated[int, Meta(ge=0, le=64)] = 0
    mig: dict[MigProfile, Annotated[int, Meta(ge=1, le=64)]] = {}
    extended: dict[str, Annotated[int, Meta(ge=1)]] = {}


class DeploymentSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Rfc1123Label
    image: Annotated[str, Meta(min_length=1)]
    command: list[str] = []
    env: dict[str, str] = {}
    labels: dict[str, str] = {}
    count: Annotated[int, Meta(ge=0, le=MAX_COUNT)] = 1  # 0: the name kept, nothing placed
    resources: ResourcesSpec
    cpu_bind: bool = False
    soft_memory: bool = False
    strategy: Strategy = "auto"
    nodes_limit: Annotated[int, Meta(ge=0)] = 0
    pool: str = ""  # "" = the namespace's pool
    priority: int = 0
    restart_policy: RestartPolicy = "no"


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
    restart_policy: RestartPolicy
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
    # A swap (placement spec 10): the new container ``replaces`` the old one, which is
    # ``replaced_by`` it and holds no allocation until the swap is done or has failed.
    replaces: str = ""
    replaced_by: str = ""


class DeploymentRecord(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str
    spec: DeploymentSpec
    created: float


def container_key(container_id: str) -> str:
    return CONTAINER_PREFIX + container_id


def deployment_key(namespace: str, name: str) -> str:
    return f"{DEPLOYMENT_PREFIX}{namespace}/{name}"
