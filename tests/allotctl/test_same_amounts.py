"""``same_amount``: amounts compared by value the way the coordinator stores them, so that
``apply`` writes a quota or deployment again only when it means something else."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allotctl.same_amounts import same_amount, same_amounts
from shared.quantity import exact_decimal


@pytest.mark.parametrize(
    ("resource", "mine", "theirs", "same"),
    [
        ("cpu", "500m", "0.5", True),
        ("cpu", 2, "2", True),
        ("cpu", 1.5, "1.5", True),
        ("cpu", "1.7", "1.75", False),
        ("cpu_limit", "250m", "0.25", True),
        ("memory", "1Gi", 1073741824, True),
        ("memory", "1G", 1073741824, False),
        ("memory_limit", "64Mi", 67108864, True),
        ("nvidia.com/gpu", "2", 2, True),
        ("cpu", "x", "x", True),  # the same text, though no amount
        ("cpu", "x", "0.5", False),
        ("cpu", None, "0.5", False),
        ("cpu", True, 1, False),  # a boolean is no amount
    ],
)
def test_same_amount(resource: str, mine: object, theirs: object, same: bool) -> None:
    assert same_amount(resource, mine, theirs) is same


@given(st.integers(min_value=0, max_value=10**6))
def test_millicores_are_their_decimal(millicores: int) -> None:
    decimal = exact_decimal(Fraction(millicores, 1000))
    assert decimal is not None
    assert same_amount("cpu", f"{millicores}m", decimal)
    assert not same_amount("cpu", f"{millicores + 1}m", decimal)


@given(st.integers(min_value=0, max_value=2**20), st.sampled_from(["Ki", "Mi", "Gi"]))
def test_binary_memory_is_its_bytes(count: int, suffix: str) -> None:
    scale = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}[suffix]
    assert same_amount("memory", f"{count}{suffix}", count * scale)
    assert not same_amount("memory", f"{count}{suffix}", count * scale + 1)


def test_maps_need_the_same_resources() -> None:
    assert same_amounts({"cpu": "1", "memory": "1Ki"}, {"memory": 1024, "cpu": "1"})
    assert not same_amounts({"cpu": "1"}, {"cpu": "1", "memory": 0})
    assert not same_amounts({"cpu": "1"}, {"cpu": "2"})
