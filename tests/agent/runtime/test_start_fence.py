"""The start fence (agent.runtime.start_fence): a revision is acknowledged only once no
create or start of a container it leaves out is through its gate and not yet answered."""

from __future__ import annotations

import asyncio
import contextlib

from hypothesis import given
from hypothesis import strategies as st

from agent.runtime.start_fence import Gate, StartFence


def fence_over(desired: set[str]) -> StartFence:
    return StartFence(lambda container_id: container_id in desired)


def test_nothing_is_acknowledged_before_a_desired_state_arrives() -> None:
    fence = fence_over({"a"})
    with fence.starting("a") as gate:
        assert gate()
    assert fence.acknowledged is None


def test_a_revision_is_acknowledged_at_once_when_nothing_is_at_the_engine() -> None:
    fence = fence_over({"a"})
    fence.received(3)
    assert fence.acknowledged == 3


def test_a_start_through_its_gate_of_a_container_left_out_holds_the_revision() -> None:
    desired = {"a", "b"}
    fence = fence_over(desired)
    fence.received(1)
    with fence.starting("a") as start_a, fence.starting("b") as start_b:
        assert start_a()
        assert start_b()
        desired.discard("a")  # revision 2 leaves a out while its start is at the engine
        fence.received(2)
        assert fence.acknowledged == 1
        assert fence.blocking() == ["a"]
    assert fence.acknowledged == 2
    assert fence.blocking() == []


def test_a_call_not_yet_through_its_gate_holds_nothing_and_is_refused() -> None:
    desired = {"a"}
    fence = fence_over(desired)
    with fence.starting("a") as gate:  # queued for one of the engine's threads
        desired.clear()
        fence.received(2)
        assert fence.acknowledged == 2
        assert not gate()  # its gate runs now: the newest desired state leaves it out
    assert fence.acknowledged == 2


def test_a_start_of_a_container_still_desired_holds_nothing() -> None:
    fence = fence_over({"a"})
    with fence.starting("a") as gate:
        assert gate()
        fence.received(5)
        assert fence.acknowledged == 5


def test_a_start_that_fails_ends_all_the_same() -> None:
    desired = {"gone"}
    fence = fence_over(desired)
    fence.received(1)
    with contextlib.suppress(RuntimeError), fence.starting("gone") as gate:
        assert gate()
        desired.clear()
        fence.received(2)
        raise RuntimeError("the engine refused")
    assert fence.acknowledged == 2


def test_a_welcome_may_lower_the_revision() -> None:
    fence = fence_over(set())
    fence.received(9)
    fence.received(2)  # a coordinator whose store was reset
    assert fence.acknowledged == 2


async def test_next_returns_each_new_acknowledgement_once() -> None:
    desired = {"a"}
    fence = fence_over(desired)
    fence.received(1)
    version, revision = await fence.next(0)
    assert revision == 1
    waiting = asyncio.create_task(fence.next(version))
    with fence.starting("a") as gate:
        assert gate()
        desired.clear()
        fence.received(2)
        await asyncio.sleep(0.01)
        assert not waiting.done()  # a's start still at the engine
    assert (await waiting)[1] == 2


@given(
    st.lists(
        st.tuples(st.sampled_from(["queue", "gate", "end", "revision"]), st.sampled_from("abc")),
        max_size=40,
    )
)
def test_an_acknowledged_revision_never_has_a_call_of_one_it_leaves_out_at_the_engine(
    steps: list[tuple[str, str]],
) -> None:
    """Random calls queued, let through (or not) by their gates and answered, and
    revisions, each leaving one more container out, as the runtime takes them in."""
    desired = set("abc")
    fence = fence_over(desired)
    calls: dict[str, list[tuple[contextlib.AbstractContextManager[Gate], Gate]]] = {
        name: [] for name in "abc"
    }
    left_out_at: dict[int, set[str]] = {}  # revision -> the containers it left out
    revision = 0
    for kind, name in steps:
        if kind == "queue":
            queued = fence.starting(name)
            calls[name].append((queued, queued.__enter__()))
        elif kind == "gate" and calls[name]:
            calls[name][-1][1]()
        elif kind == "end" and calls[name]:
            answered, _ = calls[name].pop()
            answered.__exit__(None, None, None)
        elif kind == "revision":
            desired.discard(name)
            revision += 1
            left_out_at[revision] = set("abc") - desired
            fence.received(revision)
        if fence.acknowledged is not None:
            at_engine = {n for n, made in calls.items() if any(gate.passed for _, gate in made)}
            assert not at_engine & left_out_at[fence.acknowledged]
