"""agent.runtime.plan, swaps (placement spec 10): a desired container that replaces
another stops it, starts in its place, removes it once it has run for the settle time,
and on failure goes and starts the old one again. One example per rule, each step of a
whole swap in order."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from agent.runtime.plan import Create, Remove, Start, Stop, Swaps, Work, plan
from tests.agent.runtime.test_plan import HOST, by_id, desired, observed

OLD = desired("old", image="busybox:1")
NEW = desired("new", image="busybox:2", replaces="old")
STARTED = "2026-11-24T10:00:00.123456789Z"
AT_START = datetime(2026, 11, 24, 10, 0, 0, 123456, tzinfo=UTC).timestamp()
SETTLE = 5.0


def swap_plan(*seen: tuple[str, str], now: float = AT_START, failed: str = "") -> list[Work]:
    """The plan with NEW desired; ``seen``: (id, state) of what Docker holds."""
    containers = {"old": OLD, "new": NEW}
    found = [
        replace(observed(containers[cid], docker_id=f"d-{cid}", state=state), started_at=STARTED)
        for cid, state in seen
    ]
    swaps = Swaps(now=now, settle_seconds=SETTLE, failed={"new": failed} if failed else {})
    return plan(by_id(NEW), found, {}, HOST, swaps)


def test_the_old_container_is_stopped_first_and_the_new_one_waits() -> None:
    assert swap_plan(("old", "running")) == [
        Work("old", (Stop("d-old", "replaced by new"),)),
    ]


def test_once_the_old_one_is_down_the_new_one_is_created() -> None:
    (work,) = swap_plan(("old", "exited"))
    assert work.id == "new"
    (create,) = work.actions
    assert isinstance(create, Create)
    assert create.container == NEW


def test_the_old_one_is_kept_while_the_new_one_settles() -> None:
    assert swap_plan(("old", "exited"), ("new", "running"), now=AT_START + SETTLE - 0.1) == []


def test_after_the_settle_time_the_old_one_is_removed() -> None:
    assert swap_plan(("old", "exited"), ("new", "running"), now=AT_START + SETTLE + 0.01) == [
        Work("old", (Remove("d-old", "replaced by new"),)),
    ]


def test_a_swap_with_the_old_one_gone_is_an_ordinary_container() -> None:
    assert swap_plan(("new", "running"), now=AT_START + 60) == []
    assert isinstance(swap_plan()[0].actions[0], Create)


@pytest.mark.parametrize("state", ["exited", "dead", "restarting"])
def test_a_new_container_that_stops_fails_the_swap_and_the_old_one_starts(state: str) -> None:
    assert swap_plan(("old", "exited"), ("new", state)) == [
        Work("old", (Start("d-old", "its replacement failed"),)),
        Work(
            "new",
            (Remove("d-new", "replace failed"),),
            f"replace failed: it did not keep running ({state})",
            swap_failed=f"it did not keep running ({state})",
        ),
    ]


def test_a_failed_swap_is_not_tried_again() -> None:
    why = "create failed: no such image"
    assert swap_plan(("old", "running"), failed=why) == [
        Work("new", (), f"replace failed: {why}", swap_failed=why)
    ]


def test_an_old_container_that_nothing_replaces_any_more_is_removed() -> None:
    work = plan({}, [observed(OLD, docker_id="d-old", state="exited")], {}, HOST, Swaps())
    assert work == [Work("old", (Remove("d-old", "no longer desired"),))]
