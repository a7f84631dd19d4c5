"""What the agents report once, remembered per node (``agent_reports.ReportedOnce``): a
status frame is checked against its own node's containers only. After any sequence of
frames, from any nodes and with a restart's drift events to start from, the per-node index
equals one rebuilt from the former flat map over (node, container), which every frame
scanned whole, and the same drift events come out of both. Restarts and failed tries,
the other stream, become events the same way."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.agent_reports import ATTEMPTS, DRIFT, Reported, ReportedOnce
from coordinator.services.events import Note
from shared.api.events import Event
from shared.bounds import clipped
from shared.protocol import Attempt, ContainerStatus, Status
from shared.status_delta import partial_report

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

    def per_node(self) -> dict[str, dict[str, Reported]]:
        """The flat map rebuilt as the per-node index: node -> container -> the drift seen
        (a container without drift is not in it)."""
        index: dict[str, dict[str, Reported]] = {}
        for (node, container), (reason, at) in self.seen.items():
            if reason:
                index.setdefault(node, {})[container] = ("drift", reason, at)
        return index


def record_of(container_id: str) -> Any:
    return RECORDS.get(container_id)


DRIFTS = st.sampled_from([[], [], ["cpu_shares 2 -> 717"], ["recreated (removed outside allot)"]])
AT = st.sampled_from([0.0, 1.0, 2.5])

statuses = st.builds(
    lambda containers: Status(applied_revision=1, containers=containers),
    st.lists(
        st.builds(
            lambda cid, drift, at: ContainerStatus(
                id=cid, state="running", drift=drift, drift_at=at
            ),
            st.sampled_from(CONTAINERS),
            DRIFTS,
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
    reports = ReportedOnce(drift, DRIFT)
    flat = FlatDrift(drift)
    assert reports._seen == flat.per_node()
    for node, status in frames:
        got = reports.new_notes(node, status.containers, record_of)
        assert got == flat.new_drift(node, status)
        assert reports._seen == flat.per_node()


def test_a_frame_touches_its_own_node_only() -> None:
    reports = ReportedOnce([], DRIFT)
    frame = [ContainerStatus(id="c1", state="running", drift=["cpu_shares 2 -> 717"])]
    assert [n.container for n in reports.new_notes("n1", frame, record_of)] == ["c1"]
    reports.new_notes("n2", frame, record_of)
    reports.new_notes("n1", [], record_of)  # n1 reports nothing: forgotten
    assert reports._seen == {"n2": {"c1": ("drift", "corrected: cpu_shares 2 -> 717", 0.0)}}


def attempted(outcome: str, reason: str, number: int, at: float) -> ContainerStatus:
    attempt = Attempt(outcome=cast(Any, outcome), reason=reason, number=number, at=at)
    return ContainerStatus(id="c1", state="running", attempt=attempt)


def test_each_restart_and_failed_try_is_one_event_of_its_kind() -> None:
    failed = "create failed: No such image: x (try 1 in a row; the next 1s after it)"
    logged_before = [
        Event(sequence=1, at=5.0, kind="failed", reason=failed, node="n1", container="c1"),
        Event(sequence=2, at=6.0, kind="drift", reason="corrected: x", node="n1", container="c1"),
    ]
    reports = ReportedOnce(logged_before, ATTEMPTS)
    # what the log holds already (a restarted coordinator hears it again): no event
    assert reports.new_notes("n1", [attempted("failed", failed, 1, 5.0)], record_of) == []
    again = "started again: exited with code 1 (2 tries in a row)"
    frames = [
        [attempted("restarted", again, 2, 9.0)],
        [attempted("restarted", again, 2, 9.0)],  # the same status sent again
        [attempted("restarted", again, 3, 11.0)],  # the same reason, another time
    ]
    notes = [note for frame in frames for note in reports.new_notes("n1", frame, record_of)]
    assert notes == [
        Note("restarted", again, "team-a", "web", "c1", "n1", at=at) for at in (9.0, 11.0)
    ]


listings = st.lists(
    st.builds(
        lambda cid, drift, at: ContainerStatus(id=cid, state="running", drift=drift, drift_at=at),
        st.sampled_from(CONTAINERS),
        DRIFTS,
        AT,
    ),
    unique_by=lambda container: container.id,
    max_size=len(CONTAINERS),
)


@settings(max_examples=200, deadline=None)
@given(logged, st.lists(st.tuples(st.sampled_from(NODES), listings), max_size=12))
def test_partial_frames_give_the_notes_of_the_full_ones_they_stand_for(
    drift: list[Event], frames: list[tuple[str, list[ContainerStatus]]]
) -> None:
    """Each node's first frame whole, every later one as ``partial_report`` makes it
    against the node's frame before: the same events, the same memory."""
    whole, partly = ReportedOnce(drift, DRIFT), ReportedOnce(drift, DRIFT)
    last: dict[str, Status] = {}
    for node, listing in frames:
        now = Status(applied_revision=1, containers=listing)
        sent = partial_report(last[node], now) if node in last else now
        gone = sent.gone if sent.partial else None
        expected = whole.new_notes(node, now.containers, record_of)
        assert partly.new_notes(node, sent.containers, record_of, gone) == expected
        assert partly._seen == whole._seen
        last[node] = now


def test_a_partial_frame_forgets_only_what_it_names_gone() -> None:
    reports = ReportedOnce([], DRIFT)
    drifted = ContainerStatus(id="c1", state="running", drift=["cpu_shares 2 -> 717"])
    reports.new_notes("n1", [drifted, ContainerStatus(id="c2", state="running")], record_of)
    reports.new_notes("n1", [], record_of, gone=["c2"])  # c1 unchanged: remembered
    assert reports.new_notes("n1", [drifted], record_of) == []
    reports.new_notes("n1", [], record_of, gone=["c1"])
    assert [n.container for n in reports.new_notes("n1", [drifted], record_of)] == ["c1"]
