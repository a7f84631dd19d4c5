"""The registry checks an inventory once per kind (``registry.violations_of``): for any
inventory, whole or broken by any rule, under any hostname, what it says is what
``inventory_violations`` says of that very inventory."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.services.registry import violations_of
from shared.inventory import Inventory
from shared.inventory_rules import inventory_violations
from tests.inventories import inventories
from tests.shared.test_inventory_rules import BREAKERS, Breaker


@settings(max_examples=200, deadline=None)
@given(
    inventories(),
    st.none() | st.sampled_from(BREAKERS),
    st.lists(st.sampled_from(["host-a", "host-b", "a.example.com"]), min_size=1, max_size=3),
    st.data(),
)
def test_a_kind_checked_once_says_what_each_check_says(
    inventory: Inventory, breaker: Breaker | None, hostnames: list[str], data: st.DataObject
) -> None:
    if breaker is not None:
        broken = breaker(inventory, data.draw)
        if broken is not None:
            inventory = broken[0]
    for hostname in hostnames:
        named = msgspec.structs.replace(inventory, hostname=hostname)
        assert violations_of(named) == inventory_violations(named)
