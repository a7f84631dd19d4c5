"""agent.runtime.steps: how a pass splits its plan into bounded steps.

Examples of each rule, then properties over random plans: a step never holds more than
its budget unless one work alone does, never acts twice on a container in a pass, never
starts a bound container on CPUs a leaving one runs on, sends every removal of a
container no longer desired to the background once, and a pass of steps reaches every
work it may.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent.runtime.plan import Action, Create, Remove, Start, Stop, Update, Work
from agent.runtime.settings import Settings
from agent.runtime.steps import STEP_ACTIONS, Step, next_step
from shared.cpuset import CpuSet
from shared.protocol import DesiredContainer

SETTINGS = Settings(
    cpuset_cpus=CpuSet.parse("0-3"),
    cpuset_mems=CpuSet([0]),
    cpu_shares=1024,
    cpu_quota=-1,
    cpu_period=100_000,
    mem_limit=0,
    memswap_limit=0,
    mem_reservation=0,
)


def create(container_id: str) -> Create:
    return Create(DesiredContainer(id=container_id, image="busybox"), SETTINGS)


def removal(docker_id: str, timeout: int | None = None) -> Remove:
    return Remove(docker_id, "no longer desired", timeout)


def test_removals_of_containers_no_longer_desired_go_to_the_background() -> None:
    work = [Work("gone", (removal("d1", 2), removal("d2"))), Work("new", (create("new"),))]
    step = next_step(work, {"new"}, {}, {})
    assert step.removals == (("gone", removal("d1", 2)), ("gone", removal("d2")))
    assert step.works == (work[1],)


def test_a_removal_already_under_way_is_not_started_again() -> None:
    work = [Work("gone", (removal("d1"), removal("d2")))]
    step = next_step(work, set(), {}, {}, removing={"d1"})
    assert step.removals == (("gone", removal("d2")),)


def test_the_removals_of_a_desired_container_are_carried_out_in_the_step() -> None:
    """A failed swap's new container is removed in order with the rest of its work."""
    work = [Work("swap-new", (Remove("d3", "replace failed"),))]
    step = next_step(work, {"swap-new"}, {}, {})
    assert (step.removals, step.works) == ((), tuple(work))


def test_a_step_stops_at_its_budget_and_the_next_takes_the_rest() -> None:
    work = [Work(f"c{i}", (create(f"c{i}"),)) for i in range(STEP_ACTIONS + 3)]
    desired = {one.id for one in work}
    first = next_step(work, desired, {}, {})
    assert first.works == tuple(work[:STEP_ACTIONS])
    done = {one.id for one in first.works}
    second = next_step(work, desired, {}, {}, done=done)
    assert second.works == tuple(work[STEP_ACTIONS:])


def test_a_work_larger_than_the_budget_is_a_step_of_its_own() -> None:
    big = Work("big", (Remove("d", "spec changed"), create("big")))
    step = next_step([big, Work("next", (create("next"),))], {"big", "next"}, {}, {}, budget=1)
    assert step.works == (big,)


def test_a_bound_container_waits_while_a_leaving_one_runs_on_its_cpus() -> None:
    work = [Work("new", (create("new"),)), Work("free", (create("free"),))]
    leaving = {"old": CpuSet.parse("2-3")}
    bound = {"new": CpuSet.parse("3"), "free": CpuSet.parse("1")}
    step = next_step(work, {"new", "free"}, leaving, bound)
    assert step.works == (work[1],)
    assert step.held == {"new": "waiting for old to leave CPUs 3"}


def test_only_a_create_or_start_waits_for_the_cpus() -> None:
    """An update or a stop of a bound container goes ahead: it starts nothing."""
    work = [Work("kept", (Update("d", SETTINGS, {}),)), Work("swap", (Stop("d2", "replaced"),))]
    leaving = {"old": CpuSet.parse("0-3")}
    step = next_step(work, {"kept", "swap"}, leaving, {"kept": CpuSet.parse("0")})
    assert step.works == tuple(work)
    assert not step.held


def test_a_step_without_works_ends_the_pass() -> None:
    work = [Work("waits", problem="refused: GPU x is not on this node")]
    assert next_step(work, {"waits"}, {}, {}) == Step()


# -- properties -------------------------------------------------------------------------

IDS = [f"c{i}" for i in range(8)]
CPUS = st.frozensets(st.integers(0, 3), min_size=1).map(CpuSet)


@st.composite
def actions(draw: st.DrawFn, container_id: str) -> tuple[Action, ...]:
    kinds = draw(st.lists(st.sampled_from(["create", "start", "update", "remove"]), max_size=3))
    made: list[Action] = []
    for index, kind in enumerate(kinds):
        docker_id = f"{container_id}-{index}"
        if kind == "create":
            made.append(create(container_id))
        elif kind == "start":
            made.append(Start(docker_id, "never started"))
        elif kind == "update":
            made.append(Update(docker_id, SETTINGS, {}))
        else:
            made.append(removal(docker_id))
    return tuple(made)


@st.composite
def situations(
    draw: st.DrawFn,
) -> tuple[list[Work], set[str], dict[str, CpuSet], dict[str, CpuSet], int]:
    ids = draw(st.lists(st.sampled_from(IDS), unique=True))
    work = [Work(one, draw(actions(one))) for one in sorted(ids)]
    desired = set(draw(st.lists(st.sampled_from(IDS), unique=True)))
    leaving = draw(st.dictionaries(st.sampled_from(["x", "y"]), CPUS, max_size=2))
    bound = {one: draw(CPUS) for one in desired if draw(st.booleans())}
    budget = draw(st.integers(1, 6))
    return work, desired, leaving, bound, budget


@given(situations())
def test_a_pass_of_steps_keeps_every_rule(
    situation: tuple[list[Work], set[str], dict[str, CpuSet], dict[str, CpuSet], int],
) -> None:
    work, desired, leaving, bound, budget = situation
    done: set[str] = set()
    removing: set[str] = set()
    while True:
        step = next_step(work, desired, leaving, bound, removing=removing, done=done, budget=budget)
        for container_id, remove in step.removals:
            assert container_id not in desired
            assert remove.docker_id not in removing
            removing.add(remove.docker_id)
        if not step.works:
            break
        acted = sum(len(one.actions) for one in step.works)
        assert acted <= budget or len(step.works) == 1
        for one in step.works:
            assert one.id not in done
            starts = any(isinstance(a, Create | Start) for a in one.actions)
            if starts and one.id in bound:
                assert all(not bound[one.id] & cpus for cpus in leaving.values())
            done.add(one.id)
    in_background = {
        one.id
        for one in work
        if one.id not in desired and all(isinstance(a, Remove) for a in one.actions)
    }
    expected = {
        a.docker_id
        for one in work
        if one.id in in_background
        for a in one.actions
        if isinstance(a, Remove)
    }
    assert removing == expected
    for one in work:  # every work was carried out, sent to the background, or waits
        if one.actions:
            assert one.id in done | in_background | step.held.keys(), one
