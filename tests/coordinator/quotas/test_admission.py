"""Admission (spec section 6): max refusals with their numbers, in-quota and over-quota,
unmanaged namespaces, and what is not checked."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from coordinator.quotas import Container, Quota, QuotaError, admit, first_refused
from tests.coordinator.quotas.states import containers, quota_sets, unchanged

GPU16 = {"nvidia.com/gpu": 1}
CAPPED = Quota("q", ["team-q"], {"gpu-memory": 16, "cpu": "1"}, {"gpu-memory": 32, "cpu": "2"})
POOL = Quota("p", ["ns1", "ns2"], {"gpu-memory": 16}, {"gpu-memory": 32})
QUOTAS = [CAPPED, POOL]
STATE = [
    Container("r1", "team-q", {"nvidia.com/gpu": 1, "cpu": "1.5"}, created=1.0),
    Container("x1", "ns1", GPU16, created=1.0),
    Container("x2", "ns2", GPU16, created=2.0),
    Container("pending", "team-q", {"nvidia.com/gpu": 4}, created=0.5, running=False),
]

# (candidate, admitted, capacity)
ADMITTED = [
    pytest.param(
        Container("new", "team-q", GPU16, created=5.0), True, "over-quota", id="up-to-max"
    ),
    pytest.param(
        Container("old", "team-q", GPU16, created=0.0),
        True,
        "in-quota",
        id="older-than-the-running-one-sorts-first",
    ),
    pytest.param(
        Container("new", "team-q", {"cpu": "0.5"}, created=5.0),
        True,
        "over-quota",
        id="cpu-exactly-at-max",
    ),
    pytest.param(
        Container("new", "team-q", {"memory": "1Gi"}, created=5.0),
        True,
        "over-quota",
        id="resource-absent-from-max-is-unlimited",
    ),
    pytest.param(
        Container("new", "team-q", {"cpu": 0, "memory": "1Gi"}, created=5.0),
        True,
        "over-quota",
        id="a-zero-request-is-not-checked",
    ),
    pytest.param(
        Container("pending", "team-q", {"nvidia.com/gpu": 1}, created=0.5),
        True,
        "in-quota",
        id="its-own-pending-record-is-ignored",
    ),
    pytest.param(Container("u", "elsewhere", {"nvidia.com/gpu": 8}), True, None, id="unmanaged"),
]


@pytest.mark.parametrize(("candidate", "admitted", "capacity"), ADMITTED)
def test_admitted(candidate: Container, admitted: bool, capacity: str | None) -> None:
    with unchanged(QUOTAS, STATE, candidate):
        decision = admit(QUOTAS, STATE, candidate)
    assert (decision.admitted, decision.capacity) == (admitted, capacity)
    assert decision.code is None
    assert decision.quota == (None if capacity is None else "q")


# (candidate, quota, exceeded resources)
REFUSED = [
    pytest.param(
        Container("new", "team-q", {"nvidia.com/gpu": 2}), "q", ["gpu-memory"], id="gpu-memory"
    ),
    pytest.param(
        Container("new", "team-q", {"nvidia.com/gpu": 2, "cpu": "0.51"}),
        "q",
        ["gpu-memory", "cpu"],
        id="every-exceeded-resource-listed",
    ),
    pytest.param(Container("new", "ns2", GPU16), "p", ["gpu-memory"], id="composite-one-pool"),
]


@pytest.mark.parametrize(("candidate", "quota", "exceeded"), REFUSED)
def test_refused_over_max(candidate: Container, quota: str, exceeded: list[str]) -> None:
    with unchanged(QUOTAS, STATE, candidate):
        decision = admit(QUOTAS, STATE, candidate)
    assert not decision.admitted
    assert decision.capacity is None
    assert (decision.code, decision.status, decision.quota) == ("quota_max_exceeded", 403, quota)
    items = decision.details["items"]
    assert [i["resource"] for i in items] == exceeded  # type: ignore[attr-defined]
    assert "max exceeded" in decision.reason


def test_refusal_carries_the_numbers() -> None:
    decision = admit(QUOTAS, STATE, Container("new", "team-q", {"nvidia.com/gpu": 2, "cpu": 1}))
    assert decision.details["items"] == [
        {"resource": "gpu-memory", "used": 16, "request": 32, "max": 32},
        {"resource": "cpu", "used": "1.5", "request": "1", "max": "2"},
    ]
    assert "gpu-memory used 16 + request 32 > max 32" in decision.reason


def test_a_quota_above_a_lowered_max_still_admits_what_does_not_need_it() -> None:
    lowered = Quota("q", ["team-q"], {}, {"cpu": "1"})  # used cpu is 1.5 already
    decision = admit([lowered], STATE, Container("new", "team-q", GPU16))
    assert decision.admitted


def test_an_invalid_request_raises() -> None:
    candidate = Container("new", "team-q", {"gpu-memory": 16})
    with unchanged(QUOTAS, STATE, candidate), pytest.raises(QuotaError) as caught:
        admit(QUOTAS, STATE, candidate)
    assert caught.value.code == "gpu_memory_not_requestable"


# --- a change of an admitted container (a realloc) ------------------------------------------
# r1 holds cpu 1.5 of CAPPED's max 2; LOWERED's max 1 is below what team-q already uses.
LOWERED = Quota("q", ["team-q"], {}, {"cpu": "1", "gpu-memory": 32})
R1 = STATE[0].requests


@pytest.mark.parametrize(
    ("quotas", "after", "admitted"),
    [
        pytest.param([LOWERED], {**R1, "cpu": "1.4"}, True, id="shrinking-under-a-lowered-max"),
        pytest.param([LOWERED], dict(R1), True, id="unchanged-under-a-lowered-max"),
        pytest.param([LOWERED], {**R1, "cpu": "1.6"}, False, id="growing-under-a-lowered-max"),
        pytest.param(QUOTAS, {**R1, "cpu": "2"}, True, id="growing-up-to-max"),
        pytest.param(QUOTAS, {**R1, "cpu": "2.1"}, False, id="growing-past-max"),
        pytest.param(
            [LOWERED],
            {"nvidia.com/gpu": 2, "cpu": "1"},
            True,
            id="shrinking-cpu-while-growing-gpu-within-max",
        ),
    ],
)
def test_a_change_weighs_only_what_grows(
    quotas: list[Quota], after: dict[str, object], admitted: bool
) -> None:
    changed = Container("r1", "team-q", after, created=1.0)
    with unchanged(quotas, STATE, changed):
        decision = admit(quotas, STATE, changed, previous=R1)
    assert decision.admitted is admitted, decision.reason
    if not admitted:  # r1 itself is not counted in "used"
        items = decision.details["items"]
        assert isinstance(items, list)
        assert [(i["resource"], i["used"], i["request"]) for i in items] == [
            ("cpu", "0", after["cpu"])
        ]


@settings(max_examples=200)
@given(state=containers(), quotas=quota_sets(), data=st.data())
def test_a_change_that_grows_nothing_is_always_admitted(
    state: list[Container], quotas: list[Quota], data: st.DataObject
) -> None:
    assume(state)
    before = data.draw(st.sampled_from(state))
    shrunk = {
        name: data.draw(st.integers(0, amount)) if isinstance(amount, int) else amount
        for name, amount in before.requests.items()
    }
    after = Container(before.name, before.namespace, shrunk, created=before.created)
    assert admit(quotas, state, after, previous=before.requests).admitted


@settings(max_examples=200)
@given(state=containers(), quotas=quota_sets(), new=containers(count=6))
def test_first_refused_is_admit_in_turn(
    state: list[Container], quotas: list[Quota], new: list[Container]
) -> None:
    """``first_refused`` equals admitting each candidate in turn with those before it
    counted, stopping at the first refusal."""
    candidates = [
        Container(f"new-{i}", c.namespace, c.requests, created=c.created, running=True)
        for i, c in enumerate(new)
    ]
    expected = None
    for index, candidate in enumerate(candidates):
        decision = admit(quotas, [*state, *candidates[:index]], candidate)
        if not decision.admitted:
            expected = (index, decision)
            break
    with unchanged(quotas, state, candidates):
        assert first_refused(quotas, state, candidates) == expected
