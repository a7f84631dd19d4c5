"""Preemption on one node (spec sections 7 and 8): the rules that forbid it, who may be a
victim (R3), the order of the candidates, when a quota stops yielding, the reprieve
pass, the cool-down (R4) and the choice among nodes."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from msgspec.structs import replace

from coordinator.quotas import (
    Container,
    Preemption,
    Quota,
    QuotaError,
    choose_node,
    plan_preemption,
    preemption_victims,
)
from coordinator.quotas import reference as ref
from tests.coordinator.quotas.states import (
    COOL_B2,
    COOL_QUOTAS,
    COOL_STATE,
    NODE_FULL,
    gpu10,
    unchanged,
)

MIG5 = {"nvidia.com/mig-1g.5gb": 1}
MIG20 = {"nvidia.com/mig-2g.20gb": 1}

# --- R2 stops at B's entitlement ---------------------------------------------------------
# A min 20, B min 20, C min 40 (idle). n1 is full: a1 (A, in-quota), b1-b4 (B; b3, b4
# over-quota). used A 10, B 40, C 0; unused = 10 + 0 + 40 = 50; g_A = g_B = 12.5.
ENTITLED = [
    Quota("a", ["team-a"], {"gpu-memory": 20}),
    Quota("b", ["team-b"], {"gpu-memory": 20}),
    Quota("c", ["team-c"], {"gpu-memory": 40}),
]
ENTITLED_STATE = [gpu10("a1", "team-a", 1.0)] + [
    gpu10(f"b{i}", "team-b", float(1 + i)) for i in range(1, 5)
]

# --- R1 stops at B's min -------------------------------------------------------------------
# B min 25: b1, b2 (10 GB, in-quota), b3 (20 GB, priority 0, over), b4 (5 GB, priority 1,
# over). used_B = 45. After b3 goes, used_B = 25 is within min: b4 stays.
RECLAIM = [Quota("a", ["team-a"], {"gpu-memory": 40}), Quota("b", ["team-b"], {"gpu-memory": 25})]
RECLAIM_STATE = [
    gpu10("b1", "team-b", 1.0),
    gpu10("b2", "team-b", 2.0),
    Container("b3", "team-b", MIG20, created=3.0, node="n1"),
    Container("b4", "team-b", MIG5, created=4.0, priority=1, node="n1"),
]

# --- who may be a victim ----------------------------------------------------------------------
# A min 10 (a1 in-quota, a2 over-quota), B min 30 (b1 in-quota), unmanaged u1; n1 full.
MIXED = [Quota("a", ["team-a"], {"gpu-memory": 10}), Quota("b", ["team-b"], {"gpu-memory": 30})]
MIXED_STATE = [
    gpu10("a1", "team-a", 1.0),
    gpu10("a2", "team-a", 2.0),
    gpu10("b1", "team-b", 3.0),
    gpu10("u1", "elsewhere", 4.0),
    gpu10("a3", "team-a", 5.0, node="n2"),  # over-quota, but on another node
]

# --- never the preemptor's own quota ---------------------------------------------------------
# A min 20 runs a1, a2 (in-quota) and a3 (over-quota); B min 20 runs b1; C min 200 is idle,
# so g_A = 20/240 * 210 = 17.5 and A's 5 GB a4 passes R2(a) (35 <= 37.5). The only
# over-quota container on n1 is A's own a3: no victim.
OWN = [
    Quota("a", ["team-a"], {"gpu-memory": 20}),
    Quota("b", ["team-b"], {"gpu-memory": 20}),
    Quota("c", ["team-c"], {"gpu-memory": 200}),
]
OWN_STATE = [
    gpu10("a1", "team-a", 1.0),
    gpu10("a2", "team-a", 2.0),
    gpu10("a3", "team-a", 3.0),
    gpu10("b1", "team-b", 4.0),
]

# (quotas, state, preemptor, free, expected victims)
DECISIONS = [
    pytest.param(
        MIXED, MIXED_STATE, gpu10("p", "elsewhere", 9.0), {"gpu-memory": 10}, [], id="fits"
    ),
    pytest.param(
        MIXED, MIXED_STATE, gpu10("p", "elsewhere", 9.0), NODE_FULL, None, id="unmanaged-r3"
    ),
    pytest.param(
        MIXED,
        MIXED_STATE,
        gpu10("b2", "team-b", 9.0),
        NODE_FULL,
        ["team-a/a2"],
        id="r1-takes-the-over-quota-one",
    ),
    pytest.param(
        MIXED,
        MIXED_STATE,
        Container("b2", "team-b", MIG20, created=9.0, node="n1"),
        NODE_FULL,
        None,
        id="r1-never-in-quota-nor-unmanaged",
    ),
    pytest.param(
        [
            Quota("a", ["team-a"], {"gpu-memory": 10}),
            Quota("b", ["team-b"], {}, {"gpu-memory": 10}),
        ],
        MIXED_STATE,
        gpu10("b2", "team-b", 9.0),
        NODE_FULL,
        None,
        id="over-max",
    ),
    pytest.param(MIXED, MIXED_STATE, gpu10("a4", "team-a", 9.0), NODE_FULL, None, id="r2a-fails"),
    pytest.param(
        OWN,
        OWN_STATE,
        Container("a4", "team-a", MIG5, created=9.0, node="n1"),
        NODE_FULL,
        None,
        id="r2-never-its-own-quota",
    ),
    pytest.param(
        ENTITLED, ENTITLED_STATE, gpu10("a2", "team-a", 9.0), NODE_FULL, ["team-b/b4"], id="r1"
    ),
    pytest.param(
        ENTITLED,
        ENTITLED_STATE,
        Container("a2", "team-a", MIG20, created=9.0, node="n1"),
        {"gpu-memory": 10},
        ["team-b/b4"],
        id="r2",
    ),
    pytest.param(
        ENTITLED,
        ENTITLED_STATE,
        Container("a2", "team-a", MIG20, created=9.0, node="n1"),
        NODE_FULL,
        None,
        id="r2b-b-stops-at-its-entitlement",
    ),
    pytest.param(
        RECLAIM,
        RECLAIM_STATE,
        Container("a1", "team-a", MIG20, created=9.0, node="n1"),
        NODE_FULL,
        ["team-b/b3"],
        id="r1-lowest-priority-first",
    ),
    pytest.param(
        RECLAIM,
        RECLAIM_STATE,
        Container("a1", "team-a", {"nvidia.com/mig-1g.25gb": 1}, created=9.0, node="n1"),
        NODE_FULL,
        None,
        id="r1-b-stops-at-its-min",
    ),
    pytest.param(
        MIXED,
        MIXED_STATE,
        replace(gpu10("b2", "team-b", 9.0), node=None),
        NODE_FULL,
        None,
        id="no-node",
    ),
]


@pytest.mark.parametrize(("quotas", "state", "preemptor", "free", "expected"), DECISIONS)
def test_decisions(
    quotas: list[Quota],
    state: list[Container],
    preemptor: Container,
    free: dict[str, Any],
    expected: list[str] | None,
) -> None:
    with unchanged(quotas, state, preemptor, free):
        got = preemption_victims(quotas, state, preemptor, free)
    assert got == expected
    exact = {k: Fraction(v) for k, v in free.items()}
    assert ref.greedy_victims(quotas, state, preemptor, exact) == expected


def test_reasons_name_the_rule_and_the_numbers() -> None:
    plan = plan_preemption(
        ENTITLED, ENTITLED_STATE, Container("a2", "team-a", MIG20, node="n1"), NODE_FULL
    )
    assert plan.rule == "R2"
    assert "gpu-memory 30 vs 32.5" in plan.reason  # used + request vs min + g
    assert "1 of 2 over-quota candidates allowed" in plan.reason
    assert plan.guaranteed["a"]["gpu-memory"] == Fraction(25, 2)


# Candidates on n1, all over-quota in B (min 0) and 10 GB: the victim is the first in order.
ORDER = [
    pytest.param(
        [gpu10("old-low", "team-b", 1.0, priority=-1), gpu10("new-high", "team-b", 2.0)],
        "team-b/old-low",
        id="lowest-priority-first",
    ),
    pytest.param(
        [gpu10("old", "team-b", 1.0), gpu10("new", "team-b", 2.0)],
        "team-b/new",
        id="then-newest-first",
    ),
    pytest.param(
        [gpu10("x", "team-b", 1.0), gpu10("y", "team-b", 1.0), gpu10("x", "team-c", 1.0)],
        "team-c/x",
        id="then-namespace-name-descending",
    ),
]


@pytest.mark.parametrize(("state", "first"), ORDER)
def test_candidate_order(state: list[Container], first: str) -> None:
    quotas = [
        Quota("a", ["team-a"], {"gpu-memory": 10}),
        Quota("b", ["team-b", "team-c"], {}),
    ]
    assert preemption_victims(quotas, state, gpu10("p", "team-a", 9.0), NODE_FULL) == [first]


def test_reprieve_gives_back_a_victim_that_is_not_needed() -> None:
    # The greedy pass takes the newest (5 GB, not enough), then the 20 GB one, which alone
    # makes room: the 5 GB one is put back.
    quotas = [Quota("a", ["team-a"], {"gpu-memory": 40}), Quota("b", ["team-b"], {})]
    state = [
        Container("big", "team-b", MIG20, created=1.0, node="n1"),
        Container("small", "team-b", MIG5, created=2.0, node="n1"),
    ]
    preemptor = Container("p", "team-a", MIG20, created=9.0, node="n1")
    plan = plan_preemption(quotas, state, preemptor, NODE_FULL)
    assert plan.victims == ["team-b/big"]
    assert plan.victim_quotas == {"team-b/big": "b"}


def test_resources_the_node_does_not_constrain_are_ignored() -> None:
    # Only cpu is short: the victim must free cpu; gpu-memory is not named in free.
    quotas = [Quota("a", ["team-a"], {"cpu": "4"}), Quota("b", ["team-b"], {})]
    state = [
        Container("gpu-only", "team-b", MIG20, created=2.0, node="n1"),
        Container("cpu", "team-b", {"cpu": "1.5"}, created=1.0, node="n1"),
    ]
    preemptor = Container("p", "team-a", {"cpu": "2", "nvidia.com/gpu": 1}, node="n1")
    free = {"cpu": Fraction(1, 2)}
    assert preemption_victims(quotas, state, preemptor, free) == ["team-b/cpu"]


# (recent, now, cooldown_s, expected) for B's b2 reclaiming its min from A (COOL_*).
COOLDOWN = [
    pytest.param([], 110.0, 30.0, ["team-a/a3"], id="no-record"),
    pytest.param([("a", "b", 100.0)], 110.0, 30.0, None, id="a-preempted-b-recently"),
    pytest.param([("a", "b", 100.0)], 129.999, 30.0, None, id="just-before-the-end"),
    pytest.param([("a", "b", 100.0)], 130.0, 30.0, ["team-a/a3"], id="cooldown-over"),
    pytest.param([("a", "b", 100.0)], 110.0, 0.0, ["team-a/a3"], id="zero-disables"),
    pytest.param([("b", "a", 100.0)], 110.0, 30.0, ["team-a/a3"], id="own-record-no-block"),
    pytest.param([("a", "c", 100.0)], 110.0, 30.0, ["team-a/a3"], id="other-pair"),
    pytest.param([("c", "b", 100.0)], 110.0, 30.0, ["team-a/a3"], id="other-preemptor"),
]


@pytest.mark.parametrize(("recent", "now", "cooldown_s", "expected"), COOLDOWN)
def test_cooldown(
    recent: list[tuple[str, str, float]], now: float, cooldown_s: float, expected: list[str] | None
) -> None:
    records = [{"at": t, "preemptor_quota": a, "victim_quota": b} for a, b, t in recent]
    with unchanged(COOL_QUOTAS, COOL_STATE, records):
        got = preemption_victims(
            COOL_QUOTAS,
            COOL_STATE,
            COOL_B2,
            NODE_FULL,
            now=now,
            recent=records,
            cooldown_s=cooldown_s,
        )
    assert got == expected


def test_cooldown_after_a_real_preemption() -> None:
    # C reclaims its min from A at t = 100 (record C -> A). Later A, with a bigger min,
    # would reclaim from C under R1, but the record blocks it until t = 130.
    quotas = [
        Quota("a", ["team-a"], {"gpu-memory": 20}),
        Quota("c", ["team-c"], {"gpu-memory": 20}),
    ]
    state = [
        gpu10("a1", "team-a", 1.0),
        gpu10("a2", "team-a", 2.0),
        gpu10("a3", "team-a", 3.0),  # over-quota
        gpu10("c1", "team-c", 4.0),
    ]
    c2 = gpu10("c2", "team-c", 5.0)
    first = plan_preemption(quotas, state, c2, NODE_FULL, now=100.0)
    assert (first.rule, first.victims) == ("R1", ["team-a/a3"])
    records = first.records(100.0)
    assert records == [{"at": 100.0, "preemptor_quota": "c", "victim_quota": "a"}]
    # Then C borrows with c3 (over-quota), and A's min is raised to 30.
    after = [*[c for c in state if c.name != "a3"], c2, gpu10("c3", "team-c", 6.0)]
    bigger = [Quota("a", ["team-a"], {"gpu-memory": 30}), quotas[1]]
    a4 = gpu10("a4", "team-a", 7.0)
    assert preemption_victims(bigger, after, a4, NODE_FULL, now=110.0, recent=records) is None
    assert preemption_victims(bigger, after, a4, NODE_FULL, now=130.0, recent=records) == [
        "team-c/c3"
    ]
    assert preemption_victims(bigger, after, a4, NODE_FULL, now=110.0) == ["team-c/c3"]


def test_minimal_by_inclusion_not_by_size() -> None:
    # Newest first: 10, 10, then 20 GB. Two 10 GB victims make room, so the 20 GB one is
    # never reached: [n10, m10] is minimal (neither can be spared) though {old20} is smaller.
    quotas = [Quota("a", ["team-a"], {"gpu-memory": 40}), Quota("b", ["team-b"], {})]
    state = [
        Container("old20", "team-b", MIG20, created=1.0, node="n1"),
        gpu10("m10", "team-b", 2.0),
        gpu10("n10", "team-b", 3.0),
    ]
    preemptor = Container("p", "team-a", MIG20, node="n1")
    assert preemption_victims(quotas, state, preemptor, NODE_FULL) == ["team-b/n10", "team-b/m10"]
    exact = {"gpu-memory": Fraction(0)}
    sets = ref.victim_sets(quotas, state, preemptor, exact)
    assert sets is not None
    assert frozenset({"team-b/old20"}) in sets


def test_the_greedy_follows_the_spec_even_when_a_search_would_succeed() -> None:
    # Section 8.1 step 4 takes every allowed candidate in order. B (min 10 GB) lends b3
    # (20 GB, priority -1) and b2 (4 cores). P needs cores only. b3 is taken first (B's 30
    # > 10), which frees no core and brings B back to its min, so b2 may not follow: None,
    # although {b2} alone is allowed and makes room.
    quotas = [Quota("a", ["team-a"], {"cpu": "8"}), Quota("b", ["team-b"], {"gpu-memory": 10})]
    state = [
        gpu10("b1", "team-b", 1.0),
        Container("b3", "team-b", MIG20, created=2.0, priority=-1, node="n1"),
        Container("b2", "team-b", {"cpu": "4"}, created=3.0, node="n1"),
    ]
    preemptor = Container("p", "team-a", {"cpu": "4"}, node="n1")
    free = {"cpu": Fraction(0)}
    assert preemption_victims(quotas, state, preemptor, free) is None
    assert ref.greedy_victims(quotas, state, preemptor, free) is None
    assert ref.victim_sets(quotas, state, preemptor, free) == [frozenset({"team-b/b2"})]


def _plan(priorities: tuple[int, ...]) -> Preemption:
    keys = [f"ns/v{i}" for i in range(len(priorities))]
    return Preemption(keys, "", victim_priorities=priorities)


NODE_CHOICE = [
    pytest.param({"n1": _plan((1,)), "n2": _plan((0, 0))}, "n2", id="lowest-highest-priority"),
    pytest.param({"n1": _plan((0, 0)), "n2": _plan((0,))}, "n2", id="fewest-victims"),
    pytest.param({"n1": _plan((0, 2)), "n2": _plan((1, 2))}, "n1", id="lowest-sum"),
    pytest.param({"n2": _plan((0,)), "n1": _plan((0,))}, "n1", id="node-name"),
    pytest.param({"n1": Preemption(None, ""), "n2": _plan((5,))}, "n2", id="only-one-can"),
    pytest.param({"n1": Preemption(None, "")}, None, id="none-can"),
    pytest.param({"n1": _plan((-5,)), "n2": _plan(())}, "n2", id="no-victim-needed"),
]


@pytest.mark.parametrize(("plans", "expected"), NODE_CHOICE)
def test_choose_node(plans: dict[str, Preemption], expected: str | None) -> None:
    assert choose_node(plans) == expected


BAD_INPUTS = [
    pytest.param({"gpu_memory": 0}, {}, "invalid_resource_name", id="free-bad-name"),
    pytest.param({"gpu-memory": -1}, {}, "invalid_quantity", id="free-negative"),
    pytest.param(NODE_FULL, {"cooldown_s": -1.0}, "invalid_config", id="negative-cooldown"),
    pytest.param(NODE_FULL, {"gb_per_gpu": 0}, "invalid_config", id="g-zero"),
]


@pytest.mark.parametrize(("free", "options", "code"), BAD_INPUTS)
def test_bad_inputs_raise(free: dict[str, Any], options: dict[str, Any], code: str) -> None:
    with unchanged(MIXED, MIXED_STATE, free), pytest.raises(QuotaError) as caught:
        preemption_victims(MIXED, MIXED_STATE, gpu10("b2", "team-b", 9.0), free, **options)
    assert caught.value.code == code


def test_an_invalid_preemptor_request_raises() -> None:
    bad = Container("b2", "team-b", {"nvidia.com/mig-1g10gb": 1}, node="n1")
    with unchanged(MIXED, MIXED_STATE), pytest.raises(QuotaError) as caught:
        preemption_victims(MIXED, MIXED_STATE, bad, NODE_FULL)
    assert caught.value.code == "malformed_mig_name"
