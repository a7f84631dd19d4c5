"""shared.resources: the resource vector and its exact integer arithmetic."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.quantity import Number, QuantityError
from shared.resources import ResourceVector, parse_amount

GiB = 1024**3

NAMES = st.sampled_from(("cpu", "memory", "gpu-memory", "nvidia.com/gpu", "a", "b"))
vectors = st.dictionaries(NAMES, st.integers(min_value=-1000, max_value=1000)).map(ResourceVector)
nonnegative_vectors = st.dictionaries(NAMES, st.integers(min_value=0, max_value=1000)).map(
    ResourceVector
)
PROPERTY = settings(max_examples=150)


def vec(**amounts: int) -> ResourceVector:
    """A vector from keyword amounts; ``gpu_memory`` stands for ``gpu-memory``."""
    return ResourceVector({name.replace("_", "-"): amount for name, amount in amounts.items()})


# --- construction ------------------------------------------------------------------------


def test_zero_amounts_are_dropped() -> None:
    vector = ResourceVector({"cpu": 0, "memory": 5, "a": 0})
    assert dict(vector) == {"memory": 5}
    assert len(vector) == 1
    assert "cpu" not in vector
    assert vector == ResourceVector({"memory": 5})


def test_empty_vector_from_none_and_from_empty_mapping() -> None:
    assert ResourceVector() == ResourceVector({}) == ResourceVector({"cpu": 0})
    assert len(ResourceVector()) == 0


def test_iteration_is_in_name_order() -> None:
    vector = ResourceVector({"memory": 1, "b": 2, "cpu": 3})
    assert list(vector) == ["b", "cpu", "memory"]


@pytest.mark.parametrize(
    "amount",
    [True, False, 1.5, 2.0, "3", None],
    ids=["true", "false", "float", "whole-float", "string", "none"],
)
def test_non_int_amounts_are_refused(amount: object) -> None:
    with pytest.raises(TypeError, match=r"^cpu: amount must be an int"):
        ResourceVector({"cpu": amount})  # type: ignore[dict-item]


def test_negative_amounts_are_allowed_in_a_difference_vector() -> None:
    vector = ResourceVector({"cpu": -5})
    assert vector["cpu"] == -5
    assert not vector.is_nonnegative()


def test_repr_shows_the_amounts() -> None:
    assert (
        repr(ResourceVector({"memory": 2, "cpu": 1})) == "ResourceVector({'cpu': 1, 'memory': 2})"
    )


# --- parse -------------------------------------------------------------------------------


def test_parse_mixed_quantities_uses_each_resources_unit() -> None:
    parsed = ResourceVector.parse(
        {"cpu": "1.5", "memory": "1Gi", "gpu-memory": 16, "nvidia.com/gpu": "2", "x": 0}
    )
    assert parsed == ResourceVector(
        {"cpu": 150, "memory": GiB, "gpu-memory": 16, "nvidia.com/gpu": 2}
    )


def test_parse_honours_share_base() -> None:
    assert ResourceVector.parse({"cpu": "0.001"}, share_base=1000) == vec(cpu=1)


def test_module_docstring_example() -> None:
    a = ResourceVector.parse({"cpu": "1.5", "memory": "1Gi"})
    b = ResourceVector({"cpu": 50})
    assert a + b == ResourceVector({"cpu": 200, "memory": 1073741824})
    assert b.fits_in(a)


@pytest.mark.parametrize(
    ("quantities", "resource", "reason"),
    [
        ({"cpu": "1Mi"}, "cpu", "is not cores"),
        ({"cpu": "0.001"}, "cpu", "finer than 1/100"),
        ({"memory": "512m"}, "memory", "is not bytes"),
        ({"gpu-memory": "16Gi"}, "gpu-memory", "whole number of GB"),
        ({"nvidia.com/gpu": "0.5"}, "nvidia.com/gpu", "whole number"),
        ({"cpu": "1", "example.com/fpga": -1}, "example.com/fpga", "negative"),
    ],
    ids=["cpu-suffix", "cpu-too-fine", "memory-milli", "gpu-memory-suffix", "count", "negative"],
)
def test_parse_error_names_the_resource(
    quantities: Mapping[str, Number], resource: str, reason: str
) -> None:
    with pytest.raises(QuantityError) as caught:
        ResourceVector.parse(quantities)
    assert caught.value.field == resource
    assert str(caught.value).startswith(f"{resource}: ")
    assert reason in caught.value.reason


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("cpu", "250m", 25),
        ("memory", "2Ki", 2048),
        ("gpu-memory", "40", 40),
        ("1g.10gb", 3, 3),
    ],
    ids=["cpu", "memory", "gpu-memory", "mig-profile"],
)
def test_parse_amount(name: str, value: Number, expected: int) -> None:
    assert parse_amount(name, value) == expected


# --- mapping access and equality ---------------------------------------------------------


def test_get_amount_is_zero_when_absent_but_indexing_raises() -> None:
    vector = vec(cpu=100)
    assert vector.get_amount("cpu") == 100
    assert vector.get_amount("memory") == 0
    with pytest.raises(KeyError):
        vector["memory"]


def test_equality_and_hash_ignore_zeros() -> None:
    with_zeros = ResourceVector({"cpu": 1, "memory": 0})
    without = ResourceVector({"cpu": 1})
    assert with_zeros == without
    assert hash(with_zeros) == hash(without)
    assert len({with_zeros, without}) == 1


def test_unequal_vectors() -> None:
    assert vec(cpu=1) != vec(cpu=2)
    assert vec(cpu=1) != vec(memory=1)
    assert vec(cpu=1) != {"cpu": 1}  # only vectors equal vectors


# --- arithmetic --------------------------------------------------------------------------


def test_add_and_subtract_over_different_keys() -> None:
    a = vec(cpu=100, memory=10)
    b = vec(memory=5, gpu_memory=8)
    assert a + b == vec(cpu=100, memory=15, gpu_memory=8)
    assert a - b == vec(cpu=100, memory=5, gpu_memory=-8)


def test_subtract_to_zero_drops_the_key() -> None:
    assert dict(vec(cpu=100, memory=5) - vec(cpu=100)) == {"memory": 5}


def test_unary_minus() -> None:
    assert -vec(cpu=3, memory=-4) == vec(cpu=-3, memory=4)
    assert -ResourceVector() == ResourceVector()


def test_multiply_by_int_on_either_side() -> None:
    a = vec(cpu=3, memory=4)
    assert a * 3 == 3 * a == vec(cpu=9, memory=12)
    assert a * 0 == ResourceVector()
    assert a * -1 == -a


@pytest.mark.parametrize(
    "factor", [1.5, 2.0, True, "2"], ids=["float", "whole-float", "bool", "string"]
)
def test_multiply_by_non_int_is_a_type_error(factor: Any) -> None:
    a = vec(cpu=3)
    with pytest.raises(TypeError):
        a * factor
    with pytest.raises(TypeError):
        factor * a


def test_fits_in() -> None:
    small = vec(cpu=100, memory=5)
    big = vec(cpu=200, memory=5, gpu_memory=1)
    assert small.fits_in(big)
    assert not big.fits_in(small)
    assert ResourceVector().fits_in(small)
    assert not vec(a=1).fits_in(big)  # missing in big means zero there
    assert vec(cpu=-5).fits_in(ResourceVector())  # a negative amount fits in nothing


@pytest.mark.parametrize(
    ("vector", "expected"),
    [
        (ResourceVector(), True),
        (vec(cpu=1, memory=2), True),
        (vec(cpu=1, memory=-2), False),
        (vec(cpu=-1), False),
    ],
    ids=["empty", "positive", "one-negative", "all-negative"],
)
def test_is_nonnegative(vector: ResourceVector, expected: bool) -> None:
    assert vector.is_nonnegative() is expected


# --- properties --------------------------------------------------------------------------


@PROPERTY
@given(vectors, vectors)
def test_addition_commutes(a: ResourceVector, b: ResourceVector) -> None:
    assert a + b == b + a


@PROPERTY
@given(vectors, vectors, vectors)
def test_addition_associates(a: ResourceVector, b: ResourceVector, c: ResourceVector) -> None:
    assert (a + b) + c == a + (b + c)


@PROPERTY
@given(vectors)
def test_self_difference_is_empty(a: ResourceVector) -> None:
    assert a - a == ResourceVector()
    assert len(a - a) == 0


@PROPERTY
@given(vectors, vectors)
def test_subtraction_undoes_addition(a: ResourceVector, b: ResourceVector) -> None:
    assert a + b - b == a
    assert a - b == a + -b


@PROPERTY
@given(vectors, nonnegative_vectors)
def test_a_fits_in_a_plus_nonnegative(a: ResourceVector, b: ResourceVector) -> None:
    assert b.is_nonnegative()
    assert a.fits_in(a + b)


@PROPERTY
@given(vectors)
def test_fits_in_is_reflexive(a: ResourceVector) -> None:
    assert a.fits_in(a)


@PROPERTY
@given(vectors, nonnegative_vectors)
def test_fits_in_is_antisymmetric(a: ResourceVector, d: ResourceVector) -> None:
    # b is at least a; it fits back in a only when it adds nothing.
    b = a + d
    assert a.fits_in(b)
    assert b.fits_in(a) == (b == a) == (len(d) == 0)


@PROPERTY
@given(vectors, vectors)
def test_mutual_fit_means_equal(a: ResourceVector, b: ResourceVector) -> None:
    assert (a.fits_in(b) and b.fits_in(a)) == (a == b)


@PROPERTY
@given(vectors, nonnegative_vectors, nonnegative_vectors)
def test_fits_in_is_transitive(a: ResourceVector, d1: ResourceVector, d2: ResourceVector) -> None:
    # Build a chain a <= b <= c so the premise always holds.
    b = a + d1
    c = b + d2
    assert a.fits_in(b)
    assert b.fits_in(c)
    assert a.fits_in(c)


@PROPERTY
@given(vectors)
def test_doubling_is_adding_to_itself(a: ResourceVector) -> None:
    assert 2 * a == a + a == a * 2


@PROPERTY
@given(vectors, vectors)
def test_hash_is_consistent_with_equality(a: ResourceVector, b: ResourceVector) -> None:
    rebuilt = ResourceVector(dict(reversed(list(a.items()))) | {"zero": 0})
    assert rebuilt == a
    assert hash(rebuilt) == hash(a)
    if a == b:
        assert hash(a) == hash(b)


@PROPERTY
@given(vectors)
def test_fits_in_matches_nonnegative_difference(a: ResourceVector) -> None:
    assert a.fits_in(ResourceVector()) == (-a).is_nonnegative()
