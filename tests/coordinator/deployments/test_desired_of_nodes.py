"""A node's desired containers are translated once per record (``DesiredOfNodes``): a
record kept is its translation kept, a new record is translated anew, and a node keeps
only what its records are now."""

from __future__ import annotations

import msgspec

from coordinator.deployments.translate import DesiredOfNodes, desired_container
from tests.coordinator.deployments.test_container_state import RECORD

OTHER = msgspec.structs.replace(RECORD, id="c-other")


def test_a_kept_record_keeps_its_translation_and_a_new_one_is_translated() -> None:
    desired = DesiredOfNodes()
    first = desired.of_node("n1", [RECORD, OTHER])
    assert first == [desired_container(RECORD), desired_container(OTHER)]
    moved = msgspec.structs.replace(OTHER, cpu_bind=True)
    second = desired.of_node("n1", [RECORD, moved])
    assert second[0] is first[0]
    assert second[1] == desired_container(moved)
    assert second[1].pool == ""  # bound now: translated from the new record


def test_a_node_keeps_only_its_records_now() -> None:
    desired = DesiredOfNodes()
    kept = desired.of_node("n1", [RECORD])[0]
    assert desired.of_node("n1", []) == []
    again = desired.of_node("n1", [RECORD])[0]
    assert again == kept
    assert again is not kept  # forgotten while the node held nothing
    assert desired.of_node("n2", [RECORD])[0] is not again  # each node its own
