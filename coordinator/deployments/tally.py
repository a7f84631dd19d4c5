"""Counts per deployment that no index of the books answers: how many of its live
containers are in each state (``container_state``) and what its running containers use,
as their agents last reported. Kept up to date as the books change, so that reading one
deployment's figures costs O(1), never a walk of its containers.

    tally = StateTally()
    tally.count(record, observed)      # a live container's record or report changed
    tally.forget(container_id)         # it is no longer live
    tally.states(("team-a", "web"))    # {"running": 3, "starting": 1}
    tally.usage(("team-a", "web"))     # (cores used, bytes used) of its running containers

Invariant (``check``): each live container is counted exactly once, under its deployment,
in the state its record and its last report give, with its usage while running.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from coordinator.deployments.container_state import ContainerState, container_state
from shared.api.containers import ContainerRecord
from shared.protocol import ContainerStatus

DeploymentKey = tuple[str, str]
_Counted = tuple[DeploymentKey, ContainerState, float, int]  # key, state, cores, bytes


class StateTally:
    def __init__(self) -> None:
        self._counted: dict[str, _Counted] = {}
        self._states: dict[DeploymentKey, Counter[str]] = {}
        self._usage: dict[DeploymentKey, list[float]] = {}

    def count(self, record: ContainerRecord, observed: ContainerStatus | None) -> None:
        """Count the live container ``record`` as its agent reported it. O(1)."""
        self.forget(record.id)
        key = (record.namespace, record.deployment)
        state, _ = container_state(record, observed)
        cores, used_bytes = 0.0, 0
        if observed is not None and state == "running":
            cores = observed.cpu_usage or 0.0
            used_bytes = observed.memory_usage or 0
        self._counted[record.id] = (key, state, cores, used_bytes)
        states = self._states.get(key)
        if states is None:  # not setdefault: that made a Counter a call (0.1 s a restart)
            states = self._states[key] = Counter()
            self._usage[key] = [0.0, 0]
        states[state] += 1
        usage = self._usage[key]
        usage[0] += cores
        usage[1] += used_bytes

    def forget(self, container_id: str) -> None:
        """Stop counting the container (no longer live, or about to be counted anew)."""
        counted = self._counted.pop(container_id, None)
        if counted is None:
            return
        key, state, cores, used_bytes = counted
        states = self._states[key]
        states[state] -= 1
        if states[state] == 0:
            del states[state]
        usage = self._usage[key]
        usage[0] -= cores
        usage[1] -= used_bytes
        if not states:
            del self._states[key], self._usage[key]

    def states(self, key: DeploymentKey) -> Mapping[str, int]:
        """The deployment's live containers by state (states with none left out). O(1)."""
        return self._states.get(key, {})

    def usage(self, key: DeploymentKey) -> tuple[float, int]:
        """Cores and bytes its running containers use, as last reported. O(1)."""
        cores, used_bytes = self._usage.get(key, (0.0, 0))
        return cores, int(used_bytes)

    def deployments(self) -> Iterable[DeploymentKey]:
        """The deployments with at least one live container."""
        return self._states.keys()

    def check(
        self, containers: Mapping[str, ContainerRecord], observed: Mapping[str, ContainerStatus]
    ) -> None:
        """``AssertionError`` unless the tally equals one counted afresh. O(n): tests."""
        fresh = StateTally()
        for record in containers.values():
            fresh.count(record, observed.get(record.id))
        assert self._counted == fresh._counted, "state tally drifted"
        assert self._states == fresh._states, "state counts drifted"
