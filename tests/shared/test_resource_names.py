"""shared.resource_names: which names may name an extended resource."""

from __future__ import annotations

import pytest

from shared.resource_names import extended_name_problem


@pytest.mark.parametrize(
    "name",
    ["example.com/fpga", "x.io/Nic_v2.1", "a/b", f"example.com/{'f' * 63}"],
    ids=["plain", "mixed-case-name", "shortest", "name-of-63"],
)
def test_valid_extended_names(name: str) -> None:
    assert extended_name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("fpga", "is not <domain>/<name>"),
        ("cpu", "is not <domain>/<name>"),
        ("gpu-memory", "is not <domain>/<name>"),
        ("Example.com/fpga", "is not <domain>/<name>"),
        ("example.com/", "is not <domain>/<name>"),
        ("example.com/fpga_", "is not <domain>/<name>"),
        (f"example.com/{'f' * 64}", "is not <domain>/<name>"),
        ("nvidia.com/gpu", "is discovered on the host"),
        ("nvidia.com/mig-1g.10gb", "is discovered on the host"),
        ("nvidia.com/mig-oops", "is discovered on the host"),
    ],
    ids=[
        "bare",
        "cpu",
        "gpu-memory",
        "upper-case-domain",
        "empty-name",
        "trailing-underscore",
        "name-of-64",
        "gpu",
        "mig",
        "malformed-mig",
    ],
)
def test_invalid_extended_names(name: str, problem: str) -> None:
    reason = extended_name_problem(name)
    assert (reason or "").startswith(problem), reason
