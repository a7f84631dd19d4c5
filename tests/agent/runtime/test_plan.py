"""agent.runtime.plan: the pure function from desired and observed containers to work.

Examples of each rule, then properties over random desired and observed states:
- convergence: applying a plan to a model of Docker leaves nothing to do but problems;
- idempotence: a node already in the desired state needs no action;
- the plan only touches observed containers and only creates desired ones;
- the shared pool never overlaps a bound container unless they take every offered CPU;
- the plan does not depend on the order Docker lists containers in.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, replace
from random import Random
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.runtime.labels import spec_digest
from agent.runtime.plan import (
    KEPT_FROM_LAST_RUN,
    REMOVED_OUTSIDE,
    Action,
    Create,
    Host,
    Observed,
    Remove,
    Retries,
    Start,
    Update,
    Work,
    plan,
    refusal,
    restarted,
    shared_pool,
    still_bound,
    target_settings,
    tries,
)
from agent.runtime.restarts import RestartRules, after_try
from agent.runtime.settings import Settings
from shared.cpuset import CpuSet, docker_cpuset
from shared.inventory import Cpu, Gpu, Inventory, MigDevice, NumaNode
from shared.protocol import DesiredContainer, Limits
from shared.restart_policy import RestartPolicy, runs_again
from tests.agent.runtime.reported import limits_of

GiB = 2**30
GPU = "GPU-aaaa"
MIG = "MIG-bbbb"
HOST = Host(
    offered=CpuSet.parse("0-7"),
    online=CpuSet.parse("0-9"),
    memory_nodes=CpuSet([0]),
    devices=frozenset({GPU, MIG}),
)
EARLY = "2024-05-01T10:00:00.000000000Z"
LATE = "2024-05-02T10:00:00.000000000Z"


def desired(container_id: str = "c1", **fields: Any) -> DesiredContainer:
    return DesiredContainer(id=container_id, image=fields.pop("image", "busybox:1"), **fields)


def observed(
    container: DesiredContainer,
    *,
    docker_id: str = "d1",
    state: str = "running",
    limits: Limits | None = None,
    spec: str | None = None,
    created: str = EARLY,
    exit_code: int | None = None,
) -> Observed:
    """``container`` as Docker reports it; by default exactly as desired on HOST."""
    return Observed(
        docker_id=docker_id,
        id=container.id,
        spec=spec_digest(container) if spec is None else spec,
        state=state,
        limits=limits_of(HOST.settings(container.limits)) if limits is None else limits,
        created=created,
        exit_code=exit_code,
    )


def by_id(*containers: DesiredContainer) -> dict[str, DesiredContainer]:
    return {container.id: container for container in containers}


def actions(work: Iterable[Work]) -> list[Action]:
    return [action for one in work for action in one.actions]


def touched(done: Iterable[Action]) -> list[str]:
    """The Docker ids of the existing containers these actions work on."""
    return [action.docker_id for action in done if not isinstance(action, Create)]


def touched_id(action: Action) -> str:
    return "" if isinstance(action, Create) else action.docker_id


# --- nothing to do ---


def test_nothing_desired_and_nothing_observed_needs_no_work() -> None:
    assert plan({}, [], {}, HOST) == []


def test_a_container_as_desired_needs_no_work() -> None:
    wanted = desired(limits=Limits(cpuset_cpus="0-1", cpu_shares=512, mem_limit=GiB))
    assert plan(by_id(wanted), [observed(wanted)], {}, HOST) == []


def test_only_containers_needing_something_get_work() -> None:
    fine, missing = desired("a"), desired("b")
    assert plan(by_id(fine, missing), [observed(fine)], {}, HOST) == [
        Work("b", (Create(missing, HOST.settings(missing.limits)),))
    ]


# --- removal ---


def test_a_container_no_longer_desired_is_removed() -> None:
    gone = observed(desired("old"), docker_id="d9")
    assert plan({}, [gone], {}, HOST) == [Work("old", (Remove("d9", "no longer desired"),))]


def test_a_removal_takes_the_stop_timeout_the_container_was_made_with() -> None:
    """Its desired record is gone; Docker kept the timeout (StopTimeout) at creation."""
    gone = replace(observed(desired("old"), docker_id="d9"), stop_timeout=3)
    assert plan({}, [gone], {}, HOST) == [Work("old", (Remove("d9", "no longer desired", 3),))]


def test_a_desired_records_stop_timeout_wins_over_the_one_it_was_made_with() -> None:
    before = desired("c1", stop_timeout_seconds=2)
    changed = desired("c1", image="busybox:2", stop_timeout_seconds=2)
    kept = replace(observed(before), stop_timeout=30)
    (work,) = plan(by_id(changed), [kept], {}, HOST)
    assert work.actions[0] == Remove("d1", "spec changed", 2)


def test_the_pool_stays_off_a_leaving_bound_containers_cpus_until_it_is_gone() -> None:
    pooled = desired("pooled", shared_pool=True)
    leaving = replace(
        observed(desired("old", limits=Limits(cpuset_cpus="2-3")), docker_id="d8"), bound=True
    )
    running_pooled = observed(pooled, limits=Limits(cpuset_cpus="0-1,4-7"))
    assert still_bound(by_id(pooled), [leaving, running_pooled], HOST) == CpuSet.parse("2-3")
    work = plan(by_id(pooled), [leaving, running_pooled], {}, HOST)
    assert work == [Work("old", (Remove("d8", "no longer desired"),))]  # the pool unchanged
    gone = plan(by_id(pooled), [running_pooled], {}, HOST)
    (update,) = actions(gone)
    assert isinstance(update, Update)
    assert update.settings.cpuset_cpus == CpuSet.parse("0-7")


def test_every_copy_of_an_undesired_id_is_removed() -> None:
    gone = desired("old")
    copies = [
        observed(gone, docker_id=d, state=s) for d, s in [("d1", "running"), ("d2", "exited")]
    ]
    (work,) = plan({}, copies, {}, HOST)
    assert work.id == "old"
    assert sorted(work.actions, key=touched_id) == [
        Remove("d1", "no longer desired"),
        Remove("d2", "no longer desired"),
    ]


def test_a_running_duplicate_is_kept_over_a_newer_stopped_one() -> None:
    wanted = desired()
    running = observed(wanted, docker_id="d1", state="running", created=EARLY)
    stopped = observed(wanted, docker_id="d2", state="exited", created=LATE)
    for order in ([running, stopped], [stopped, running]):
        assert plan(by_id(wanted), order, {}, HOST) == [Work("c1", (Remove("d2", "duplicate"),))]


@pytest.mark.parametrize(
    "states", [("exited", "exited"), ("created", "dead"), ("running", "running")]
)
def test_otherwise_the_newest_duplicate_is_kept(states: tuple[str, str]) -> None:
    wanted = desired()
    old = observed(wanted, docker_id="d1", state=states[0], created=EARLY)
    new = observed(wanted, docker_id="d2", state=states[1], created=LATE)
    for order in ([old, new], [new, old]):
        (work,) = plan(by_id(wanted), order, {}, HOST)
        assert work.actions[0] == Remove("d1", "duplicate")
        assert "d1" not in touched(work.actions[1:])


def test_of_duplicates_created_at_once_the_higher_docker_id_is_kept() -> None:
    wanted = desired()
    first = observed(wanted, docker_id="d1", created=EARLY)
    second = observed(wanted, docker_id="d2", created=EARLY)
    for order in ([first, second], [second, first]):
        assert plan(by_id(wanted), order, {}, HOST) == [Work("c1", (Remove("d1", "duplicate"),))]


def test_every_duplicate_is_removed_before_the_kept_containers_work() -> None:
    wanted = desired(limits=Limits(cpu_shares=512))
    kept = observed(wanted, docker_id="d3", state="created", created=LATE, limits=Limits())
    extras = [observed(wanted, docker_id=d, state="exited") for d in ("d1", "d2")]
    (work,) = plan(by_id(wanted), [*extras, kept], {}, HOST)
    assert [type(action) for action in work.actions] == [Remove, Remove, Update, Start]
    assert {a.docker_id for a in work.actions[:2] if isinstance(a, Remove)} == {"d1", "d2"}
    assert all(a.docker_id == "d3" for a in work.actions[2:] if isinstance(a, Update | Start))


# --- creation and refusal ---


def test_a_missing_container_is_created_with_its_target_settings() -> None:
    wanted = desired(limits=Limits(cpuset_cpus="2-3", cpu_shares=0, mem_limit=GiB))
    target = Settings(
        cpuset_cpus=CpuSet([2, 3]),
        cpuset_mems=CpuSet([0]),
        cpu_shares=1024,
        cpu_quota=-1,
        cpu_period=100_000,
        mem_limit=GiB,
        memswap_limit=0,
        mem_reservation=0,
    )
    assert plan(by_id(wanted), [], {}, HOST) == [Work("c1", (Create(wanted, target),))]


@pytest.mark.parametrize("gpus", [[GPU], [MIG], [GPU, MIG]])
def test_a_container_with_devices_the_node_has_is_created(gpus: list[str]) -> None:
    wanted = desired(gpus=gpus)
    assert refusal(wanted, HOST) == ""
    assert plan(by_id(wanted), [], {}, HOST) == [
        Work("c1", (Create(wanted, HOST.settings(wanted.limits)),))
    ]


def test_a_container_asking_for_a_gpu_the_node_lacks_is_refused() -> None:
    wanted = desired(gpus=[GPU, "GPU-zzzz"])
    (work,) = plan(by_id(wanted), [], {}, HOST)
    assert work.actions == ()
    assert work.problem.startswith("refused")
    assert work.problem == (f"refused: GPU GPU-zzzz is not on this node (it has: {GPU}, {MIG})")


def test_a_gpu_refusal_on_a_node_without_gpus_says_so() -> None:
    bare = replace(HOST, devices=frozenset())
    assert refusal(desired(gpus=[GPU]), bare) == (
        f"refused: GPU {GPU} is not on this node (it has: none)"
    )


def test_a_container_with_a_label_in_allots_namespace_is_refused() -> None:
    wanted = desired(labels={"team": "a", "allot.node": "n2", "allot.id": "x"})
    (work,) = plan(by_id(wanted), [], {}, HOST)
    assert work.actions == ()
    assert work.problem == "refused: label allot.id, allot.node is reserved for allot"


@pytest.mark.parametrize("name", ["allot", "allotx", "x.allot.y", "Allot.id"])
def test_labels_merely_resembling_allots_are_allowed(name: str) -> None:
    assert refusal(desired(labels={name: "v"}), HOST) == ""


def test_a_refused_container_still_has_its_duplicates_removed() -> None:
    wanted = desired(gpus=["GPU-zzzz"])
    copies = [
        observed(wanted, docker_id="d1", spec="stale", created=LATE),
        observed(wanted, docker_id="d2", spec="stale", created=EARLY),
    ]
    (work,) = plan(by_id(wanted), copies, {}, HOST)
    assert work.actions == (Remove("d2", "duplicate"),)
    assert work.problem.startswith("refused")


def test_a_refused_replacement_leaves_the_old_container_in_place() -> None:
    wanted = desired(gpus=["GPU-zzzz"])
    (work,) = plan(by_id(wanted), [observed(wanted, spec="stale")], {}, HOST)
    assert work.actions == ()
    assert work.problem.startswith("refused")


# --- fixed spec ---


def test_a_container_whose_spec_changed_is_removed_then_created() -> None:
    wanted = desired(image="busybox:2")
    old = observed(desired(image="busybox:1"), docker_id="d7")
    assert plan(by_id(wanted), [old], {}, HOST) == [
        Work("c1", (Remove("d7", "spec changed"), Create(wanted, HOST.settings(wanted.limits))))
    ]


@pytest.mark.parametrize(
    "change",
    [
        {"image": "busybox:2"},
        {"command": ["sleep", "1"]},
        {"env": {"A": "1"}},
        {"labels": {"team": "b"}},
        {"gpus": [GPU]},
        {"restart_policy": "no"},
        {"extended": {"example.com/fpga": 1}},
    ],
    ids=["image", "command", "env", "labels", "gpus", "restart-policy", "extended"],
)
def test_a_change_to_a_fixed_field_makes_the_container_anew(change: dict[str, Any]) -> None:
    before = desired(labels={"team": "a"})
    after = msgspec.structs.replace(before, **change)
    (work,) = plan(by_id(after), [observed(before, state="exited")], {}, HOST)
    assert [type(action) for action in work.actions] == [Remove, Create]


@pytest.mark.parametrize(
    "change",
    [
        {"namespace": "ns2"},
        {"deployment": "dep2"},
        {"capacity": "over-quota"},
        {"limits": Limits(cpu_shares=2)},
        {"shared_pool": True},
    ],
    ids=["namespace", "deployment", "capacity", "limits", "shared-pool"],
)
def test_a_change_to_a_changeable_field_keeps_the_container(change: dict[str, Any]) -> None:
    before = desired(namespace="ns", deployment="dep", capacity="in-quota")
    after = msgspec.structs.replace(before, **change)
    work = plan(by_id(after), [observed(before)], {}, HOST)
    assert not any(isinstance(action, Remove | Create) for action in actions(work))


def test_holding_no_extended_resource_leaves_the_digest_as_it_was() -> None:
    # Containers made before extended resources existed must not be made anew: this is
    # the digest the same container had then (with the restart policy then the default).
    assert spec_digest(desired(restart_policy="no")) == "bb0a96a986e8620f"
    assert spec_digest(desired()) != spec_digest(desired(extended={"example.com/fpga": 1}))


def test_a_spec_change_on_a_never_started_container_does_not_start_it_first() -> None:
    wanted = desired(image="busybox:2")
    (work,) = plan(by_id(wanted), [observed(desired(), state="created")], {}, HOST)
    assert [type(action) for action in work.actions] == [Remove, Create]


# --- limits ---


def test_a_container_whose_limits_changed_is_updated_in_place() -> None:
    wanted = desired(limits=Limits(cpuset_cpus="0-1", cpu_shares=512, mem_limit=2 * GiB))
    running = observed(
        wanted, docker_id="d5", limits=Limits(cpuset_cpus="0-3", cpu_shares=512, mem_limit=GiB)
    )
    target = HOST.settings(wanted.limits)
    assert plan(by_id(wanted), [running], {}, HOST) == [
        Work(
            "c1",
            (Update("d5", target, {"cpuset_cpus": "0-3 -> 0-1", "mem_limit": "1Gi -> 2Gi"}),),
        )
    ]


def test_dockers_spellings_of_unset_limits_need_no_update() -> None:
    wanted = desired(
        limits=Limits(
            cpuset_cpus="0-9", cpuset_mems="0", cpu_shares=1024, cpu_quota=-1, cpu_period=100_000
        )
    )
    inspected = Limits(cpuset_cpus="", cpuset_mems="", cpu_shares=0, cpu_quota=0, cpu_period=0)
    assert plan(by_id(wanted), [observed(wanted, limits=inspected)], {}, HOST) == []


def test_swap_without_a_memory_limit_needs_no_update() -> None:
    wanted = desired()
    inspected = Limits(memswap_limit=-1)
    assert plan(by_id(wanted), [observed(wanted, limits=inspected)], {}, HOST) == []


def test_an_update_is_drift_when_the_agent_had_applied_the_target() -> None:
    wanted = desired(limits=Limits(cpu_shares=717))
    target = HOST.settings(wanted.limits)
    hand_changed = observed(wanted, limits=Limits(cpu_shares=2))
    (work,) = plan(by_id(wanted), [hand_changed], {"c1": target}, HOST)
    change = {"cpu_shares": "2 -> 717"}
    assert work.actions == (Update("d1", target, change, drift=change),)
    assert work.drift == ("cpu_shares 2 -> 717",)


@pytest.mark.parametrize(
    "applied",
    [
        {},
        {"c1": HOST.settings(Limits(cpu_shares=2))},
        {"other": HOST.settings(Limits(cpu_shares=717))},
    ],
    ids=["never-applied", "applied-the-old-value", "applied-to-another-container"],
)
def test_an_update_to_a_new_desired_value_is_not_drift(applied: dict[str, Settings]) -> None:
    wanted = desired(limits=Limits(cpu_shares=717))
    (work,) = plan(by_id(wanted), [observed(wanted, limits=Limits(cpu_shares=2))], applied, HOST)
    (update,) = work.actions
    assert isinstance(update, Update)
    assert update.drift == {}
    assert work.drift == ()


def test_removing_swap_while_keeping_the_memory_limit_is_reported() -> None:
    wanted = desired(limits=Limits(mem_limit=GiB))
    before = Limits(mem_limit=GiB, memswap_limit=2 * GiB)
    (work,) = plan(by_id(wanted), [observed(wanted, limits=before)], {}, HOST)
    assert work.actions == ()
    assert work.problem == "cannot remove memswap_limit in place; the container keeps it"


def test_setting_or_moving_a_memory_limit_is_an_update() -> None:
    wanted = desired(limits=Limits(mem_limit=2 * GiB, memswap_limit=2 * GiB))
    for before in (Limits(), Limits(mem_limit=GiB, memswap_limit=GiB)):
        (work,) = plan(by_id(wanted), [observed(wanted, limits=before)], {}, HOST)
        assert [type(action) for action in work.actions] == [Update]
        assert work.problem == ""


def test_a_container_that_keeps_its_swap_limit_is_still_started() -> None:
    wanted = desired(limits=Limits(mem_limit=GiB))
    before = Limits(mem_limit=GiB, memswap_limit=2 * GiB)
    stuck = observed(wanted, state="created", limits=before)
    (work,) = plan(by_id(wanted), [stuck], {}, HOST)
    assert work.actions == (Start("d1", "never started"),)
    assert work.problem.startswith("cannot remove memswap_limit in place")


def test_an_update_comes_before_the_start() -> None:
    wanted = desired(limits=Limits(cpu_shares=512))
    (work,) = plan(by_id(wanted), [observed(wanted, state="created", limits=Limits())], {}, HOST)
    assert [type(action) for action in work.actions] == [Update, Start]


# --- starting ---


@pytest.mark.parametrize("policy", ["no", "on-failure", "always", "unless-stopped"])
def test_a_never_started_container_is_started_whatever_its_policy(policy: str) -> None:
    wanted = desired(restart_policy=policy)
    assert plan(by_id(wanted), [observed(wanted, state="created")], {}, HOST) == [
        Work("c1", (Start("d1", "never started"),))
    ]


RUN_AGAIN = [
    ("always", 0, "exited with code 0"),
    ("always", 137, "exited with code 137"),
    ("unless-stopped", 0, "exited with code 0"),
    ("on-failure", 1, "exited with code 1"),
    ("on-failure", None, "died"),
    ("always", None, "died"),
]


@pytest.mark.parametrize(
    ("policy", "code", "why"), RUN_AGAIN, ids=[f"{p}-{c}" for p, c, _ in RUN_AGAIN]
)
def test_a_container_that_should_run_is_started_again_at_once_outside_a_crash_loop(
    policy: RestartPolicy, code: int | None, why: str
) -> None:
    wanted = desired(restart_policy=policy)
    state = "dead" if code is None else "exited"
    found = observed(wanted, state=state, exit_code=code)
    assert plan(by_id(wanted), [found], {}, HOST) == [Work("c1", (Start("d1", why, restart=True),))]


@pytest.mark.parametrize(
    ("policy", "code"),
    [("no", 0), ("no", 3), ("no", None), ("on-failure", 0)],
    ids=["no-0", "no-3", "no-dead", "on-failure-0"],
)
def test_a_container_that_ran_to_completion_stays_exited(
    policy: RestartPolicy, code: int | None
) -> None:
    wanted = desired(restart_policy=policy)
    state = "dead" if code is None else "exited"
    assert plan(by_id(wanted), [observed(wanted, state=state, exit_code=code)], {}, HOST) == []


def test_a_restart_not_yet_due_waits_and_says_until_when() -> None:
    wanted = desired()
    loop = after_try(None, spec_digest(wanted), now=100.0)
    retries = Retries(now=100.5, rules=RestartRules(initial_seconds=1.0), loops={"c1": loop})
    found = observed(wanted, state="exited", exit_code=2)
    assert plan(by_id(wanted), [found], {}, HOST, retries=retries) == [
        Work(
            "c1",
            problem="exited with code 2 (try 1 in a row; the next 1s after it)",
            retry_at=101.0,
        )
    ]
    due_now = replace(retries, now=101.0)
    assert plan(by_id(wanted), [found], {}, HOST, retries=due_now) == [
        Work("c1", (Start("d1", "exited with code 2", restart=True),))
    ]


def test_a_waiting_container_still_gets_its_new_limits() -> None:
    wanted = desired(limits=Limits(cpu_shares=512))
    loop = after_try(None, spec_digest(wanted), now=100.0)
    retries = Retries(now=100.0, loops={"c1": loop})
    found = observed(wanted, state="exited", exit_code=1, limits=Limits(cpu_shares=256))
    (work,) = plan(by_id(wanted), [found], {}, HOST, retries=retries)
    assert [type(action) for action in work.actions] == [Update]
    assert work.retry_at == 101.0
    assert work.problem.startswith("exited with code 1 (try 1 in a row")


def test_a_create_that_failed_is_tried_again_once_due() -> None:
    wanted = desired()
    loop = after_try(None, spec_digest(wanted), now=100.0, failure="create failed: No such image")
    retries = Retries(now=100.2, loops={"c1": loop})
    assert plan(by_id(wanted), [], {}, HOST, retries=retries) == [
        Work(
            "c1",
            problem="create failed: No such image (try 1 in a row; the next 1s after it)",
            retry_at=101.0,
        )
    ]
    assert plan(by_id(wanted), [], {}, HOST, retries=replace(retries, now=101.0)) == [
        Work("c1", (Create(wanted, HOST.settings(wanted.limits)),))
    ]


def test_a_changed_spec_is_tried_at_once_whatever_the_loop_of_the_old_one() -> None:
    old = desired(image="busybox:missing")
    loop = after_try(None, spec_digest(old), now=100.0, failure="create failed: No such image")
    loop = after_try(loop, spec_digest(old), now=101.0, failure="create failed: No such image")
    new = desired(image="busybox:1")
    retries = Retries(now=101.0, loops={"c1": loop})
    assert plan(by_id(new), [], {}, HOST, retries=retries) == [
        Work("c1", (Create(new, HOST.settings(new.limits)),))
    ]


# What dockerd 20.10 answered when the agent started a container again after the engine
# was restarted while stopping it; runc's form of the same; and containerd's shim, whose
# directory of the last run was left behind (make test, 2026-11-29).
KEPT = [
    "start failed: task 10c2867a9c5c: already exists",
    'start failed: container "10c2867a9c5c": already exists',
    "start failed: OCI runtime create failed: container with id exists: 10c2867a9c5c",
    "start failed: failed to start shim: mkdir /var/run/docker/containerd/daemon/"
    "io.containerd.runtime.v2.task/moby/b5ba57f37438: file exists: unknown",
]


@pytest.mark.parametrize("failure", KEPT)
def test_a_container_the_engine_kept_a_run_of_is_made_anew_at_its_next_try(failure: str) -> None:
    wanted = desired(restart_policy="always", limits=Limits(cpu_shares=700))
    loop = after_try(None, spec_digest(wanted), now=100.0, failure=failure)
    retries = Retries(now=100.5, rules=RestartRules(initial_seconds=1.0), loops={"c1": loop})
    found = observed(wanted, state="exited", exit_code=128, limits=Limits(cpu_shares=512))
    (waiting,) = plan(by_id(wanted), [found], {}, HOST, retries=retries)
    assert waiting.retry_at == 101.0  # its pace is kept, its limits are not
    assert [type(action) for action in waiting.actions] == [Update]
    (work,) = plan(by_id(wanted), [found], {}, HOST, retries=replace(retries, now=101.0))
    assert work == Work(
        "c1",
        (
            Remove("d1", f"to be made anew: {KEPT_FROM_LAST_RUN}"),
            Create(wanted, HOST.settings(wanted.limits), recreated=KEPT_FROM_LAST_RUN),
        ),
    )
    assert tries(work)  # the new container's try counts in the same loop


@pytest.mark.parametrize(
    "failure",
    [
        "start failed: transport is closing: unavailable",
        "create failed: image already exists",
        "start failed: error mounting /data to rootfs at /data: mkdir /data: file exists",
    ],
)
def test_other_failures_are_started_again_in_place(failure: str) -> None:
    wanted = desired(restart_policy="always")
    loop = after_try(None, spec_digest(wanted), now=100.0, failure=failure)
    retries = Retries(now=101.0, loops={"c1": loop})
    found = observed(wanted, state="exited", exit_code=128)
    assert plan(by_id(wanted), [found], {}, HOST, retries=retries) == [
        Work("c1", (Start("d1", "exited with code 128", restart=True),))
    ]


def test_a_kept_run_of_a_container_that_cannot_be_made_anew_is_started_in_place() -> None:
    wanted = desired(restart_policy="always", gpus=["GPU-gone"])
    loop = after_try(None, spec_digest(wanted), now=100.0, failure=KEPT[0])
    retries = Retries(now=101.0, loops={"c1": loop})
    found = observed(wanted, state="exited", exit_code=128)
    assert plan(by_id(wanted), [found], {}, HOST, retries=retries) == [
        Work("c1", (Start("d1", "exited with code 128", restart=True),))
    ]


def test_tries_are_creations_and_restarts() -> None:
    wanted = desired()
    create = Work("c1", (Create(wanted, HOST.settings(wanted.limits)),))
    restart = Work("c1", (Start("d1", "exited with code 1", restart=True),))
    first_start = Work("c1", (Start("d1", "never started"),))
    assert (tries(create), tries(restart), tries(first_start)) == (True, True, False)
    assert restarted(restart) == restart.actions[0]
    assert restarted(create) is None


@pytest.mark.parametrize("state", ["running", "paused", "restarting"])
def test_a_live_container_is_not_started(state: str) -> None:
    wanted = desired(restart_policy="always")
    assert plan(by_id(wanted), [observed(wanted, state=state)], {}, HOST) == []


# --- containers being removed ---


def test_an_undesired_container_being_removed_is_left_alone() -> None:
    assert plan({}, [observed(desired(), state="removing")], {}, HOST) == []


def test_a_desired_container_being_removed_is_created_anew() -> None:
    wanted = desired()
    assert plan(by_id(wanted), [observed(wanted, state="removing")], {}, HOST) == [
        Work("c1", (Create(wanted, HOST.settings(wanted.limits)),))
    ]


def test_a_copy_being_removed_is_not_a_duplicate() -> None:
    wanted = desired(limits=Limits(cpu_shares=512))
    copies = [
        observed(wanted, docker_id="d1", state="removing", created=LATE, limits=Limits()),
        observed(wanted, docker_id="d2", state="created", created=EARLY, limits=Limits()),
    ]
    (work,) = plan(by_id(wanted), copies, {}, HOST)
    assert touched(work.actions) == ["d2", "d2"]  # its limits, then its first start


# --- order ---


def test_work_is_sorted_by_id() -> None:
    wanted = [desired(name) for name in ("b", "d", "a")]
    gone = [observed(desired(name), docker_id=f"x{name}") for name in ("e", "c")]
    work = plan(by_id(*wanted), gone, {}, HOST)
    assert [one.id for one in work] == ["a", "b", "c", "d", "e"]


def test_removals_of_an_undesired_id_do_not_depend_on_the_observed_order() -> None:
    gone = desired("old")
    first = observed(gone, docker_id="d1", created=EARLY)
    second = observed(gone, docker_id="d2", created=LATE)
    assert plan({}, [first, second], {}, HOST) == plan({}, [second, first], {}, HOST)


# --- the shared pool ---


def pool_cpus(work: list[Work]) -> CpuSet:
    (create,) = actions(work)
    assert isinstance(create, Create)
    return create.settings.cpuset_cpus


def test_shared_pool_containers_run_on_the_offered_cpus_no_bound_container_uses() -> None:
    bound = [
        desired("b1", limits=Limits(cpuset_cpus="0-1")),
        desired("b2", limits=Limits(cpuset_cpus="4")),
    ]
    shared = desired("s", shared_pool=True)
    assert shared_pool([*bound, shared], HOST) == CpuSet([2, 3, 5, 6, 7])
    running = [observed(container, docker_id=container.id) for container in bound]
    assert pool_cpus(plan(by_id(*bound, shared), running, {}, HOST)) == CpuSet([2, 3, 5, 6, 7])


def test_the_pool_is_written_as_ascending_comma_joined_ids() -> None:
    bound = desired("b", limits=Limits(cpuset_cpus="1,4-7"))
    assert docker_cpuset(shared_pool([bound], HOST)) == "0,2,3"


def test_a_shared_pool_containers_own_cpuset_is_ignored() -> None:
    shared = desired("s", shared_pool=True, limits=Limits(cpuset_cpus="9", cpu_shares=512))
    target = target_settings(by_id(shared), HOST)["s"]
    assert target.cpuset_cpus == HOST.offered
    assert target.cpu_shares == 512


def test_without_bound_containers_the_pool_is_every_offered_cpu() -> None:
    shared = desired("s", shared_pool=True)
    assert pool_cpus(plan(by_id(shared), [], {}, HOST)) == HOST.offered


def test_shared_pool_containers_do_not_take_cpus_from_the_pool() -> None:
    first = desired("s1", shared_pool=True)
    second = desired("s2", shared_pool=True, limits=Limits(cpuset_cpus="0-3"))
    targets = target_settings(by_id(first, second), HOST)
    assert targets["s1"].cpuset_cpus == targets["s2"].cpuset_cpus == HOST.offered


def test_when_bound_containers_use_every_offered_cpu_the_pool_is_all_of_them() -> None:
    bound = [
        desired("b1", limits=Limits(cpuset_cpus="0-3")),
        desired("b2", limits=Limits(cpuset_cpus="4-7")),
    ]
    assert shared_pool(bound, HOST) == HOST.offered


def test_bound_cpus_outside_the_offered_set_do_not_shrink_the_pool() -> None:
    bound = desired("b", limits=Limits(cpuset_cpus="6-9"))
    assert shared_pool([bound], HOST) == CpuSet.parse("0-5")


def test_a_bound_container_using_only_unoffered_cpus_leaves_the_whole_pool() -> None:
    bound = desired("b", limits=Limits(cpuset_cpus="8-9"))
    assert shared_pool([bound], HOST) == HOST.offered


@pytest.mark.parametrize(
    "refused",
    [{"gpus": ["GPU-zzzz"]}, {"labels": {"allot.id": "x"}}],
    ids=["missing-gpu", "reserved-label"],
)
def test_a_refused_bound_container_still_keeps_its_cpus_out_of_the_pool(
    refused: dict[str, Any],
) -> None:
    """One already running (its GPU went away since) keeps running on them."""
    bound = desired("b", limits=Limits(cpuset_cpus="0-3"), **refused)
    assert shared_pool([bound], HOST) == HOST.offered - CpuSet.parse("0-3")


def test_a_shared_pool_container_is_updated_when_the_pool_changes() -> None:
    shared = desired("s", shared_pool=True)
    on_old_pool = observed(shared, docker_id="ds", limits=Limits(cpuset_cpus="0-7"))
    newcomer = desired("b", limits=Limits(cpuset_cpus="0-1"))
    work = plan(by_id(shared, newcomer), [on_old_pool], {}, HOST)
    assert [one.id for one in work] == ["b", "s"]
    (update,) = work[1].actions
    assert isinstance(update, Update)
    assert update.changes == {"cpuset_cpus": "0-7 -> 2-7"}


# --- the host ---


def test_host_of_an_inventory_offers_its_unreserved_cpus_and_lists_every_device() -> None:
    mig = MigDevice(
        uuid=MIG, profile="1g.10gb", gpu_instance_id=1, compute_instance_id=0, memory=GiB
    )
    gpus = [
        Gpu(
            index=0,
            uuid=GPU,
            name="A100",
            memory=40 * GiB,
            pci_bus_id="0000:3b:00.0",
            numa=0,
            mig_enabled=True,
            mig_devices=[mig],
        ),
        Gpu(
            index=1,
            uuid="GPU-cccc",
            name="A100",
            memory=40 * GiB,
            pci_bus_id="0000:5e:00.0",
            numa=1,
            mig_enabled=False,
        ),
    ]
    online = CpuSet.parse("0-3")
    inventory = Inventory(
        hostname="h",
        cpus=[Cpu(id=i, core=i, package=0, numa=i // 2) for i in online],
        online=online,
        isolated=CpuSet([3]),
        reserved=CpuSet([0]),
        numa_nodes=[
            NumaNode(id=0, cpus=CpuSet([0, 1]), memory=GiB, distances={0: 10, 1: 20}),
            NumaNode(id=1, cpus=CpuSet([2, 3]), memory=0, distances={0: 20, 1: 10}),
            NumaNode(id=2, cpus=CpuSet(), memory=GiB, distances={2: 10}),
        ],
        memory=2 * GiB,
        gpus=gpus,
    )
    assert Host.of(inventory) == Host(
        offered=CpuSet([1, 2]),
        online=online,
        memory_nodes=CpuSet([0, 2]),
        devices=frozenset({GPU, MIG, "GPU-cccc"}),
    )


def test_a_host_whose_numa_nodes_report_no_memory_uses_node_0() -> None:
    inventory = Inventory(
        hostname="h",
        cpus=[Cpu(id=0, core=0, package=0, numa=0)],
        online=CpuSet([0]),
        isolated=CpuSet(),
        reserved=CpuSet(),
        numa_nodes=[NumaNode(id=1, cpus=CpuSet([0]), memory=0, distances={1: 10})],
        memory=GiB,
    )
    host = Host.of(inventory)
    assert host.memory_nodes == CpuSet([0])
    assert host.devices == frozenset()


def test_host_settings_are_canonical_for_its_cpus_and_memory_nodes() -> None:
    host = replace(HOST, memory_nodes=CpuSet([0, 1]))
    assert host.settings(Limits()) == Settings.of(
        Limits(), online=CpuSet.parse("0-9"), memory_nodes=CpuSet([0, 1])
    )


# --- properties ---

IDS = ("a", "b", "c", "d")
UNDESIRED = "z"
STATES = ("created", "running", "paused", "restarting", "removing", "exited", "dead")
TIMES = tuple(f"2024-05-0{day}T00:00:00Z" for day in range(1, 4))


@dataclass(frozen=True)
class Scene:
    host: Host
    desired: dict[str, DesiredContainer]
    observed: list[Observed]
    applied: dict[str, Settings]


# Hypothesis spends its time per draw, so each value below is one draw: a cpuset is a
# bit mask, and the other fields come as one pick from all their combinations.
MEMORIES = (0, GiB, 2 * GiB, -1)
PROFILES = [
    Limits(
        cpuset_mems=mems,
        cpu_shares=shares,
        cpu_quota=quota,
        cpu_period=period,
        mem_limit=memory,
        memswap_limit=swap,
        mem_reservation=reservation,
    )
    for memory, swap, reservation, shares, quota, period, mems in itertools.product(
        MEMORIES,
        MEMORIES,
        (0, GiB // 2),
        (0, 2, 512, 1024),
        (-1, 0, 50_000),
        (0, 50_000),
        ("", "0"),
    )
]
POLICIES: tuple[RestartPolicy, ...] = ("no", "on-failure", "always", "unless-stopped")
FIXED = list(
    itertools.product(
        ("img:1", "img:2"),
        ({}, {}, {"team": "a"}, {"allot.x": "1"}),
        ([], [], [GPU], [MIG], ["GPU-zzzz"]),
        POLICIES,
    )
)
# fresh spec (three times in four), target limits, state, created
COPY_KINDS = list(itertools.product((True, True, True, False), (True, False), STATES, TIMES))
# Built once: hypothesis labels a sampled_from by its elements, slow for a long list.
pick_profile = st.sampled_from(PROFILES)
pick_fixed = st.sampled_from(FIXED)
pick_copy_kind = st.sampled_from(COPY_KINDS)
pick_applied = st.sampled_from(["none", "target", "other"])
pick_ids = st.lists(st.sampled_from(IDS), unique=True, max_size=len(IDS))
copies = st.integers(0, 2)


@functools.cache
def masks(width: int, empty: bool) -> st.SearchStrategy[int]:
    return st.integers(0 if empty else 1, 2**width - 1)


def cpus_of(mask: int, cpus: CpuSet) -> CpuSet:
    return CpuSet(cpu for bit, cpu in enumerate(cpus) if mask >> bit & 1)


def draw_cpus(draw: st.DrawFn, cpus: CpuSet, *, empty: bool = True) -> CpuSet:
    return cpus_of(draw(masks(len(cpus), empty)), cpus)


def draw_limits(draw: st.DrawFn, cpus: CpuSet) -> Limits:
    profile = draw(pick_profile)
    return msgspec.structs.replace(profile, cpuset_cpus=docker_cpuset(draw_cpus(draw, cpus)))


@st.composite
def hosts(draw: st.DrawFn) -> Host:
    online = CpuSet(range(draw(st.integers(1, 8))))
    return Host(
        offered=draw_cpus(draw, online, empty=False),
        online=online,
        memory_nodes=CpuSet([0]),
        devices=frozenset({GPU, MIG}),
    )


@st.composite
def desired_states(draw: st.DrawFn, host: Host) -> dict[str, DesiredContainer]:
    """Up to four containers, each bound to some offered CPUs or on the shared pool."""
    containers = {}
    for container_id in draw(pick_ids):
        shared = draw(st.booleans())
        own = draw_limits(draw, host.offered)
        if not shared:
            bound = draw_cpus(draw, host.offered, empty=False)
            own = msgspec.structs.replace(own, cpuset_cpus=docker_cpuset(bound))
        image, labels, gpus, policy = draw(pick_fixed)
        containers[container_id] = DesiredContainer(
            id=container_id,
            image=image,
            labels=labels,
            gpus=gpus,
            restart_policy=policy,
            limits=own,
            shared_pool=shared,
        )
    return containers


hosts_and_desired = hosts().flatmap(lambda host: st.tuples(st.just(host), desired_states(host)))


@st.composite
def scenes(draw: st.DrawFn) -> Scene:
    """A desired state and what Docker holds: up to two copies of each id (and of one
    undesired id), each with the desired or a stale spec, in any state, with the target
    or random limits; ``applied`` holds the target or other settings for some ids."""
    host = draw(hosts())
    wanted = draw(desired_states(host))
    targets = target_settings(wanted, host)
    found: list[Observed] = []
    for container_id in (*IDS, UNDESIRED):
        for _ in range(draw(copies)):
            fresh, as_set, state, created = draw(pick_copy_kind)
            found.append(
                Observed(
                    docker_id=f"d{len(found)}",
                    id=container_id,
                    spec=spec_digest(wanted[container_id])
                    if fresh and container_id in wanted
                    else "stale",
                    state=state,
                    limits=(
                        limits_of(targets[container_id])
                        if as_set and container_id in targets
                        else draw_limits(draw, host.online)
                    ),
                    created=created,
                )
            )
    applied = {}
    for container_id in sorted(targets):
        choice = draw(pick_applied)
        if choice == "target":
            applied[container_id] = targets[container_id]
        elif choice == "other":
            applied[container_id] = host.settings(draw_limits(draw, host.online))
    return Scene(host, wanted, found, applied)


def union(sets: Iterable[CpuSet]) -> CpuSet:
    total = CpuSet()
    for cpus in sets:
        total |= cpus
    return total


def run(work: list[Work], containers: list[Observed]) -> list[Observed]:
    """A model of Docker carrying out ``work``: Create makes a running container with the
    target limits, Update sets the limits, Start starts, Remove deletes."""
    by_docker_id = {container.docker_id: container for container in containers}
    for number, action in enumerate(a for one in work for a in one.actions):
        if isinstance(action, Create):
            made = Observed(
                docker_id=f"new{number}",
                id=action.container.id,
                spec=spec_digest(action.container),
                state="running",
                limits=limits_of(action.settings),
                created="2099-01-01T00:00:00Z",
            )
            by_docker_id[made.docker_id] = made
        elif isinstance(action, Update):
            current = by_docker_id[action.docker_id]
            by_docker_id[action.docker_id] = replace(current, limits=limits_of(action.settings))
        elif isinstance(action, Start):
            by_docker_id[action.docker_id] = replace(
                by_docker_id[action.docker_id], state="running"
            )
        else:
            del by_docker_id[action.docker_id]
    return list(by_docker_id.values())


@settings(max_examples=200)
@given(scenes())
def test_carrying_out_a_plan_leaves_only_problems(scene: Scene) -> None:
    first = plan(scene.desired, scene.observed, scene.applied, scene.host)
    after = run(first, scene.observed)
    second = plan(scene.desired, after, scene.applied, scene.host)
    assert actions(second) == []
    assert {one.id: one.problem for one in second} == {
        one.id: one.problem for one in first if one.problem
    }
    targets = target_settings(scene.desired, scene.host)
    live = [container for container in after if container.state != "removing"]
    assert {container.id for container in live} <= scene.desired.keys()
    for container_id, wanted in scene.desired.items():
        copies = [container for container in live if container.id == container_id]
        assert len(copies) <= 1
        if refusal(wanted, scene.host):
            continue
        (kept,) = copies
        assert kept.spec == spec_digest(wanted)
        assert kept.state != "created"
        if not any(one.id == container_id and one.problem for one in second):
            assert scene.host.settings(kept.limits) == targets[container_id]


@settings(max_examples=200)
@given(hosts_and_desired, st.sampled_from(list(itertools.product(range(5), repeat=len(IDS)))))
def test_a_node_in_the_desired_state_needs_no_action(
    drawn: tuple[Host, dict[str, DesiredContainer]], picks: tuple[int, ...]
) -> None:
    """Every desired container runs as set (or ran to completion as its policy says);
    the refused ones are missing, and only their refusal is reported."""
    host, wanted = drawn
    targets = target_settings(wanted, host)
    found = []
    for pick, (container_id, container) in zip(picks, wanted.items(), strict=False):
        if refusal(container, host):
            continue
        quiet = ["running", "paused", "restarting", "exited", "dead"]
        state = quiet[pick % len(quiet)]
        code = {"exited": pick % 2, "dead": None}.get(state)
        if state in ("exited", "dead") and runs_again(container.restart_policy, code):
            state = "running"
        found.append(
            Observed(
                docker_id=f"d-{container_id}",
                id=container_id,
                spec=spec_digest(container),
                state=state,
                limits=limits_of(targets[container_id]),
                created=TIMES[0],
                exit_code=code if state in ("exited", "dead") else None,
            )
        )
    work = plan(wanted, found, targets, host)
    assert actions(work) == []
    refused = {container_id for container_id, c in wanted.items() if refusal(c, host)}
    assert {one.id for one in work} == refused
    assert all(one.problem.startswith("refused") for one in work)


@settings(max_examples=200)
@given(scenes())
def test_the_plan_touches_only_observed_containers_and_creates_only_desired_ones(
    scene: Scene,
) -> None:
    work = plan(scene.desired, scene.observed, scene.applied, scene.host)
    targets = target_settings(scene.desired, scene.host)
    live = {c.docker_id: c for c in scene.observed if c.state != "removing"}
    assert [one.id for one in work] == sorted({one.id for one in work})
    for one in work:
        assert one.actions or one.problem
        for action in one.actions:
            if isinstance(action, Create):
                assert action.container == scene.desired[one.id]
                assert action.settings == targets[one.id]
                assert refusal(action.container, scene.host) == ""
                if action.recreated == REMOVED_OUTSIDE:
                    assert one.id in scene.applied
                    assert all(container.id != one.id for container in live.values())
                    assert one.drift == (f"recreated ({REMOVED_OUTSIDE})",)
            else:
                assert action.docker_id in live
                assert live[action.docker_id].id == one.id
            if isinstance(action, Update):
                current = scene.host.settings(live[action.docker_id].limits)
                assert action.settings == targets[one.id]
                assert action.changes == targets[one.id].changes_from(current) != {}
                applied = scene.applied.get(one.id)
                assert action.drift == {
                    name: change
                    for name, change in action.changes.items()
                    if applied is not None
                    and getattr(applied, name) == getattr(targets[one.id], name)
                }
                assert one.drift == tuple(f"{k} {v}" for k, v in action.drift.items())
        if one.drift:  # only a correction carries notes
            assert any(
                (isinstance(action, Update) and action.drift)
                or (isinstance(action, Create) and action.recreated)
                for action in one.actions
            )
    removed = [a.docker_id for a in actions(work) if isinstance(a, Remove)]
    assert len(removed) == len(set(removed))
    for container_id in {c.id for c in live.values()} - scene.desired.keys():
        (gone,) = [one for one in work if one.id == container_id]
        assert all(isinstance(action, Remove) for action in gone.actions)
        assert sorted(touched(gone.actions)) == sorted(
            c.docker_id for c in live.values() if c.id == container_id
        )
        assert gone.problem == ""


@settings(max_examples=200)
@given(hosts_and_desired)
def test_the_shared_pool_avoids_bound_containers_unless_they_take_every_cpu(
    drawn: tuple[Host, dict[str, DesiredContainer]],
) -> None:
    host, wanted = drawn
    pool = shared_pool(wanted.values(), host)
    targets = target_settings(wanted, host)
    bound = [
        targets[container_id].cpuset_cpus
        for container_id, container in wanted.items()
        if not container.shared_pool
    ]
    assert pool.issubset(host.offered)
    assert pool
    taken = union(bound)
    if host.offered.issubset(taken):
        assert pool == host.offered
    else:
        assert all(not (pool & cpus) for cpus in bound)
        assert pool == host.offered - taken
    for container_id, container in wanted.items():
        if container.shared_pool:
            assert targets[container_id].cpuset_cpus == pool


@settings(max_examples=200)
@given(scenes(), st.randoms(use_true_random=False))
def test_the_plan_does_not_depend_on_the_order_docker_lists_containers_in(
    scene: Scene, random: Random
) -> None:
    shuffled = list(scene.observed)
    random.shuffle(shuffled)
    assert plan(scene.desired, shuffled, scene.applied, scene.host) == plan(
        scene.desired, scene.observed, scene.applied, scene.host
    )
