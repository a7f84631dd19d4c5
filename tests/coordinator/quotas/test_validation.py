"""Validation (spec section 3): every rule by its code and HTTP status, every offending
item listed, format rules before conflicts, updates; and the stored (canonical) form."""

from __future__ import annotations

from fractions import Fraction

import msgspec
import pytest

from coordinator.quotas import Quota, QuotaError, canonical_quota, parse_quota, validate_quotas
from tests.coordinator.quotas.states import unchanged

EQ_A = Quota("a", ["team-a"], {"gpu-memory": 40})
CEQ_X = Quota("x", ["team-x", "team-y"], {"cpu": "4"}, composite=True)
STORED = [EQ_A, CEQ_X]

# (the quota being written, code, status, offending items)
REFUSED = [
    pytest.param(Quota("A", ["team-b"], {}), "invalid_name", 422, 1, id="upper-case-name"),
    pytest.param(Quota("a" * 64, ["team-b"], {}), "invalid_name", 422, 1, id="name-too-long"),
    pytest.param(Quota("b", ["-x", "y_", "ok"], {}), "invalid_name", 422, 2, id="bad-namespaces"),
    pytest.param(
        Quota("b", [], {}, composite=True), "empty_namespaces", 422, 1, id="ceq-no-namespace"
    ),
    pytest.param(Quota("b", [], {}), "empty_namespaces", 422, 1, id="eq-no-namespace"),
    pytest.param(
        Quota("b", ["n1", "n2", "n1", "n2"], {}), "duplicate_namespace", 422, 2, id="duplicates"
    ),
    pytest.param(
        Quota("b", ["n1", "n2"], {}, composite=False),
        "too_many_namespaces",
        422,
        1,
        id="eq-two-namespaces",
    ),
    pytest.param(
        Quota("b", ["team-b"], {"pods": 1}, {"ephemeral-storage": 1}),
        "invalid_resource_name",
        422,
        2,
        id="bare-names-in-min-and-max",
    ),
    pytest.param(
        Quota("b", ["team-b"], {"nvidia.com/mig-2g.20gbx": 1}),
        "malformed_mig_name",
        422,
        1,
        id="malformed-mig",
    ),
    pytest.param(
        Quota("b", ["team-b"], {"gpu-memory": "16Gi", "cpu": "0.001", "memory": -1}),
        "invalid_quantity",
        422,
        3,
        id="three-bad-quantities",
    ),
    pytest.param(
        Quota("b", ["team-b"], {"cpu": "2", "memory": "1Gi"}, {"cpu": "1.99", "memory": "1G"}),
        "max_below_min",
        422,
        2,
        id="max-below-min",
    ),
    pytest.param(
        Quota("a", ["team-b"], {}, composite=True), "quota_name_taken", 409, 1, id="name-taken"
    ),
    pytest.param(Quota("b", ["team-a"], {}), "namespace_has_elasticquota", 409, 1, id="second-eq"),
    pytest.param(
        Quota("b", ["team-a", "team-b"], {}),
        "namespace_has_elasticquota",
        409,
        1,
        id="ceq-over-eq-namespace",
    ),
    pytest.param(
        Quota("b", ["team-y"], {}), "namespace_in_composite", 409, 1, id="eq-in-composite"
    ),
    pytest.param(
        Quota("y", ["team-x", "team-y"], {}),
        "namespace_in_composite",
        409,
        2,
        id="second-composite",
    ),
    # format before conflicts: a bad quantity wins over a taken namespace
    pytest.param(
        Quota("b", ["team-a"], {"cpu": "x"}), "invalid_quantity", 422, 1, id="format-first"
    ),
    # rules in the table's order: a bad name wins over a bad quantity
    pytest.param(Quota("B", ["team-b"], {"cpu": "x"}), "invalid_name", 422, 1, id="name-first"),
]


@pytest.mark.parametrize(("new", "code", "status", "items"), REFUSED)
def test_refused(new: Quota, code: str, status: int, items: int) -> None:
    quotas = [*STORED, new]
    with unchanged(quotas), pytest.raises(QuotaError) as caught:
        validate_quotas(quotas)
    error = caught.value
    assert (error.code, error.status) == (code, status)
    assert len(error.details["items"]) == items  # type: ignore[arg-type]
    assert error.details["quota"] == new.name
    assert error.message.startswith(new.kind)
    msgspec.json.encode(error.details)  # the service can send the details as they are


ACCEPTED = [
    pytest.param(Quota("b", ["team-b"], {"gpu-memory": 10}), id="new-eq"),
    pytest.param(Quota("a", ["team-a"], {"gpu-memory": 50}, {"gpu-memory": 50}), id="update-eq"),
    pytest.param(Quota("x", ["team-x"], {}, composite=True), id="update-ceq-fewer-namespaces"),
    pytest.param(Quota("b", ["team-b"], {}), id="empty-min"),
    pytest.param(Quota("b", ["team-b"], {"cpu": 1}, {"cpu": 1}), id="max-equal-to-min"),
    pytest.param(Quota("b", ["team-b"], {"cpu": "2"}, {"memory": "1Gi"}), id="max-other-resource"),
    pytest.param(
        Quota(
            "b",
            ["team-b"],
            {"nvidia.com/mig-1g.10gb+me": 2, "example.com/fpga": 1, "memory": "1.5Gi"},
        ),
        id="every-kind-of-name",
    ),
]


@pytest.mark.parametrize("new", ACCEPTED)
def test_accepted(new: Quota) -> None:
    validate_quotas([*STORED, new])


def test_the_first_write_and_an_empty_set_are_valid() -> None:
    validate_quotas([])
    validate_quotas([EQ_A])


def test_the_kind_follows_the_namespace_count_unless_given() -> None:
    assert Quota("q", ["n"], {}).kind == "ElasticQuota"
    assert Quota("q", ["n", "m"], {}).kind == "CompositeElasticQuota"
    assert Quota("q", ["n"], {}, composite=True).kind == "CompositeElasticQuota"


def test_every_offending_item_is_listed_with_its_field() -> None:
    new = Quota("b", ["team-b"], {"gpu-memory": "16Gi"}, {"cpu": "-1", "memory": "0.5"})
    with unchanged(new), pytest.raises(QuotaError) as caught:
        validate_quotas([new])
    assert [item["field"] for item in caught.value.details["items"]] == [  # type: ignore[attr-defined]
        "min.gpu-memory",
        "max.cpu",
        "max.memory",
    ]


def test_canonical_form_and_its_json() -> None:
    quota = Quota(
        "team-a",
        ["team-a"],
        {"cpu": 1.7, "memory": "512Mi", "gpu-memory": "40", "nvidia.com/gpu": 2},
        {"cpu": "2500m"},
    )
    stored = canonical_quota(quota)
    assert msgspec.json.decode(msgspec.json.encode(stored)) == {
        "name": "team-a",
        "namespaces": ["team-a"],
        "min": {"cpu": "1.7", "memory": 536870912, "gpu-memory": 40, "nvidia.com/gpu": 2},
        "max": {"cpu": "2.5"},
        "composite": False,
    }
    decoded = msgspec.json.decode(msgspec.json.encode(stored), type=Quota)
    assert decoded == stored
    assert parse_quota(decoded) == parse_quota(quota)
    assert parse_quota(quota).min["cpu"] == Fraction(17, 10)


def test_canonical_refuses_what_validation_refuses() -> None:
    quota = Quota("b", ["team-b"], {"cpu": "0.001"})
    with unchanged(quota), pytest.raises(QuotaError) as caught:
        canonical_quota(quota)
    assert caught.value.code == "invalid_quantity"
