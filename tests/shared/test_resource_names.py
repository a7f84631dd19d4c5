"""shared.resource_names: which names may name an extended resource, and the decoded
RFC 1123 label type, which must refuse exactly what is_rfc1123_label refuses."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.resource_names import Rfc1123Label, extended_name_problem, is_rfc1123_label


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


_label_alphabet = st.sampled_from("ab09-A_.\n /é")


@given(st.text(alphabet=_label_alphabet, max_size=8) | st.text(alphabet="a-", min_size=60))
def test_the_decoded_label_type_agrees_with_is_rfc1123_label(name: str) -> None:
    try:
        msgspec.json.decode(msgspec.json.encode(name), type=Rfc1123Label)
    except msgspec.ValidationError:
        decodes = False
    else:
        decodes = True
    assert decodes == is_rfc1123_label(name)


@pytest.mark.parametrize("name", ["team-a\n", "team-a\n\n", "\nteam-a", "a" * 64, ""])
def test_the_decoded_label_type_refuses_what_a_pattern_search_could_miss(name: str) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(msgspec.json.encode(name), type=Rfc1123Label)
