"""coordinator.deployments.tally: per deployment, its live containers by state and its
running containers' usage, kept by count/forget; by example, then by property against a
tally counted afresh (``check``) with the usage summed directly."""

from __future__ import annotations

import math

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from coordinator.deployments.tally import StateTally
from shared.api.containers import ContainerRecord
from shared.protocol import ContainerStatus
from tests.coordinator.deployments.test_container_state import RECORD

WEB = ("team-a", "web")


def placed(cid: str, deployment: str = "web") -> ContainerRecord:
    return msgspec.structs.replace(RECORD, id=cid, deployment=deployment)


def running(cid: str, cores: float, used: int) -> ContainerStatus:
    return ContainerStatus(id=cid, state="running", cpu_usage=cores, memory_usage=used)


def test_a_report_moves_a_container_from_starting_to_running_with_its_usage() -> None:
    tally = StateTally()
    tally.count(placed("c1"), None)
    tally.count(placed("c2"), None)
    assert tally.states(WEB) == {"starting": 2}
    assert tally.usage(WEB) == (0.0, 0)
    tally.count(placed("c1"), running("c1", 0.5, 1000))
    tally.count(placed("c2"), ContainerStatus(id="c2", state="failed", error="no image"))
    assert tally.states(WEB) == {"running": 1, "failed": 1}
    assert tally.usage(WEB) == (0.5, 1000)
    tally.forget("c1")
    tally.forget("c1")  # twice changes nothing
    assert (tally.states(WEB), tally.usage(WEB)) == ({"failed": 1}, (0.0, 0))
    tally.forget("c2")
    assert (dict(tally.states(WEB)), list(tally.deployments())) == ({}, [])


STATES = ["running", "exited", "created", "failed", "missing", "paused"]
steps = st.lists(
    st.tuples(
        st.sampled_from(["c1", "c2", "c3", "c4"]),
        st.sampled_from(["web", "db"]),
        st.none() | st.sampled_from(STATES),
        st.floats(0, 64, allow_nan=False),
        st.integers(0, 2**40),
        st.booleans(),  # forget instead
    ),
    max_size=40,
)


@given(steps)
def test_the_tally_equals_one_counted_afresh_after_any_changes(
    changes: list[tuple[str, str, str | None, float, int, bool]],
) -> None:
    tally = StateTally()
    live: dict[str, ContainerRecord] = {}
    observed: dict[str, ContainerStatus] = {}
    for cid, deployment, state, cores, used, forget in changes:
        if forget:
            tally.forget(cid)
            live.pop(cid, None)
            observed.pop(cid, None)
            continue
        record = placed(cid, deployment)
        seen = None
        if state is not None:
            seen = ContainerStatus(id=cid, state=state, cpu_usage=cores, memory_usage=used)
            observed[cid] = seen
        else:
            observed.pop(cid, None)
        live[cid] = record
        tally.count(record, seen)
    tally.check(live, observed)
    for deployment in ("web", "db"):
        mine = [
            observed[c] for c, r in live.items() if r.deployment == deployment and c in observed
        ]
        ran = [s for s in mine if s.state == "running"]
        cores, used = tally.usage(("team-a", deployment))
        assert math.isclose(cores, sum(s.cpu_usage or 0.0 for s in ran), abs_tol=1e-9)
        assert used == sum(s.memory_usage or 0 for s in ran)
