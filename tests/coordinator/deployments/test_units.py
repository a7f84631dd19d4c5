"""coordinator.deployments.units: what a node has free in units, what one container
takes, which nodes have room -- and that units are never handed out twice."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.discovery.gpu import probe_gpus
from coordinator.deployments.gpus import GpuNeed
from coordinator.deployments.units import (
    FreeUnits,
    Grant,
    UnitNeed,
    free_units,
    held_extended,
    room,
    shortage,
    take,
)
from shared.inventory import Inventory
from tests.builders import make_inventory
from tests.fakes.nvml import eight_whole_gpus

FPGA = "example.com/fpga"
NIC = "x.io/nic"


@dataclass(frozen=True)
class Held:
    gpus: list[str] = field(default_factory=list)
    extended: dict[str, int] = field(default_factory=dict)


def offering(extended: dict[str, int], *, gpus: int = 0) -> Inventory:
    whole = probe_gpus(eight_whole_gpus(), lambda _: None).gpus[:gpus]
    return msgspec.structs.replace(make_inventory(), extended=extended, gpus=whole)


def test_free_is_the_offer_less_what_the_containers_hold() -> None:
    free = free_units(
        offering({FPGA: 4, NIC: 1}), [Held(extended={FPGA: 1}), Held(extended={FPGA: 2})]
    )
    assert free.extended == {FPGA: 1, NIC: 1}
    assert free.counts() == {FPGA: 1, NIC: 1}


def test_free_never_goes_below_zero_when_the_offer_shrank() -> None:
    # The agent's config was lowered while containers held more than it now offers.
    free = free_units(offering({FPGA: 1}), [Held(extended={FPGA: 3})])
    assert free.extended == {FPGA: 0}


def test_resources_the_node_does_not_offer_are_not_free() -> None:
    free = free_units(offering({}), [])
    assert take(UnitNeed(extended={FPGA: 1}), free) is None


@pytest.mark.parametrize(
    ("need", "expected"),
    [
        (UnitNeed(extended={FPGA: 2}), Grant([], {FPGA: 2})),
        (UnitNeed(extended={FPGA: 3}), None),
        (UnitNeed(extended={FPGA: 1, NIC: 1}), Grant([], {FPGA: 1, NIC: 1})),
        (UnitNeed(extended={FPGA: 1, NIC: 2}), None),
        (UnitNeed(GpuNeed(whole=1), {FPGA: 1}), "one-gpu"),
        (UnitNeed(GpuNeed(whole=2), {FPGA: 1}), None),
    ],
    ids=["fits", "one-too-many", "two-kinds", "second-kind-short", "gpu-and-fpga", "gpus-short"],
)
def test_take(need: UnitNeed, expected: Grant | str | None) -> None:
    inventory = offering({FPGA: 2, NIC: 1}, gpus=1)
    got = take(need, free_units(inventory, []))
    if expected == "one-gpu":
        assert got == Grant([inventory.gpus[0].uuid], {FPGA: 1})
    else:
        assert got == expected


def test_room_lists_only_the_nodes_with_enough() -> None:
    free = {
        "a": free_units(offering({FPGA: 1}), []),
        "b": free_units(offering({FPGA: 2}), []),
        "c": free_units(offering({}), []),
    }
    assert room(UnitNeed(extended={FPGA: 2}), free) == {"b": Grant([], {FPGA: 2})}
    assert sorted(room(UnitNeed(extended={FPGA: 1}), free)) == ["a", "b"]


def test_shortage_gives_what_is_needed_and_free_per_node() -> None:
    free = {"a": free_units(offering({FPGA: 1, NIC: 5}), []), "b": free_units(offering({}), [])}
    assert shortage(UnitNeed(GpuNeed(whole=1), {FPGA: 2}), free) == {
        "needed": {"nvidia.com/gpu": 1, FPGA: 2},
        "free": {"a": {"nvidia.com/gpu": 0, FPGA: 1}, "b": {"nvidia.com/gpu": 0, FPGA: 0}},
    }


def test_need_reads_in_quota_names_and_words() -> None:
    need = UnitNeed(GpuNeed(whole=1, mig={"1g.10gb": 2}), {FPGA: 2})
    assert need.quota_requests() == {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 2, FPGA: 2}
    assert str(need) == "1 GPU + 2 x MIG 1g.10gb + 2 x example.com/fpga"
    assert not UnitNeed()
    assert str(UnitNeed()) == "no devices"


def test_held_adds_up_by_name() -> None:
    holders = [Held(extended={FPGA: 1}), Held(extended={FPGA: 2, NIC: 1}), Held()]
    assert held_extended(holders) == {FPGA: 3, NIC: 1}


# -- never twice -------------------------------------------------------------------------

offers = st.dictionaries(
    st.sampled_from(["n1", "n2", "n3"]),
    st.dictionaries(st.sampled_from([FPGA, NIC]), st.integers(0, 4), max_size=2),
    min_size=1,
)
needs = st.lists(
    st.dictionaries(st.sampled_from([FPGA, NIC]), st.integers(1, 3), min_size=1, max_size=2),
    max_size=12,
)


@given(offers, needs)
def test_placing_one_after_another_never_hands_out_a_unit_twice(
    offered: dict[str, dict[str, int]], wanted: list[dict[str, int]]
) -> None:
    """Each container goes to the first node with room, and counts as held from then on,
    the way the service places them; what each node holds stays within its offer, and a
    container is refused only when no node had room for it."""
    inventories = {node: offering(extended) for node, extended in offered.items()}
    holding: dict[str, list[Held]] = {node: [] for node in offered}
    for extended in wanted:
        need = UnitNeed(extended=extended)
        free: dict[str, FreeUnits] = {
            node: free_units(inventories[node], holding[node]) for node in offered
        }
        grants = room(need, free)
        if not grants:
            assert all(
                any(n > units.extended.get(name, 0) for name, n in extended.items())
                for units in free.values()
            )
            continue
        node = min(grants)
        assert grants[node].extended == extended
        holding[node].append(Held(extended=grants[node].extended))
    for node, held in holding.items():
        for name, units in held_extended(held).items():
            assert units <= offered[node].get(name, 0)
