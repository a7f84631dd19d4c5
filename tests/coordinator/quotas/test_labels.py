"""Labels in-quota / over-quota (spec section 5): the spec's example, a container that
stops, a min that changes, every tie rule of the order, and the slow reference."""

from __future__ import annotations

from typing import Any

import pytest
from msgspec.structs import replace

from coordinator.quotas import Container, Quota, label_containers, order_containers
from coordinator.quotas import reference as ref
from tests.coordinator.quotas.states import unchanged

GPU16 = {"nvidia.com/gpu": 1}  # 16 GB at the default G
MIN_32 = Quota("q", ["team-q"], {"gpu-memory": 32})
# The spec's example: 16 GB containers created at t1 < t2 < t3.
EXAMPLE = [
    Container("c1", "team-q", GPU16, created=1.0),
    Container("c2", "team-q", GPU16, created=2.0),
    Container("c3", "team-q", GPU16, created=3.0),
]


def labels(quota: Quota, containers: list[Container]) -> list[str]:
    """The labels in the labelling order, checked against the slow reference."""
    fast = label_containers(quota, containers)
    assert fast == ref.labels(quota, containers)
    assert list(fast) == list(ref.labels(quota, containers))
    return [f"{key.split('/')[1]}:{label}" for key, label in fast.items()]


def test_spec_example() -> None:
    assert labels(MIN_32, EXAMPLE) == ["c1:in-quota", "c2:in-quota", "c3:over-quota"]


STOPPED = [
    pytest.param(EXAMPLE[1:], id="deleted"),
    pytest.param([replace(EXAMPLE[0], running=False), *EXAMPLE[1:]], id="stopped-still-listed"),
]


@pytest.mark.parametrize("state", STOPPED)
def test_when_a_container_stops_the_next_one_becomes_in_quota(state: list[Container]) -> None:
    assert labels(MIN_32, state) == ["c2:in-quota", "c3:in-quota"]


MIN_CHANGES = [
    pytest.param({"gpu-memory": 48}, ["in", "in", "in"], id="raised"),
    pytest.param({"gpu-memory": 16}, ["in", "over", "over"], id="lowered"),
    pytest.param({"gpu-memory": 15}, ["over", "over", "over"], id="below-one"),
    pytest.param({"cpu": "1"}, ["in", "in", "in"], id="other-resource-only"),
    pytest.param({}, ["over", "over", "over"], id="empty-min"),
]


@pytest.mark.parametrize(("minimum", "expected"), MIN_CHANGES)
def test_when_min_changes_the_labels_follow(minimum: dict[str, Any], expected: list[str]) -> None:
    got = labels(Quota("q", ["team-q"], minimum), EXAMPLE)
    assert [g.split(":")[1] for g in got] == [f"{e}-quota" for e in expected]


# (containers, expected order of names): each row isolates one tie rule of the order.
ORDERS = [
    pytest.param(
        [
            Container("late", "ns", GPU16, created=2.5),
            Container("early", "ns", GPU16, created=2.25),
        ],
        ["early", "late"],
        id="1-created-full-resolution",
    ),
    pytest.param(
        [
            Container("low", "ns", GPU16, priority=-1),
            Container("high", "ns", GPU16, priority=5),
            Container("zero", "ns", GPU16),
        ],
        ["high", "zero", "low"],
        id="2-higher-priority-first",
    ),
    pytest.param(
        [
            Container("big", "ns", {"nvidia.com/gpu": 2}),
            Container("small", "ns", {"nvidia.com/gpu": 1, "cpu": "64"}),
        ],
        ["small", "big"],
        id="3-gpu-memory-before-cpu",
    ),
    pytest.param(
        [
            Container("more-cpu", "ns", {"cpu": "2"}),
            Container("more-memory", "ns", {"cpu": "1", "memory": "64Gi"}),
        ],
        ["more-memory", "more-cpu"],
        id="3-cpu-before-memory",
    ),
    pytest.param(
        [
            Container("zz", "ns", {"cpu": "1", "b.io/x": 1}),
            Container("aa", "ns", {"cpu": "1", "a.io/x": 1}),
        ],
        ["zz", "aa"],
        id="3-other-names-in-code-point-order-absent-is-0",
    ),
    pytest.param(
        [Container("b", "ns", GPU16), Container("a", "ns2", GPU16), Container("a", "ns", GPU16)],
        ["a", "b", "a"],
        id="4-namespace-slash-name",
    ),
]


@pytest.mark.parametrize(("containers", "expected"), ORDERS)
def test_order_tie_rules(containers: list[Container], expected: list[str]) -> None:
    assert [c.name for c in order_containers(containers)] == expected
    assert [c.name for c in order_containers(list(reversed(containers)))] == expected


def test_labels_are_a_prefix_even_for_a_small_later_container() -> None:
    # c2 does not fit (16 + 32 > 40); c3 would, but it sorts after an over-quota one.
    state = [
        Container("c1", "team-q", GPU16, created=1.0),
        Container("c2", "team-q", {"nvidia.com/gpu": 2}, created=2.0),
        Container("c3", "team-q", {"cpu": "1"}, created=3.0),
    ]
    quota = Quota("q", ["team-q"], {"gpu-memory": 40})
    assert labels(quota, state) == ["c1:in-quota", "c2:over-quota", "c3:over-quota"]


def test_resources_outside_min_never_matter() -> None:
    state = [Container("c1", "team-q", {"nvidia.com/gpu": 1, "cpu": "1000"}, created=1.0)]
    assert labels(MIN_32, state) == ["c1:in-quota"]


def test_composite_labels_one_pool_and_nothing_else() -> None:
    # A CompositeElasticQuota orders the containers of all its namespaces together; the
    # unmanaged and the pending containers get no label.
    quota = Quota("q", ["ns1", "ns2"], {"gpu-memory": 32})
    state = [
        Container("x", "ns2", GPU16, created=1.0),
        Container("y", "ns1", GPU16, created=2.0),
        Container("z", "ns2", GPU16, created=3.0),
        Container("u", "unmanaged", GPU16, created=0.0),
        Container("p", "ns1", GPU16, created=0.0, running=False),
    ]
    with unchanged(state):
        assert labels(quota, state) == ["x:in-quota", "y:in-quota", "z:over-quota"]


def test_cpu_labels_are_exact() -> None:
    # 0.1 + 0.2 == 0.3 exactly: no float drift puts the third one over.
    quota = Quota("q", ["team-q"], {"cpu": "0.6"})
    state = [
        Container("a", "team-q", {"cpu": "0.1"}, created=1.0),
        Container("b", "team-q", {"cpu": "0.2"}, created=2.0),
        Container("c", "team-q", {"cpu": "0.3"}, created=3.0),
        Container("d", "team-q", {"cpu": "10m"}, created=4.0),
    ]
    assert labels(quota, state) == ["a:in-quota", "b:in-quota", "c:in-quota", "d:over-quota"]
