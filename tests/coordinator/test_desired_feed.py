"""The desired feed: a delta applied to what the agent holds gives the node's state now,
nothing is sent when nothing changed, a longer pace rides along, and the whole state goes
out when the agent asks for it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coordinator.desired_feed import DesiredFeed, desired_delta
from coordinator.heartbeat_pace import Pace
from shared.protocol import Desired, DesiredContainer, Limits

PACE = Pace(5.0, 15.0)

containers = st.builds(
    DesiredContainer,
    id=st.sampled_from([f"c{n}" for n in range(8)]),
    image=st.just("allot/busybox:test"),
    limits=st.builds(Limits, cpu_shares=st.integers(min_value=0, max_value=3)),
)
states = st.lists(containers, max_size=8, unique_by=lambda c: c.id)


def applied(held: dict[str, DesiredContainer], frame: Desired) -> dict[str, DesiredContainer]:
    """What an agent holds after ``frame``, as ``agent.runtime.reconciler`` takes it."""
    after = {} if frame.full else dict(held)
    for gone in frame.removed:
        after.pop(gone, None)
    after.update({c.id: c for c in frame.containers})
    return after


@given(states, states)
def test_a_delta_applied_to_before_gives_after(
    before: list[DesiredContainer], after: list[DesiredContainer]
) -> None:
    changed, removed = desired_delta({c.id: c for c in before}, after)
    frame = Desired(revision=2, full=False, containers=changed, removed=removed)
    assert applied({c.id: c for c in before}, frame) == {c.id: c for c in after}
    assert len(changed) + len(removed) <= len(before) + len(after)


@given(st.lists(states, min_size=1, max_size=6))
def test_an_agent_fed_deltas_holds_each_state_in_turn(
    history: list[list[DesiredContainer]],
) -> None:
    feed = DesiredFeed(0, [], PACE)
    held: dict[str, DesiredContainer] = {}
    for revision, state in enumerate(history, 1):
        frame = feed.frame(revision, state, PACE)
        assert frame is not None
        assert not frame.full
        assert frame.since == revision - 1
        held = applied(held, frame)
        assert held == {c.id: c for c in state}


def test_nothing_is_sent_when_nothing_changed() -> None:
    state = [DesiredContainer(id="c1", image="i")]
    feed = DesiredFeed(3, state, PACE)
    assert feed.frame(3, list(state), PACE) is None


def test_a_longer_pace_rides_in_an_otherwise_empty_delta_once() -> None:
    state = [DesiredContainer(id="c1", image="i")]
    feed = DesiredFeed(3, state, PACE)
    longer = Pace(20.0, 60.0)
    assert feed.frame(3, state, longer) == Desired(
        revision=3, full=False, since=3, heartbeat_seconds=20.0, lease_seconds=60.0
    )
    assert feed.frame(3, state, longer) is None
    assert feed.pace == longer


def test_the_whole_state_goes_out_once_when_asked_for() -> None:
    one, two = DesiredContainer(id="c1", image="i"), DesiredContainer(id="c2", image="i")
    feed = DesiredFeed(3, [one], PACE)
    feed.want_full()
    assert feed.frame(3, [one, two], PACE) == Desired(revision=3, full=True, containers=[one, two])
    assert feed.frame(4, [two], PACE) == Desired(revision=4, full=False, removed=["c1"], since=3)
