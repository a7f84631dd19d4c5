"""A container's state as the API shows it: one word and its reason, from the container's
record and what its node's agent last reported of it.

    pending    not placed: its record names no node; the reason says why
    starting   placed, not running yet: not reported by its agent yet, or being made,
               started, or started again
    running    running (the reason names a problem the agent reports, if any)
    succeeded  ran to completion, as its restart policy says it may (exit code 0)
    failed     placed, but the host could not make it or keep it running: the engine's
               reason, or how it exited; the agent keeps trying, unless it ran to
               completion (``shared.restart_policy``)
    replaced   stopped while a new container takes its place (placement spec 10)
    stopping   no longer desired (deleted, drained, scaled down): its agent removes it,
               and its cores, memory and GPUs stay charged to its node until that agent
               reports it gone (or the node is lost past its grace)

    state, reason = container_state(record, observed)

Each container of a deployment is in exactly one of the first five; only the container a
swap replaces, and one stopping, which are not among the containers its deployment
counts, are ``replaced`` or ``stopping``.
"""

from __future__ import annotations

from typing import Literal

from shared.api.containers import ContainerRecord
from shared.protocol import ContainerStatus
from shared.restart_policy import completion

ContainerState = Literal[
    "pending", "starting", "running", "succeeded", "failed", "replaced", "stopping"
]

# Docker's words for a container made and not running yet, and what they mean here.
_ON_ITS_WAY = {
    "missing": "being created",
    "created": "created, being started",
    "restarting": "being started again",
    "removing": "being made anew",
    "waiting": "waiting for its CPUs: another container is still leaving them",
}


def container_state(
    record: ContainerRecord, observed: ContainerStatus | None
) -> tuple[ContainerState, str]:
    """The state and reason of ``record`` as its agent reported it in ``observed``. O(1)."""
    if not record.node:  # the scheduler knows why (``DeploymentService.why_pending``)
        return "pending", "not placed on a node"
    if record.stopping:
        why = f"{record.stopping}; held on {record.node} until its agent reports it removed"
        return "stopping", why
    if record.replaced_by:
        return "replaced", f"being replaced by {record.replaced_by}"
    if observed is None:
        return "starting", f"not reported by node {record.node} yet"
    state = observed.state
    if state == "running":
        return "running", observed.error
    if state in ("exited", "dead"):
        code = observed.exit_code
        exit = "died" if code is None else f"exited with code {code}"
        ended = completion(record.restart_policy, code)
        if ended is None:  # its agent starts it again: the reason says when
            return "failed", observed.error or exit
        return ended, exit
    if state in ("refused", "failed") or (state == "missing" and observed.error):
        return "failed", observed.error or state  # (an older agent says missing)
    if state == "paused":
        return "failed", "paused outside allot"
    return "starting", _ON_ITS_WAY.get(state, state)
