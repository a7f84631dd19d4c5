"""The decision queue's order (pure): by urgency, first come first served within one,
none passed by more than its head start, and entries put back keep their places."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coordinator.deployments.decision_queue import (
    HEAD_START,
    SMALL_PLACING,
    DecisionQueue,
    Urgency,
    placing,
)

# (seconds after the previous arrival, urgency) for each entry, in arrival order
arrivals = st.lists(
    st.tuples(st.floats(0, 2, allow_nan=False), st.sampled_from(list(Urgency))), max_size=40
)


def queued(entries: list[tuple[float, Urgency]]) -> tuple[DecisionQueue[int], list[float]]:
    """A queue of each entry's index, pushed at its arrival; the arrival times."""
    now = [0.0]
    queue = DecisionQueue[int](clock=lambda: now[0])
    times = []
    for index, (gap, urgency) in enumerate(entries):
        now[0] += gap
        times.append(now[0])
        queue.push(index, urgency)
    return queue, times


@given(arrivals)
def test_urgent_first_in_arrival_order_within_one_and_none_passed_beyond_its_head_start(
    entries: list[tuple[float, Urgency]],
) -> None:
    queue, times = queued(entries)
    order = [entry.item for entry in queue.take(len(entries))]
    assert sorted(order) == list(range(len(entries)))
    assert not queue
    for position, later in enumerate(order):
        for earlier in order[position + 1 :]:  # taken after ``later``
            urgency, other = entries[earlier][1], entries[later][1]
            if urgency == other:
                assert earlier > later, "one urgency is first come first served"
            # ``later`` went first: it came at most the head starts' difference after, i.e.
            # it was due no later (the sums as the queue makes them: rearranged, the float
            # rounding differs, and hypothesis found an example it broke)
            assert times[later] + HEAD_START[other] <= times[earlier] + HEAD_START[urgency]


@given(arrivals, st.integers(0, 40), st.integers(0, 40))
def test_entries_put_back_keep_their_places(
    entries: list[tuple[float, Urgency]], taken: int, kept: int
) -> None:
    queue, _ = queued(entries)
    whole = [entry.item for entry in queued(entries)[0].take(len(entries))]
    first = queue.take(taken)
    queue.put_back(first[kept:])
    again = [entry.item for entry in first[:kept]] + [e.item for e in queue.take(len(entries))]
    assert again == whole


def test_dropped_entries_leave_in_order_and_the_rest_stay() -> None:
    queue, _ = queued([(0.0, Urgency.BULK), (0.1, Urgency.FREES), (0.1, Urgency.INTERACTIVE)])
    assert queue.drop(lambda item: item != 2) == [1, 0]
    assert [entry.item for entry in queue.take(5)] == [2]


def test_a_few_containers_are_interactive_many_are_bulk() -> None:
    assert placing(1) == placing(SMALL_PLACING) == Urgency.INTERACTIVE
    assert placing(SMALL_PLACING + 1) == Urgency.BULK
