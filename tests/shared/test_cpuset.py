"""shared.cpuset: the kernel's CPU list format, parsed and printed in one place."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.cpuset import CpuSet, CpuSetError, docker_cpuset

cpu_ids = st.frozensets(st.integers(min_value=0, max_value=4096), max_size=200)
# Runs of consecutive ids, so ranges appear far more often than with scattered ids.
runs = st.lists(
    st.tuples(st.integers(min_value=0, max_value=4000), st.integers(min_value=0, max_value=96)),
    max_size=8,
).map(lambda spans: frozenset(i for start, length in spans for i in range(start, start + length)))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0-3,8", {0, 1, 2, 3, 8}),
        ("8,0-3", {0, 1, 2, 3, 8}),
        ("5", {5}),
        ("2-2", {2}),
        ("", set()),
        ("   ", set()),
        ("\n", set()),
        ("0-3\n", {0, 1, 2, 3}),
        ("  1,3  ", {1, 3}),
        ("1, 3", {1, 3}),
        ("0-2,1-4", {0, 1, 2, 3, 4}),
        ("007", {7}),
    ],
    ids=[
        "range-and-single",
        "unordered",
        "single",
        "one-long-range",
        "empty",
        "blank",
        "newline-only",
        "sysfs-trailing-newline",
        "outer-spaces",
        "space-after-comma",
        "overlapping",
        "leading-zeros",
    ],
)
def test_parse(text: str, expected: set[int]) -> None:
    assert set(CpuSet.parse(text)) == expected


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("1-", "is not a CPU list"),
        ("a", "is not a CPU list"),
        ("1,,2", "is not a CPU list"),
        ("-1", "is not a CPU list"),
        ("1 2", "is not a CPU list"),
        ("1,", "is not a CPU list"),
        ("0-3:2", "is not a CPU list"),
        ("3-1", "descending range '3-1'"),
        ("0-4000000000", "names CPU 4000000000, above 65535"),
        ("\u0663", "is not a CPU list"),
    ],
    ids=[
        "open-range",
        "letter",
        "empty-item",
        "negative",
        "space-separated",
        "trailing-comma",
        "stride",
        "descending",
        "beyond-any-kernel",
        "arabic-indic-digit",
    ],
)
def test_parse_refuses(text: str, complaint: str) -> None:
    with pytest.raises(CpuSetError) as caught:
        CpuSet.parse(text)
    assert complaint in str(caught.value)
    assert repr(text) in str(caught.value)


def test_cpuset_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a CPU list"):
        CpuSet.parse("x")


@pytest.mark.parametrize(
    ("ids", "text"),
    [
        ([], ""),
        ([4], "4"),
        ([0, 1, 2, 3, 8], "0-3,8"),
        ([8, 3, 2, 1, 0], "0-3,8"),
        ([1, 3, 5], "1,3,5"),
        ([0, 1, 3, 4], "0-1,3-4"),
        ([10, 11, 12, 2], "2,10-12"),
    ],
    ids=["empty", "single", "range-and-single", "unsorted", "scattered", "pairs", "numeric-sort"],
)
def test_str_is_canonical(ids: list[int], text: str) -> None:
    cpus = CpuSet(ids)
    assert str(cpus) == text
    assert repr(cpus) == f"CpuSet({text!r})"


def test_negative_ids_are_refused() -> None:
    with pytest.raises(CpuSetError, match="non-negative"):
        CpuSet([0, -1])


def test_set_operations() -> None:
    a = CpuSet.parse("0-5")
    b = CpuSet.parse("4-7")
    assert a | b == CpuSet.parse("0-7")
    assert a & b == CpuSet.parse("4-5")
    assert a - b == CpuSet.parse("0-3")
    assert b - a == CpuSet.parse("6-7")
    assert str(CpuSet.parse("8,0-3") - CpuSet.parse("2")) == "0-1,3,8"


def test_subset_membership_and_length() -> None:
    cpus = CpuSet.parse("0-3,8")
    assert len(cpus) == 5
    assert 8 in cpus
    assert 4 not in cpus
    assert "8" not in cpus
    assert CpuSet.parse("1-2").issubset(cpus)
    assert cpus.issubset(cpus)
    assert not cpus.issubset(CpuSet.parse("0-3"))
    assert CpuSet().issubset(CpuSet())


def test_iteration_is_ascending() -> None:
    assert list(CpuSet([9, 3, 100, 0, 4])) == [0, 3, 4, 9, 100]


def test_equality_and_hash() -> None:
    assert CpuSet.parse("0-2") == CpuSet([2, 1, 0])
    assert hash(CpuSet.parse("0-2")) == hash(CpuSet([0, 1, 2]))
    assert CpuSet.parse("0-2") != CpuSet.parse("0-3")
    assert CpuSet([1]) != frozenset({1})
    assert len({CpuSet.parse("1,2"), CpuSet.parse("1-2")}) == 1


def test_operations_do_not_change_their_operands() -> None:
    a = CpuSet.parse("0-3")
    b = CpuSet.parse("2")
    _ = a - b, a | b, a & b
    assert str(a) == "0-3"
    assert str(b) == "2"


# --- properties --------------------------------------------------------------------------


@settings(max_examples=200)
@given(st.one_of(cpu_ids, runs))
def test_str_parse_round_trip(ids: frozenset[int]) -> None:
    cpus = CpuSet(ids)
    assert CpuSet.parse(str(cpus)) == cpus
    assert set(CpuSet.parse(str(cpus))) == ids


@settings(max_examples=200)
@given(st.one_of(cpu_ids, runs))
def test_str_is_sorted_merged_ranges(ids: frozenset[int]) -> None:
    text = str(CpuSet(ids))
    parts = text.split(",") if text else []
    spans: list[tuple[int, int]] = []
    for part in parts:
        first, dash, last = part.partition("-")
        spans.append((int(first), int(last) if dash else int(first)))
        if dash:
            assert int(first) < int(last)  # a single id is never written as "n-n"
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end + 1 < start  # sorted, and adjacent runs would have been merged
    assert {i for first, last in spans for i in range(first, last + 1)} == ids


@settings(max_examples=100)
@given(cpu_ids, cpu_ids)
def test_set_operations_agree_with_frozenset(a: frozenset[int], b: frozenset[int]) -> None:
    x, y = CpuSet(a), CpuSet(b)
    assert set(x | y) == a | b
    assert set(x & y) == a & b
    assert set(x - y) == a - b
    assert x.issubset(y) == (a <= b)
    assert list(x) == sorted(a)


@pytest.mark.parametrize(
    ("cpus", "text"),
    [
        (CpuSet([3, 0, 2]), "0,2,3"),
        ([5, 3], "3,5"),
        (CpuSet([5]), "5"),
        (CpuSet(range(4)), "0,1,2,3"),
        (CpuSet(), ""),
    ],
)
def test_docker_cpuset_joins_ascending_ids_with_commas(cpus: Iterable[int], text: str) -> None:
    assert docker_cpuset(cpus) == text


@settings(max_examples=200)
@given(st.frozensets(st.integers(0, 300), max_size=40))
def test_docker_cpuset_reads_back_as_the_same_cpus(ids: frozenset[int]) -> None:
    text = docker_cpuset(CpuSet(ids))
    assert CpuSet.parse(text) == CpuSet(ids)
    assert [int(part) for part in text.split(",") if part] == sorted(ids)
