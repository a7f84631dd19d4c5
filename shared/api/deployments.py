"""What a deployment request says (``POST /v1/namespaces/{ns}/deployments``), what the
coordinator stores for each deployment, and how the API shows it with its containers.

The request bodies refuse fields they do not know, as the coordinator reads them; an
answer that echoes them is read by a client through ``client.answers``, which drops
fields a newer coordinator may have added.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from shared.api.containers import ContainerView
from shared.protocol import DEFAULT_STOP_TIMEOUT_SECONDS, StopTimeout
from shared.resource_names import Rfc1123Label
from shared.restart_policy import DEFAULT_RESTART_POLICY, RestartPolicy

Strategy = Literal["auto", "each", "fill", "global", "drained"]
MAX_COUNT = 1000


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
    restart_policy: RestartPolicy = DEFAULT_RESTART_POLICY  # see shared.restart_policy
    # Seconds a container has to stop on SIGTERM before its node's agent kills it.
    stop_timeout_seconds: StopTimeout = DEFAULT_STOP_TIMEOUT_SECONDS


class DeploymentRecord(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str
    spec: DeploymentSpec
    created: float


class DeploymentView(msgspec.Struct, frozen=True, kw_only=True):
    deployment: DeploymentRecord
    containers: list[ContainerView]


class PlacedView(DeploymentView, frozen=True, kw_only=True):
    """A deployment just created or scaled, and the ready nodes its placement left out."""

    skipped_nodes: dict[str, str] = {}  # node -> why it cannot be used
    # False when the answer to a scale-down went out before every node concerned had
    # acknowledged the containers it removed (``removal_ack_seconds`` passed).
    hosts_acknowledged: bool = True


class DeployPreview(PlacedView, frozen=True, kw_only=True):
    """What a deploy would do (``?dry_run=true``), nothing changed: the containers it would
    place, with their nodes and quota labels, and those it would preempt. A deploy that
    would be refused answers the refusal itself, as the deploy would."""

    dry_run: bool = False  # true in every preview; false when read from a deploy's answer
    preempted: list[str] = []  # the ids of the containers it would preempt


class DeploymentList(msgspec.Struct, frozen=True):
    """``GET /v1/namespaces/{ns}/deployments``, which the coordinator builds as a plain
    dict."""

    deployments: list[DeploymentView]


class Deleted(msgspec.Struct, frozen=True):
    """What deleting a deployment or a container answers, built as a plain dict."""

    deleted: str
    containers: list[str] = []  # a deployment's, as they were removed with it
    # A container's: the stand-in that keeps its deployment's count, and the node it
    # went to, or why it is pending.
    stand_in: str = ""
    node: str = ""
    pending: str = ""
