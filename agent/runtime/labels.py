"""The Docker labels that mark a container as allot's, and name it.

Docker cannot relabel a container, so labels carry only what never changes for it: its
id, node, namespace and deployment, and ``allot.spec``, a digest of everything else fixed
at creation (image, command, env, labels, GPUs, restart policy, the extended resources
it holds). A digest that no longer matches the desired container means the container
must be made anew.
"""

from __future__ import annotations

import hashlib

from shared.codec import to_json
from shared.container_spec import RESERVED_LABEL_PREFIX
from shared.protocol import DesiredContainer

PREFIX = RESERVED_LABEL_PREFIX
ID = "allot.id"
NODE = "allot.node"
NAMESPACE = "allot.namespace"
DEPLOYMENT = "allot.deployment"
SPEC = "allot.spec"
BOUND = "allot.bound"  # "true" on a container bound to its CPUs: it keeps them until gone


def labels_for(container: DesiredContainer, node: str) -> dict[str, str]:
    return {
        **container.labels,
        ID: container.id,
        NODE: node,
        NAMESPACE: container.namespace,
        DEPLOYMENT: container.deployment,
        SPEC: spec_digest(container),
        **({} if container.shared_pool else {BOUND: "true"}),
    }


def spec_digest(container: DesiredContainer) -> str:
    fixed: dict[str, object] = {
        "image": container.image,
        "command": container.command,
        "env": sorted(container.env.items()),
        "labels": sorted(container.labels.items()),
        "gpus": container.gpus,
        "restart_policy": container.restart_policy,
    }
    if container.extended:  # only when held, so the digests of other containers stay as they were
        fixed["extended"] = sorted(container.extended.items())
    return hashlib.sha256(to_json(fixed)).hexdigest()[:16]


def node_filter(node: str) -> dict[str, list[str]]:
    """The Docker API filter selecting this node's containers and nothing else."""
    return {"label": [f"{NODE}={node}"]}
