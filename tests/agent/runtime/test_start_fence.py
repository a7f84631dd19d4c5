"""The start fence (agent.runtime.start_fence): a revision is acknowledged only once no
create or start of a container it leaves out is under way."""

from __future__ import annotations

import asyncio
import contextlib

from hypothesis import given
from hypothesis import strategies as st

from agent.runtime.start_fence import StartFence


def fence_over(desired: set[str]) -> StartFence:
    return StartFence(lambda container_id: container_id in desired)


def test_nothing_is_acknowledged_before_a_desired_state_arrives() -> None:
    fence = fence_over(set())
    with fence.starting("a"):
        pass
    assert fence.acknowledged is None


def test_a_revision_is_acknowledged_at_once_when_nothing_is_under_way() -> None:
    fence = fence_over({"a"})
    fence.received(3)
    assert fence.acknowledged == 3


def test_a_start_of_a_container_left_out_holds_the_revision_until_it_ends() -> None:
    desired = {"a", "b"}
    fence = fence_over(desired)
    fence.received(1)
    with fence.starting("a"), fence.starting("b"):
        desired.discard("a")  # revision 2 leaves a out while its start is under way
        fence.received(2)
        assert fence.acknowledged == 1
        assert fence.blocking() == ["a"]
    assert fence.acknowledged == 2
    assert fence.blocking() == []


def test_a_start_of_a_container_still_desired_holds_nothing() -> None:
    fence = fence_over({"a"})
    with fence.starting("a"):
        fence.received(5)
        assert fence.acknowledged == 5


def test_a_start_that_fails_ends_all_the_same() -> None:
    fence = fence_over(set())
    fence.received(1)
    try:
        with fence.starting("gone"):
            fence.received(2)
            raise RuntimeError("the engine refused")
    except RuntimeError:
        pass
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
    with fence.starting("a"):
        desired.clear()
        fence.received(2)
        await asyncio.sleep(0.01)
        assert not waiting.done()  # a's start still under way
    assert (await waiting)[1] == 2


@given(
    st.lists(
        st.tuples(st.sampled_from(["begin", "end", "revision"]), st.sampled_from("abc")),
        max_size=40,
    )
)
def test_an_acknowledged_revision_never_has_a_start_of_one_it_leaves_out_under_way(
    steps: list[tuple[str, str]],
) -> None:
    """Random starts, ends and revisions (each leaving one more container out, as the
    runtime takes them in: desired state and revision together). A start begun while its
    container was desired may have passed its gate; one begun after is refused by it."""
    desired = set("abc")
    fence = fence_over(desired)
    under_way: dict[str, list[tuple[contextlib.AbstractContextManager[None], bool]]] = {
        name: [] for name in "abc"
    }
    left_out_at: dict[int, set[str]] = {}  # revision -> the containers it left out
    revision = 0
    for kind, name in steps:
        if kind == "begin":
            starting = fence.starting(name)
            starting.__enter__()
            under_way[name].append((starting, name in desired))
        elif kind == "end" and under_way[name]:
            ending, _ = under_way[name].pop()
            ending.__exit__(None, None, None)
        elif kind == "revision":
            desired.discard(name)
            revision += 1
            left_out_at[revision] = set("abc") - desired
            fence.received(revision)
        if fence.acknowledged is not None:
            passed = {n for n, starts in under_way.items() if any(gated for _, gated in starts)}
            assert not passed & left_out_at[fence.acknowledged]
