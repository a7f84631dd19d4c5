"""GPU memory of a request (spec section 9), resource names and exact quantities
(section 2), and the JSON form of amounts."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

from coordinator.quotas import QuotaError, encode_amounts, format_amount, gpu_memory_gb
from coordinator.quotas.resources import parse_amount, parse_request
from shared.quantity import QuantityError
from shared.resource_names import resource_name_problem
from tests.coordinator.quotas.states import unchanged


def test_seed_gpu_memory_example() -> None:
    # The seed's pod: one 1g.10gb MIG device and two whole GPUs at 16 GB: 10 + 16 * 2.
    assert gpu_memory_gb({"nvidia.com/mig-1g.10gb": 1, "nvidia.com/gpu": 2}) == 42


GPU_MEMORY = [
    pytest.param({}, 16, 0, id="nothing"),
    pytest.param({"cpu": "1.5", "memory": "512Mi"}, 16, 0, id="no-gpu"),
    pytest.param({"nvidia.com/gpu": 2}, 16, 32, id="two-gpus"),
    pytest.param({"nvidia.com/gpu": "3"}, 24, 72, id="configured-g"),
    pytest.param({"nvidia.com/gpu": 1}, 1, 1, id="g-of-1"),
    pytest.param({"nvidia.com/mig-3g.40gb": 2}, 16, 80, id="mig-count"),
    pytest.param({"nvidia.com/mig-1g.10gb+me": 1}, 16, 10, id="mig-media-extensions"),
    pytest.param(
        {"nvidia.com/mig-1g.5gb": 1, "nvidia.com/mig-2g.20gb": 1, "nvidia.com/gpu": 1},
        16,
        41,
        id="mixed",
    ),
    pytest.param({"nvidia.com/gpu.shared": 4}, 16, 0, id="other-nvidia-name"),
    pytest.param({"example.com/mig-1g.10gb": 1}, 16, 0, id="look-alike-other-domain"),
    pytest.param({"nvidia.com/gpu": 0}, 16, 0, id="zero-gpus"),
]


@pytest.mark.parametrize(("request_", "gb_per_gpu", "expected"), GPU_MEMORY)
def test_gpu_memory(request_: dict[str, Any], gb_per_gpu: int, expected: int) -> None:
    assert gpu_memory_gb(request_, gb_per_gpu) == expected


# (request, gb_per_gpu, code, number of offending items listed)
BAD_REQUESTS = [
    pytest.param({"nvidia.com/gpu": 1}, 0, "invalid_config", 0, id="g-zero"),
    pytest.param({"nvidia.com/gpu": 1}, -16, "invalid_config", 0, id="g-negative"),
    pytest.param({"nvidia.com/gpu": 1}, True, "invalid_config", 0, id="g-boolean"),
    pytest.param({"gpu-memory": 16}, 16, "gpu_memory_not_requestable", 1, id="gpu-memory"),
    pytest.param({"pods": 1, "ephemeral-storage": 1}, 16, "invalid_resource_name", 2, id="bare"),
    pytest.param({"Example.com/x": 1}, 16, "invalid_resource_name", 1, id="upper-domain"),
    pytest.param({"nvidia.com/mig-2g.20gbx": 1}, 16, "malformed_mig_name", 1, id="mig-suffix"),
    pytest.param({"nvidia.com/mig-1c.2g.20gb": 1}, 16, "malformed_mig_name", 1, id="mig-1c"),
    pytest.param({"nvidia.com/mig-3G.40GB": 1}, 16, "malformed_mig_name", 1, id="mig-upper"),
    pytest.param({"nvidia.com/mig-01g.10gb": 1}, 16, "malformed_mig_name", 1, id="mig-zero"),
    pytest.param({"nvidia.com/gpu": 1.5}, 16, "invalid_quantity", 1, id="half-gpu"),
    pytest.param({"nvidia.com/gpu": -1, "cpu": "x"}, 16, "invalid_quantity", 2, id="two-bad"),
    pytest.param({"cpu": "0.001"}, 16, "invalid_quantity", 1, id="finer-than-share"),
    pytest.param({"memory": "0.5"}, 16, "invalid_quantity", 1, id="half-byte"),
    pytest.param({"cpu": True}, 16, "invalid_quantity", 1, id="boolean"),
    pytest.param({"cpu": float("nan")}, 16, "invalid_quantity", 1, id="nan"),
    pytest.param({"cpu": ""}, 16, "invalid_quantity", 1, id="empty"),
    # a name rule is reported before a quantity rule, whatever the order written
    pytest.param({"cpu": "x", "pods": 1}, 16, "invalid_resource_name", 1, id="name-first"),
]


@pytest.mark.parametrize(("request_", "gb_per_gpu", "code", "items"), BAD_REQUESTS)
def test_bad_request_refused(
    request_: dict[str, Any], gb_per_gpu: int, code: str, items: int
) -> None:
    with unchanged(request_), pytest.raises(QuotaError) as caught:
        gpu_memory_gb(request_, gb_per_gpu)
    assert caught.value.code == code
    assert caught.value.status == (500 if code == "invalid_config" else 422)
    if items:
        assert len(caught.value.details["items"]) == items  # type: ignore[arg-type]


def test_the_request_keeps_its_resources_and_gains_gpu_memory() -> None:
    parsed = parse_request({"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 1})
    assert parsed == {
        "cpu": Fraction(1, 2),
        "memory": Fraction(2**30),
        "nvidia.com/gpu": Fraction(1),
        "gpu-memory": Fraction(16),
    }
    assert all(type(v) is Fraction for v in parsed.values())


NAMES = [
    pytest.param("cpu", None, id="cpu"),
    pytest.param("memory", None, id="memory"),
    pytest.param("gpu-memory", None, id="gpu-memory"),
    pytest.param("nvidia.com/gpu", None, id="nvidia-gpu"),
    pytest.param("nvidia.com/mig-7g.80gb", None, id="mig"),
    pytest.param("nvidia.com/mig-1g.10gb+me", None, id="mig-me"),
    pytest.param("example.com/Fancy_Thing.v2", None, id="extended"),
    pytest.param("pods", "invalid_resource_name", id="bare-pods"),
    pytest.param("a/b/c", "invalid_resource_name", id="two-slashes"),
    pytest.param("/x", "invalid_resource_name", id="empty-domain"),
    pytest.param("example.com/", "invalid_resource_name", id="empty-name"),
    pytest.param("example.com/-x", "invalid_resource_name", id="name-dash"),
    pytest.param("example.com/" + "x" * 64, "invalid_resource_name", id="name-too-long"),
    pytest.param("nvidia.com/mig-1g.10gb+mex", "malformed_mig_name", id="mig-bad-extension"),
    pytest.param("nvidia.com/mig-", "malformed_mig_name", id="mig-empty"),
]


@pytest.mark.parametrize(("name", "problem"), NAMES)
def test_resource_names(name: str, problem: str | None) -> None:
    assert resource_name_problem(name) == problem


QUANTITIES = [
    pytest.param("cpu", "1.7", Fraction(17, 10), id="cpu-decimal"),
    pytest.param("cpu", "500m", Fraction(1, 2), id="cpu-milli"),
    pytest.param("cpu", 2, Fraction(2), id="cpu-int"),
    pytest.param("cpu", 0.25, Fraction(1, 4), id="cpu-float-as-written"),
    pytest.param("cpu", Decimal("1.01"), Fraction(101, 100), id="cpu-decimal-object"),
    pytest.param("memory", "512Mi", Fraction(2**29), id="memory-binary"),
    pytest.param("memory", "1.5K", Fraction(1500), id="memory-decimal"),
    pytest.param("gpu-memory", 40, Fraction(40), id="gpu-memory"),
    pytest.param("nvidia.com/gpu", "2", Fraction(2), id="count-string"),
]


@pytest.mark.parametrize(("resource", "value", "expected"), QUANTITIES)
def test_quantities(resource: str, value: Any, expected: Fraction) -> None:
    assert parse_amount(resource, value) == expected


@pytest.mark.parametrize(
    ("resource", "value"),
    [
        pytest.param("gpu-memory", "16Gi", id="gpu-memory-suffix"),
        pytest.param("gpu-memory", 1.5, id="gpu-memory-fraction"),
        pytest.param("cpu", "-1", id="negative"),
        pytest.param("cpu", float("inf"), id="infinite"),
        pytest.param("example.com/x", "1k", id="count-suffix"),
    ],
)
def test_refused_quantities(resource: str, value: Any) -> None:
    with pytest.raises(QuantityError):
        parse_amount(resource, value)


def test_share_base_sets_the_cpu_step() -> None:
    assert parse_amount("cpu", "0.001", share_base=1000) == Fraction(1, 1000)
    with pytest.raises(QuantityError):
        parse_amount("cpu", "0.001", share_base=100)


AMOUNTS = [
    pytest.param("cpu", Fraction(17, 10), "1.7", id="cpu-decimal"),
    pytest.param("cpu", Fraction(2), "2", id="cpu-whole-is-a-string"),
    pytest.param("cpu", Fraction(2, 3), "2/3", id="cpu-share-without-decimal"),
    pytest.param("memory", Fraction(2**29), 2**29, id="memory-bytes"),
    pytest.param("gpu-memory", Fraction(15, 4), "3.75", id="gpu-memory-share"),
    pytest.param("gpu-memory", Fraction(15), 15, id="gpu-memory-whole"),
    pytest.param("nvidia.com/gpu", Fraction(1, 3), "1/3", id="device-share"),
]


@pytest.mark.parametrize(("resource", "value", "expected"), AMOUNTS)
def test_amounts_as_json(resource: str, value: Fraction, expected: int | str) -> None:
    assert format_amount(resource, value) == expected
    assert encode_amounts({resource: value}) == {resource: expected}
