"""The seed's preemption example, step by step (spec section 7.1), continued to a6 and c1.

A, B, C: min 40, 10, 30 GB of GPU memory, no max; one node n1 of 80 GB; every container
asks for 10 GB (one 1g.10gb MIG device) with priority 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from coordinator.quotas import (
    Container,
    admit,
    guaranteed_overquota,
    label_containers,
    overquota_amount,
    plan_preemption,
    preemption_victims,
    total_min,
    total_unused_min,
    used,
)
from tests.coordinator.quotas.states import (
    NODE_FULL,
    SEED_A,
    SEED_A5,
    SEED_A6,
    SEED_B,
    SEED_C,
    SEED_C1,
    SEED_QUOTAS,
    SEED_T1,
    unchanged,
)

T_A5 = 1000.0  # when a5 preempts b4 (the coordinator's clock)
T2 = [*[c for c in SEED_T1 if c.name != "b4"], SEED_A5]  # after the preemption


def used_by_quota(containers: Sequence[Container]) -> dict[str, dict[str, Fraction]]:
    return {q.name: {r: Fraction(v) for r, v in used(q, containers).items()} for q in SEED_QUOTAS}


def test_t1_usage_and_labels() -> None:
    # A uses 40/40, all in-quota; B uses 40/10: b1 in-quota, b2-b4 borrow 30 GB; C uses 0.
    assert used_by_quota(SEED_T1) == {
        "a": {"gpu-memory": 40, "nvidia.com/mig-1g.10gb": 4},
        "b": {"gpu-memory": 40, "nvidia.com/mig-1g.10gb": 4},
        "c": {"gpu-memory": 0},
    }
    assert set(label_containers(SEED_A, SEED_T1).values()) == {"in-quota"}
    assert label_containers(SEED_B, SEED_T1) == {
        "team-b/b1": "in-quota",
        "team-b/b2": "over-quota",
        "team-b/b3": "over-quota",
        "team-b/b4": "over-quota",
    }
    assert overquota_amount(SEED_B, used(SEED_B, SEED_T1)) == {"gpu-memory": 30}
    assert total_min(SEED_QUOTAS) == {"gpu-memory": 80}


def test_step1_a5_is_admitted_over_quota() -> None:
    # A has no max: a5 is admitted; it would sort after a1-a4, beyond A's min.
    decision = admit(SEED_QUOTAS, SEED_T1, SEED_A5)
    assert (decision.admitted, decision.capacity, decision.quota) == (True, "over-quota", "a")


def test_step2_guaranteed_overquota() -> None:
    # unused = 0 + 0 + 30 = 30; g_A = 40/80 * 30 = 15; g_B = 10/80 * 30 = 3.75 (the seed's
    # 3 is this floored; allot never floors); g_C = 30/80 * 30 = 11.25.
    usage = used_by_quota(SEED_T1)
    assert total_unused_min(SEED_QUOTAS, usage) == {"gpu-memory": 30}
    g = guaranteed_overquota(SEED_QUOTAS, usage)
    assert g == {
        "a": {"gpu-memory": Fraction(15)},
        "b": {"gpu-memory": Fraction(15, 4)},
        "c": {"gpu-memory": Fraction(45, 4)},
    }
    assert math.floor(g["b"]["gpu-memory"]) == 3  # the seed's figure
    assert sum(q["gpu-memory"] for q in g.values()) == 30


def test_steps3_to_5_b4_is_the_victim() -> None:
    # within_min fails (50 > 40), so R2; (a) holds: 50 <= 40 + 15. The candidates, newest
    # first, are b4, b3, b2; B's 40 > 10 + 3.75, so b4 is taken and a5 fits.
    with unchanged(SEED_QUOTAS, SEED_T1, SEED_A5, NODE_FULL):
        plan = plan_preemption(SEED_QUOTAS, SEED_T1, SEED_A5, NODE_FULL, now=T_A5)
    assert plan.rule == "R2"
    assert plan.victims == ["team-b/b4"]
    assert plan.records(T_A5) == [{"at": T_A5, "preemptor_quota": "a", "victim_quota": "b"}]
    assert preemption_victims(SEED_QUOTAS, SEED_T1, SEED_A5, NODE_FULL) == ["team-b/b4"]


def test_the_free_map_may_name_the_device_instead() -> None:
    free = {"nvidia.com/mig-1g.10gb": 0}
    assert preemption_victims(SEED_QUOTAS, SEED_T1, SEED_A5, free) == ["team-b/b4"]


def test_t2_usage_and_labels() -> None:
    # The seed's table at t2: A 50/40 (a5 over-quota), B 30/10 (over by 20), C 0.
    assert {q: u["gpu-memory"] for q, u in used_by_quota(T2).items()} == {
        "a": 50,
        "b": 30,
        "c": 0,
    }
    assert label_containers(SEED_A, T2)["team-a/a5"] == "over-quota"
    assert label_containers(SEED_B, T2) == {
        "team-b/b1": "in-quota",
        "team-b/b2": "over-quota",
        "team-b/b3": "over-quota",
    }
    assert overquota_amount(SEED_B, used(SEED_B, T2)) == {"gpu-memory": 20}
    assert overquota_amount(SEED_C, used(SEED_C, T2)) == {"gpu-memory": 0}
    # unused is still 30 (C's min), so g is unchanged: A 15, B 3.75.
    g = guaranteed_overquota(SEED_QUOTAS, used_by_quota(T2))
    assert (g["a"]["gpu-memory"], g["b"]["gpu-memory"]) == (Fraction(15), Fraction(15, 4))


def test_step6_a6_preempts_nothing() -> None:
    # 50 + 10 = 60 > 40 + 15: R2(a) fails. a6 is still admitted (no max) and waits.
    assert admit(SEED_QUOTAS, T2, SEED_A6).capacity == "over-quota"
    with unchanged(SEED_QUOTAS, T2, SEED_A6):
        plan = plan_preemption(SEED_QUOTAS, T2, SEED_A6, NODE_FULL)
    assert plan.victims is None
    assert plan.rule == "R2"
    assert "R2(a) fails" in plan.reason
    assert "60 vs 55" in plan.reason


def test_step7_c1_reclaims_from_a5() -> None:
    # 0 + 10 <= 30: R1. Candidates a5 (A 50 > 40), b3, b2 (B 30 > 10); a5 is the newest.
    # The A -> B record of a5's preemption does not protect A from C.
    recent = [{"at": T_A5, "preemptor_quota": "a", "victim_quota": "b"}]
    assert admit(SEED_QUOTAS, T2, SEED_C1).capacity == "in-quota"
    plan = plan_preemption(SEED_QUOTAS, T2, SEED_C1, NODE_FULL, now=T_A5 + 1, recent=recent)
    assert (plan.rule, plan.victims) == ("R1", ["team-a/a5"])
    assert plan.records(T_A5 + 1) == [{"at": T_A5 + 1, "preemptor_quota": "c", "victim_quota": "a"}]


def test_after_step7_the_labels_of_a_are_all_in_quota() -> None:
    t3 = [*[c for c in T2 if c.name != "a5"], SEED_C1]
    assert set(label_containers(SEED_A, t3).values()) == {"in-quota"}
    assert label_containers(SEED_C, t3) == {"team-c/c1": "in-quota"}
