"""Used, the over-quota amount and the cluster-wide sums (spec sections 2, 4 and 7): one
computation, exact values, a CompositeElasticQuota counted once."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from coordinator.quotas import (
    Container,
    Quota,
    QuotaError,
    guaranteed_overquota,
    overquota_amount,
    total_min,
    total_unused_min,
    used,
)
from tests.coordinator.quotas.states import unchanged

# A composite over two namespaces and an ElasticQuota; 3 namespaces in all.
POOL = Quota("pool", ["ns1", "ns2"], {"gpu-memory": 40, "cpu": "2"})
SOLO = Quota("solo", ["ns3"], {"gpu-memory": 20})
STATE = [
    Container("a", "ns1", {"nvidia.com/gpu": 1, "cpu": "0.5"}, created=1.0),
    Container("b", "ns2", {"nvidia.com/mig-1g.5gb": 1, "memory": "1Gi"}, created=2.0),
    Container("c", "ns2", {"nvidia.com/gpu": 4}, created=3.0, running=False),  # pending
    Container("d", "elsewhere", {"nvidia.com/gpu": 8}, created=4.0),  # unmanaged
]


def test_used_counts_the_running_containers_of_every_namespace_once() -> None:
    with unchanged(POOL, STATE):
        got = used(POOL, STATE)
    assert got == {
        "gpu-memory": Fraction(21),
        "cpu": Fraction(1, 2),
        "nvidia.com/gpu": Fraction(1),
        "memory": Fraction(2**30),
        "nvidia.com/mig-1g.5gb": Fraction(1),
    }
    assert list(got)[:2] == ["gpu-memory", "cpu"]  # min's resources first
    assert all(type(v) is Fraction for v in got.values())
    assert used(SOLO, STATE) == {"gpu-memory": 0}  # min's resources even when unused


def test_a_composite_counts_once_in_cluster_wide_sums() -> None:
    # nos would count the pool's min once per namespace (80 + 20); allot counts quotas.
    assert total_min([POOL, SOLO]) == {"gpu-memory": 60, "cpu": 2}
    used_by = {"pool": used(POOL, STATE), "solo": used(SOLO, STATE)}
    assert total_unused_min([POOL, SOLO], used_by) == {"gpu-memory": 19 + 20, "cpu": Fraction(3, 2)}
    g = guaranteed_overquota([POOL, SOLO], used_by)
    assert g == {
        "pool": {"gpu-memory": Fraction(40 * 39, 60), "cpu": Fraction(3, 2)},
        "solo": {"gpu-memory": Fraction(20 * 39, 60), "cpu": Fraction(0)},
    }


def test_guaranteed_overquota_is_exact_for_any_resource() -> None:
    # Three equal mins of 1 core, 1 core unused: 1/3 of a core each, not 0.33 nor 0.
    quotas = [Quota(n, [n], {"cpu": "1"}) for n in ("x", "y", "z")]
    used_by: dict[str, dict[str, object]] = {"x": {"cpu": 1}, "y": {"cpu": Decimal("1.0")}, "z": {}}
    g = guaranteed_overquota(quotas, used_by)
    assert [g[n]["cpu"] for n in ("x", "y", "z")] == [Fraction(1, 3)] * 3


def test_no_min_anywhere_gives_no_share() -> None:
    quotas = [Quota("x", ["x"], {}), Quota("y", ["y"], {"cpu": 0})]
    assert guaranteed_overquota(quotas, {}) == {"x": {"cpu": 0}, "y": {"cpu": 0}}


OVER = [
    pytest.param(POOL, {"gpu-memory": 50, "cpu": 1}, {"gpu-memory": 10, "cpu": 0}, id="min-keys"),
    pytest.param(
        Quota("e", ["e"], {}),
        {"gpu-memory": 16, "cpu": 1},
        {"gpu-memory": 16, "cpu": 1},
        id="empty",
    ),
]


@pytest.mark.parametrize(("quota", "used_q", "expected"), OVER)
def test_overquota_amount(quota: Quota, used_q: dict[str, int], expected: dict[str, int]) -> None:
    assert overquota_amount(quota, used_q) == expected


def test_a_name_used_twice_in_a_set_is_refused() -> None:
    quotas = [SOLO, Quota("solo", ["other"], {})]
    with unchanged(quotas), pytest.raises(QuotaError) as caught:
        guaranteed_overquota(quotas, {})
    assert caught.value.code == "quota_name_taken"


def test_an_invalid_stored_request_names_the_container() -> None:
    state = [Container("bad", "ns1", {"nvidia.com/mig-1g10gb": 1})]
    with unchanged(state), pytest.raises(QuotaError) as caught:
        used(POOL, state)
    assert caught.value.code == "malformed_mig_name"
    assert "ns1/bad" in caught.value.message
