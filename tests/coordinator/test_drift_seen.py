"""The drift the agents report, remembered per node (``AgentHub._drift_seen``): a status
frame is checked against its own node's containers only. After any sequence of frames,
from any nodes and with a restart's drift events to start from, the per-node index equals
one rebuilt from the former flat map over (node, container), which every frame scanned
whole, and the same drift events come out of both."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.agent_hub import AgentHub
from coordinator.services.events import Note
from shared.api.events import Event
from shared.bounds import clipped
from shared.protocol import ContainerStatus, Status

NODES = ("n1", "n2", "n3")
CONTAINERS = ("c1", "c2", "c3", "c4")
# c4 belongs to no deployment (a container the coordinator does not know).
RECORDS = {c: SimpleNamespace(namespace="team-a", deployment="web") for c in CONTAINERS[:3]}

Seen = tuple[str, float]


class FlatDrift:
    """The former bookkeeping, kept as the reference: one map over (node, container),
    every key of it scanned on every frame to forget a node's unreported containers."""

    def __init__(self, events: list[Event]) -> None:
        self.seen: dict[tuple[str, str], Seen] = {
            (event.node, event.container): (event.reason, event.at) for event in events
        }

    def new_drift(self, node: str, status: Status) -> list[Note]:
        notes = []
        for container in status.containers:
            key = (node, container.id)
            reason = clipped("corrected: " + "; ".join(container.drift)) if container.drift else ""
            seen = (reason, container.drift_at)
            if reason and self.seen.get(key) != seen:
                record = RECORDS.get(container.id)
                notes.append(
                    Note(
                        "drift",
                        reason,
                        namespace=record.namespace if record else "",
                        deployment=record.deployment if record else "",
                        container=container.id,
                        node=node,
                        at=container.drift_at or None,
                    )
                )
            self.seen[key] = seen
        reported = {container.id for container in status.containers}
        for key in [k for k in self.seen if k[0] == node and k[1] not in reported]:
            del self.seen[key]
        return notes

    def per_node(self) -> dict[str, dict[str, Seen]]:
        """The flat map rebuilt as the per-node index: node -> container -> seen."""
        index: dict[str, dict[str, Seen]] = {}
        for (node, container), seen in self.seen.items():
            index.setdefault(node, {})[container] = seen
        return index


class Events:
    def __init__(self, drift: list[Event]) -> None:
        self.drift = drift

    def events(self, *, kind: str) -> list[Event]:
        assert kind == "drift"
        return self.drift


def hub_with(drift: list[Event]) -> AgentHub:
    """An ``AgentHub`` over a stand-in for the deployments: the drift events of the log
    (as after a restart), ``container`` from ``RECORDS``; nothing else is reached."""
    deployments = SimpleNamespace(
        events=Events(drift), subscribe=lambda push: None, container=RECORDS.get
    )
    return AgentHub(cast(Any, None), cast(Any, None), cast(Any, None), cast(Any, deployments))


DRIFT = st.sampled_from([[], [], ["cpu_shares 2 -> 717"], ["recreated (removed outside allot)"]])
AT = st.sampled_from([0.0, 1.0, 2.5])

statuses = st.builds(
    lambda containers: Status(applied_revision=1, containers=containers),
    st.lists(
        st.builds(
            lambda cid, drift, at: ContainerStatus(
                id=cid, state="running", drift=drift, drift_at=at
            ),
            st.sampled_from(CONTAINERS),
            DRIFT,
            AT,
        ),
        max_size=5,  # the same id twice in one frame too
    ),
)
logged = st.lists(
    st.builds(
        lambda k, node, cid, at: Event(
            sequence=k, at=at, kind="drift", reason="corrected: x", node=node, container=cid
        ),
        st.integers(1, 100),
        st.sampled_from(NODES),
        st.sampled_from(CONTAINERS),
        AT,
    ),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(logged, st.lists(st.tuples(st.sampled_from(NODES), statuses), max_size=12))
def test_drift_seen_per_node_equals_the_flat_map(
    drift: list[Event], frames: list[tuple[str, Status]]
) -> None:
    hub = hub_with(drift)
    flat = FlatDrift(drift)
    assert hub._drift_seen == flat.per_node()
    for node, status in frames:
        assert hub._new_drift(node, status) == flat.new_drift(node, status)
        assert hub._drift_seen == flat.per_node()


def test_a_frame_touches_its_own_node_only() -> None:
    hub = hub_with([])
    frame = Status(
        applied_revision=1,
        containers=[ContainerStatus(id="c1", state="running", drift=["cpu_shares 2 -> 717"])],
    )
    assert [n.container for n in hub._new_drift("n1", frame)] == ["c1"]
    hub._new_drift("n2", frame)
    hub._new_drift("n1", Status(applied_revision=2))  # n1 reports nothing: forgotten
    assert hub._drift_seen == {"n2": {"c1": ("corrected: cpu_shares 2 -> 717", 0.0)}}
