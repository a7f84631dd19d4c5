"""The cluster total the registry keeps (``ClusterTotal``) always equals the full sum over
its usable records (``pool_service.cluster_total``, the reference), whatever sequence of
commits of node records, hellos and deletions it takes in, from any start (records loaded
ready, degraded, lost, or breaking today's rules)."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from coordinator.services.pool_service import cluster_total
from coordinator.services.registry import NodeRegistry
from shared.api.nodes import NodeHealth, NodeRecord
from shared.cpuset import CpuSet
from tests.builders import make_inventory

NAMES = ("n0", "n1", "n2", "n3")


def record(name: str, state: NodeHealth, cpus: int, gib: int) -> NodeRecord:
    """A node offering ``cpus`` of its two CPUs (the rest reserved) and ``gib`` GiB."""
    inventory = make_inventory()
    inventory = msgspec.structs.replace(
        inventory, reserved=CpuSet(range(cpus, 2)), memory=gib * 2**30
    )
    return NodeRecord(
        name=name,
        state=state,
        reason="" if state == NodeHealth.READY else "why",
        inventory=inventory,
        address="127.0.0.1",
        agent_version="t",
        registered_at=0.0,
        state_since=0.0,
    )


records = st.builds(
    record,
    st.sampled_from(NAMES),
    st.sampled_from(list(NodeHealth)),
    st.integers(0, 2),
    st.integers(0, 64),
)
# One commit: records put, nodes that said hello (of those put), nodes deleted.
commits = st.tuples(
    st.lists(records, max_size=4),
    st.lists(st.booleans(), min_size=4, max_size=4),
    st.sets(st.sampled_from(NAMES), max_size=2),
)


@given(
    start=st.lists(records, max_size=4, unique_by=lambda r: r.name),
    unusable=st.sets(st.sampled_from(NAMES)),
    sequence=st.lists(commits, max_size=8),
)
def test_the_kept_total_is_the_full_sum(
    start: list[NodeRecord],
    unusable: set[str],
    sequence: list[tuple[list[NodeRecord], list[bool], set[str]]],
) -> None:
    registry = NodeRegistry(
        start,
        lease_seconds=10.0,
        revisions={r.name: 1 for r in start},
        unusable={r.name: "breaks a rule" for r in start if r.name in unusable},
    )
    assert registry.total() == cluster_total(registry.usable())
    for revision, (put, helloed, deleted) in enumerate(sequence, start=2):
        written = {r.name: r for r in put}
        hellos = {name for name, said in zip(NAMES, helloed, strict=True) if said}
        registry.apply(
            written,
            hellos=hellos & written.keys(),
            deleted=deleted - written.keys(),
            revision=revision,
            revisions={},
        )
        assert registry.total() == cluster_total(registry.usable())
