"""Decisions over the placement views the books keep (``kept_views``) equal decisions
over views made afresh, for any waves of concurrent deploys, scales, removes, cordons,
drains and scheduler passes on a real SQLite store whose commits fail as hypothesis draws
them (decided while the one before commits, and decided again after a failed commit:
``test_overlap_property``'s harness). Every time a decider asks for the candidates'
views:

1. each kept view equals, field by field, the view of a node state made anew from the
   draft's state of that node, and a ``Node`` built and checked from those fields (so a
   view never shows a state the books and the draft do not have);
2. the placement the decision makes on them equals the one ``place`` makes on the fresh
   views (the same plans, or the same refusal).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings

from coordinator.deployments import placing
from coordinator.deployments.draft import Draft
from coordinator.placement import Node, NodeState, PlacementError, place
from coordinator.store.sqlite import SqliteStore
from tests.coordinator.deployments.test_overlap_property import (
    FlakyStore,
    Op,
    call,
    picked,
    plans,
    service_on,
    spec,
    waves,
)


def anew(state: NodeState) -> Node:
    """The view of a state made again from ``state``'s fields (nothing kept)."""
    return NodeState(
        state.name,
        dict(state.cores),
        numa=state.numa,
        memory=state.memory,
        numa_memory=state.numa_memory,
        share_base=state.share_base,
        allocations=dict(state.allocations),
        version=state.version,
        cpu_overcommit=state.cpu_overcommit,
    ).view()


def fields(view: Node) -> tuple[object, ...]:
    return (
        view.name,
        list(view.cores.items()),
        view.numa,
        view.memory,
        view.numa_memory,
        view.share_base,
        view.shared_cores,
        view.pool_cpu,
        view.pool_free,
        view.pools,
    )


def checked(view: Node) -> Node:
    """``view`` built through every check of ``Node``."""
    return Node(
        view.name,
        view.cores,
        numa=view.numa,
        memory=view.memory,
        numa_memory=view.numa_memory,
        share_base=view.share_base,
        shared_pool=view.shared_cores,
        shared_cpu=view.pool_cpu,
        shared_free=view.pool_free,
    )


def fresh_views(draft: Draft) -> list[Node]:
    return [anew(state) for state in draft.candidates()]


def placed(views: Sequence[Node], args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    try:
        return place(views, *args, **kwargs)
    except PlacementError as error:
        return ("refused", str(error))


async def run(directory: Path, waves: list[list[Op]], plan: list[str]) -> int:
    """The waves on a flaky store, every decision's views and placement checked; how
    many decisions placed on kept views."""
    flaky = FlakyStore(await SqliteStore.open(directory / "kept.db"))
    compared = 0
    kept_views = Draft.candidate_views

    # The checks run in the deciding thread, where an AssertionError would be the
    # decider's error, answered to its caller: they are collected and asserted at the end.
    wrong: list[str] = []

    def candidate_views(draft: Draft) -> list[Node]:
        views = kept_views(draft)
        fresh = fresh_views(draft)
        if [fields(v) for v in views] != [fields(v) for v in fresh]:
            wrong.append(f"kept views {views} differ from fresh {fresh}")
        if [fields(v) for v in fresh] != [fields(checked(v)) for v in fresh]:
            wrong.append(f"views {fresh} differ from checked Nodes")
        return views

    def checked_place_on(draft: Draft, views: Sequence[Node], *args: Any, **kwargs: Any) -> Any:
        nonlocal compared
        kwargs["pressured"] = draft.context.pressured()
        if [v.name for v in views] == [s.name for s in draft.candidates()]:
            # A decision over every candidate: the same on views made afresh.
            ours, theirs = placed(views, args, kwargs), placed(fresh_views(draft), args, kwargs)
            if ours != theirs:
                wrong.append(f"placed {ours} on kept views, {theirs} on fresh ones")
            compared += 1
        return place(views, *args, **kwargs)

    try:
        with (
            mock.patch.object(Draft, "candidate_views", candidate_views),
            mock.patch.object(placing, "place_on", checked_place_on),
        ):
            service = await service_on(flaky)
            flaky.plan = list(plan)

            async def one(index: int, op: Op, target: str) -> None:
                await asyncio.sleep(0.01 * (index % 3))  # some come while others commit
                # Refusals and failed commits alike: what is checked is every decision.
                with contextlib.suppress(Exception):
                    await call(service, op, target)

            for wave in waves:
                sent = [one(i, op, picked(service, op)) for i, op in enumerate(wave)]
                await asyncio.wait_for(asyncio.gather(*sent), timeout=10)
            await service._sequencer.idle()
            service.check_indexes()
    finally:
        await flaky.close()
    assert not wrong, wrong[0]
    return compared


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(waves=waves, plan=plans)
def test_decisions_on_kept_views_equal_decisions_on_fresh_views(
    waves: list[list[Op]], plan: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        compared = asyncio.run(run(Path(directory), waves, plan))
    if any(op.kind == "deploy" for wave in waves for op in wave):
        assert compared > 0, "no deploy placed on the candidates' views"


def test_a_view_is_rebuilt_only_for_a_node_whose_state_changed() -> None:
    """Two deploys in turn: the second decision's views are the very objects the first
    left for every node it did not place on."""

    async def scenario(directory: Path) -> None:
        store = await SqliteStore.open(directory / "same.db")
        seen: list[list[Node]] = []
        kept_views: Callable[[Draft], list[Node]] = Draft.candidate_views

        def remembered(draft: Draft) -> list[Node]:
            views = kept_views(draft)
            seen.append(views)
            return views

        try:
            with mock.patch.object(Draft, "candidate_views", remembered):
                service = await service_on(store)
                first = await service.deploy("team-a", spec("a", 1, True))
                await service.deploy("team-a", spec("b", 1, True))
        finally:
            await store.close()
        (placed_on,) = {record.node for record in first.containers}
        before, after = seen
        for old, new in zip(before, after, strict=True):
            assert (old is new) == (old.name != placed_on), old.name

    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(scenario(Path(directory)))
