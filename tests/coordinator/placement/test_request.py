"""Request normalisation (spec sections 3 and 4): the ten steps in order, exact parsing,
and every rejection naming its field."""

from __future__ import annotations

import pytest

from coordinator.placement import (
    MIN_MEMORY,
    MiB,
    Normalized,
    PlacementError,
    Request,
    Resources,
    normalize,
)
from coordinator.placement.request import signed_cpu, signed_memory

GiB = 1024 * MiB

# (resources, share_base, expected) -- one row per rule that changes something.
NORMALIZED = [
    pytest.param(
        Resources(cpu_request="1.7", memory_request="512Mi", cpu_bind=True),
        100,
        Normalized(170, 0, 512 * MiB, 0, True, False, 100),
        id="parsed-exactly",
    ),
    pytest.param(
        Resources(cpu_limit="2", memory_request=GiB),
        100,
        Normalized(200, 200, GiB, 0, False, False, 100),
        id="step1-request-from-limit",
    ),
    pytest.param(
        Resources(cpu_request=1, memory_limit="1Gi"),
        100,
        Normalized(100, 0, GiB, GiB, False, False, 100),
        id="step4-memory-request-from-limit",
    ),
    pytest.param(
        Resources(cpu_request=1, memory_request=GiB, memory_limit=512 * MiB),
        100,
        Normalized(100, 0, GiB, GiB, False, False, 100),
        id="step5-memory-limit-raised",
    ),
    pytest.param(
        Resources(cpu_request="2", cpu_limit="1", memory_request=GiB),
        100,
        Normalized(200, 200, GiB, 0, False, False, 100),
        id="step6-cpu-limit-raised",
    ),
    pytest.param(
        Resources(cpu_request="1", cpu_limit="1.5", cpu_bind=True),
        100,
        Normalized(150, 150, 0, 0, True, False, 100),
        id="step7-bound-reserves-limit",
    ),
    pytest.param(
        Resources(cpu_request="0.001", memory_request=GiB, cpu_bind=True),
        1000,
        Normalized(1, 0, GiB, 0, True, False, 1000),
        id="one-piece-of-1000",
    ),
    pytest.param(
        Resources(cpu_request=1.7, memory_request=GiB, soft_memory=True, cpu_bind=True),
        100,
        Normalized(170, 0, GiB, 0, True, True, 100),
        id="float-as-its-decimal",
    ),
    pytest.param(
        Resources(cpu_request="500m", memory_request=GiB),
        100,
        Normalized(50, 0, GiB, 0, False, False, 100),
        id="millicores",
    ),
]


@pytest.mark.parametrize(("resources", "share_base", "expected"), NORMALIZED)
def test_normalize(resources: Resources, share_base: int, expected: Normalized) -> None:
    assert normalize(resources, share_base) == expected


# (resources, share_base, the field the error names)
REJECTED = [
    pytest.param(Resources(cpu_request="0", cpu_bind=True), 100, "cpu_request", id="bind-zero-cpu"),
    pytest.param(
        Resources(cpu_bind=True, memory_request=GiB), 100, "cpu_request", id="bind-no-cpu"
    ),
    pytest.param(
        Resources(cpu_request="0.001", cpu_bind=True), 100, "cpu_request", id="finer-than-a-piece"
    ),
    pytest.param(Resources(cpu_request="-1", memory_request=GiB), 100, "cpu_request", id="neg-cpu"),
    pytest.param(
        Resources(cpu_request=1, memory_request=-1), 100, "memory_request", id="neg-memory"
    ),
    pytest.param(
        Resources(cpu_request=1, memory_limit="-5Mi", memory_request=GiB),
        100,
        "memory_limit",
        id="neg-memory-limit",
    ),
    pytest.param(
        Resources(cpu_request=1, memory_request=MIN_MEMORY - 1),
        100,
        "memory_request",
        id="below-6Mi",
    ),
    pytest.param(
        Resources(cpu_request=1, cpu_bind=True, memory_limit="5Mi"),
        100,
        "memory_request",
        id="limit-below-6Mi-becomes-request",
    ),
    pytest.param(Resources(cpu_request=1), 100, "memory_request", id="memory-mode-no-memory"),
    pytest.param(
        Resources(cpu_request="0.005", cpu_limit="0.005", memory_request=GiB),
        1000,
        "cpu_limit",
        id="memory-mode-quota-under-1ms",
    ),
    pytest.param(
        Resources(cpu_request=1, memory_request=GiB, cpu_bind=1),  # type: ignore[arg-type]
        100,
        "cpu_bind",
        id="flag-int",
    ),
    pytest.param(
        Resources(cpu_request=1, memory_request=GiB, soft_memory="yes"),  # type: ignore[arg-type]
        100,
        "soft_memory",
        id="flag-string",
    ),
    pytest.param(
        Resources(cpu_request="abc", memory_request=GiB), 100, "cpu_request", id="malformed"
    ),
    pytest.param(
        Resources(cpu_request=float("nan"), memory_request=GiB), 100, "cpu_request", id="nan"
    ),
    pytest.param(Resources(cpu_limit=float("inf"), memory_request=GiB), 100, "cpu_limit", id="inf"),
    pytest.param(
        Resources(cpu_request=1, memory_request="12XB"), 100, "memory_request", id="bad-unit"
    ),
    pytest.param(
        Resources(cpu_request=1, memory_request="0.5"), 100, "memory_request", id="half-byte"
    ),
    pytest.param(
        Resources(cpu_request=True, memory_request=GiB), 100, "cpu_request", id="bool-cpu"
    ),
]


@pytest.mark.parametrize(("resources", "share_base", "field"), REJECTED)
def test_normalize_rejects(resources: Resources, share_base: int, field: str) -> None:
    with pytest.raises(PlacementError) as caught:
        normalize(resources, share_base)
    assert caught.value.kind == "invalid_request"
    assert caught.value.details["field"] == field
    assert field in caught.value.message
    assert caught.value.details["rule"]


def test_steps_apply_in_order() -> None:
    # Step 1 before step 3: a bound container with only a limit takes the limit.
    assert normalize(Resources(cpu_limit="1.5", cpu_bind=True)).cpu_request == 150
    # Step 6 then 7: a limit below the request is raised, so the bound request stays.
    assert normalize(Resources(cpu_request="2", cpu_limit="1", cpu_bind=True)) == Normalized(
        200, 200, 0, 0, True, False, 100
    )
    # Step 10 looks at the limit after step 6: a tiny request with no limit is allowed.
    assert normalize(Resources(cpu_request="0.005", memory_request=GiB), 1000).cpu_limit == 0


@pytest.mark.parametrize(
    ("request_args", "field"),
    [
        pytest.param(("1", 5 * MiB, True), "memory", id="below-6Mi"),
        pytest.param(("1", 0, False), "memory", id="memory-mode-no-memory"),
        pytest.param(("1", -1, True), "memory", id="negative-memory"),
        pytest.param(("1", 0, 1), "cpu_bind", id="flag-int"),
        pytest.param((True, 0, True), "cpu", id="bool-cpu"),
    ],
)
def test_request_rejects_when_built(
    request_args: tuple[object, object, object], field: str
) -> None:
    with pytest.raises(PlacementError) as caught:
        Request(*request_args)  # type: ignore[arg-type]
    assert caught.value.kind == "invalid_request"
    assert caught.value.details["field"] == field


@pytest.mark.parametrize(
    ("request_", "share_base", "field"),
    [
        pytest.param(Request("0.001", cpu_bind=True), 100, "cpu_request", id="finer-than-a-piece"),
        pytest.param(Request("0", cpu_bind=True), 100, "cpu_request", id="bind-zero"),
        pytest.param(Request("0.005", GiB), 1000, "cpu_limit", id="memory-mode-quota-under-1ms"),
        pytest.param(Request("1.x", GiB), 100, "cpu_request", id="malformed"),
    ],
)
def test_request_rejects_when_used(request_: Request, share_base: int, field: str) -> None:
    with pytest.raises(PlacementError) as caught:
        request_.normalized(share_base)
    assert caught.value.kind == "invalid_request"
    assert caught.value.details["field"] == field


def test_request_is_request_and_limit() -> None:
    assert Request("1.7", "512Mi", cpu_bind=True).memory == 512 * MiB
    assert Request("1.7", 512 * MiB, cpu_bind=True).normalized(100) == Normalized(
        170, 170, 512 * MiB, 512 * MiB, True, False, 100
    )
    assert Request(2, GiB).normalized(1000) == Normalized(2000, 2000, GiB, GiB, False, False, 1000)


@pytest.mark.parametrize(
    ("value", "pieces"),
    [("-0.5", -50), ("0.5", 50), ("+0.5", 50), (-1, -100), (1.5, 150), ("0", 0)],
    ids=["neg-str", "pos-str", "plus-str", "neg-int", "float", "zero"],
)
def test_signed_cpu(value: object, pieces: int) -> None:
    assert signed_cpu(value, field="cpu", share_base=100) == pieces


@pytest.mark.parametrize(
    ("value", "amount"),
    [("-512Mi", -512 * MiB), ("1Gi", GiB), ("+32Mi", 32 * MiB), (-1024, -1024)],
    ids=["neg-str", "pos-str", "plus-str", "neg-int"],
)
def test_signed_memory(value: object, amount: int) -> None:
    assert signed_memory(value, field="memory") == amount


def test_signed_rejects_garbage() -> None:
    with pytest.raises(PlacementError) as caught:
        signed_cpu("--1", field="cpu", share_base=100)
    assert caught.value.kind == "invalid_request"
    for twice in ("+-1", "-+1", "++1"):
        with pytest.raises(PlacementError):
            signed_cpu(twice, field="cpu", share_base=100)
    with pytest.raises(PlacementError):
        signed_memory("-x", field="memory")
