"""agent.runtime.restarts: the crash-loop backoff, and the planner's restart decisions
over it (``plan`` with ``Retries``), by example and by property."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.runtime.labels import spec_digest
from agent.runtime.plan import Host, Observed, Retries, Start, plan
from agent.runtime.restarts import (
    CrashLoop,
    RestartRules,
    after_try,
    describe,
    due,
    ended,
    wait_after,
)
from shared.cpuset import CpuSet
from shared.protocol import DesiredContainer, Limits
from shared.restart_policy import RestartPolicy, runs_again

RULES = RestartRules(initial_seconds=1.0, max_seconds=300.0)
HOST = Host(
    offered=CpuSet.parse("0-1"),
    online=CpuSet.parse("0-1"),
    memory_nodes=CpuSet([0]),
    devices=frozenset(),
)
POLICIES: tuple[RestartPolicy, ...] = ("no", "on-failure", "always", "unless-stopped")

rules = st.builds(
    lambda initial, factor: RestartRules(initial_seconds=initial, max_seconds=initial * factor),
    st.floats(0.01, 60.0),
    st.floats(1.0, 1000.0),
)


def test_the_waits_double_from_the_initial_one_up_to_the_max() -> None:
    waits = [wait_after(tries, RULES) for tries in range(12)]
    assert waits == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]


def test_a_loop_counts_its_tries_and_starts_afresh_for_another_spec() -> None:
    first = after_try(None, "spec-a", now=10.0, failure="create failed: No such image")
    second = after_try(first, "spec-a", now=11.0)
    assert second == CrashLoop(spec="spec-a", tries=2, last=11.0)
    assert after_try(second, "spec-b", now=12.0) == CrashLoop(spec="spec-b", tries=1, last=12.0)


def test_the_next_try_is_due_after_the_wait_of_its_loop() -> None:
    loop = CrashLoop(spec="s", tries=3, last=50.0)
    assert due(loop, "s", RULES) == 54.0
    assert due(loop, "other", RULES) == 0.0
    assert due(None, "s", RULES) == 0.0


def test_a_loop_ends_once_its_container_ran_twice_the_longest_wait() -> None:
    loop = CrashLoop(spec="s", tries=9, last=0.0)
    assert not ended(loop, True, 599.9, RULES)
    assert ended(loop, True, 600.0, RULES)
    assert not ended(loop, False, 10_000.0, RULES)


def test_the_status_says_why_and_the_pace() -> None:
    loop = CrashLoop(spec="s", tries=4, last=0.0)
    assert describe("exited with code 1", loop, RULES) == (
        "exited with code 1 (try 4 in a row; the next 8s after it)"
    )


@pytest.mark.parametrize(("initial", "most"), [(0.0, 1.0), (2.0, 1.0), (-1.0, 5.0)])
def test_rules_that_make_no_sense_are_refused(initial: float, most: float) -> None:
    with pytest.raises(ValueError, match="restart backoff"):
        RestartRules(initial_seconds=initial, max_seconds=most)


@given(rules, st.integers(0, 200))
def test_waits_grow_and_stay_within_the_max(rules: RestartRules, tries: int) -> None:
    wait = wait_after(tries, rules)
    assert 0.0 <= wait <= rules.max_seconds
    assert wait <= wait_after(tries + 1, rules)
    if tries > 0:
        assert wait >= min(rules.initial_seconds, rules.max_seconds)


@given(
    rules,
    st.sampled_from(POLICIES),
    st.one_of(st.none(), st.integers(0, 255)),
    st.integers(0, 12),
    st.floats(0.0, 10_000.0),
)
def test_an_exited_container_is_started_again_exactly_when_its_policy_and_loop_say(
    rules: RestartRules, policy: RestartPolicy, code: int | None, tries: int, since: float
) -> None:
    wanted = DesiredContainer(id="c1", image="busybox", restart_policy=policy)
    spec = spec_digest(wanted)
    loops = {"c1": CrashLoop(spec=spec, tries=tries, last=1000.0)} if tries else {}
    retries = Retries(now=1000.0 + since, rules=rules, loops=loops)
    found = Observed(
        docker_id="d1",
        id="c1",
        spec=spec,
        state="dead" if code is None else "exited",
        limits=Limits(cpuset_cpus="0-1", cpuset_mems="0", cpu_shares=1024, cpu_period=100_000),
        created="2024-05-01T00:00:00Z",
        exit_code=code,
    )
    work = plan({"c1": wanted}, [found], {}, HOST, retries=retries)
    starts = [a for one in work for a in one.actions if isinstance(a, Start)]
    at = due(loops.get("c1"), spec, rules)
    if not runs_again(policy, code):
        assert work == []
    elif at <= retries.now:
        assert [start.restart for start in starts] == [True]
        assert all(one.retry_at is None for one in work)
    else:
        assert starts == []
        (one,) = work
        assert one.retry_at == at
        assert f"(try {tries} in a row;" in one.problem
