"""Partial reports: what changed since the report last sent, and nothing else. The diff
is pure, so its rule is held over any two listings; the pace decides when a report goes
whole (a session's first, the periodic full one, a coordinator that takes no partial
ones)."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from agent.report_pace import ReportPace
from shared.protocol import ContainerStatus, CpuPressure, Status
from shared.status_delta import bare, partial_report

IDS = [f"c{n}" for n in range(8)]
STATES = ["running", "exited", "created", "missing"]

Measurements = tuple[float | None, int | None, float | None]
measurements: st.SearchStrategy[Measurements] = st.tuples(
    st.none() | st.floats(0, 64), st.none() | st.integers(0, 2**40), st.none() | st.floats(0, 100)
)


def measured(container: ContainerStatus, figures: Measurements) -> ContainerStatus:
    cpu, memory, pressure = figures
    return msgspec.structs.replace(
        container, cpu_usage=cpu, memory_usage=memory, cpu_pressure=pressure
    )


@st.composite
def containers(draw: st.DrawFn) -> ContainerStatus:
    container = ContainerStatus(
        id=draw(st.sampled_from(IDS)),
        state=draw(st.sampled_from(STATES)),
        revision=draw(st.integers(0, 3)),
        error=draw(st.sampled_from(["", "no such image"])),
    )
    return measured(container, draw(measurements))


listings = st.lists(containers(), unique_by=lambda c: c.id, max_size=len(IDS))


def status(listing: list[ContainerStatus], revision: int = 1) -> Status:
    return Status(applied_revision=revision, listed_after=revision, containers=listing)


def applied(last: Status, partial: Status) -> dict[str, ContainerStatus]:
    """What a receiver holding ``last`` holds once it takes in ``partial``."""
    held = {c.id: c for c in last.containers}
    for container_id in partial.gone:
        del held[container_id]
    held.update((c.id, c) for c in partial.containers)
    return held


@given(listings, listings)
def test_a_partial_report_applied_to_the_last_listing_gives_the_new_one(
    before: list[ContainerStatus], after: list[ContainerStatus]
) -> None:
    last, now = status(before), status(after, revision=2)
    partial = partial_report(last, now)
    held = applied(last, partial)
    assert sorted(held) == sorted(c.id for c in after)
    assert {cid: bare(c) for cid, c in held.items()} == {c.id: bare(c) for c in after}
    # What it lists is the new listing's own, measurements included, and only news.
    news = {c.id: c for c in after if bare(c) not in [bare(b) for b in before]}
    assert {c.id: c for c in partial.containers} == news
    assert partial.gone == [c.id for c in before if c.id not in {a.id for a in after}]
    assert (partial.partial, partial.applied_revision, partial.listed_after) == (True, 2, 2)


@given(listings, st.data())
def test_measurements_alone_never_make_a_container_news(
    before: list[ContainerStatus], data: st.DataObject
) -> None:
    after = [measured(c, data.draw(measurements)) for c in before]
    pressure = CpuPressure(source="psi", avg10=data.draw(st.floats(0, 100)))
    partial = partial_report(
        status(before), msgspec.structs.replace(status(after), pressure=pressure)
    )
    assert (partial.containers, partial.gone, partial.pressure) == ([], [], pressure)


def running(*ids: str, cpu: float = 0.5) -> Status:
    listing = [ContainerStatus(id=cid, state="running", cpu_usage=cpu) for cid in ids]
    return Status(applied_revision=3, containers=listing)


def test_between_full_reports_only_what_changed_goes() -> None:
    pace = ReportPace(full_every=60.0, partial=True)
    first = running("a", "b")
    assert pace.frame(first, now=0.0) == first  # the session's first: whole
    pace.sent(first, now=0.0)

    later = running("b", "c", cpu=1.5)
    assert pace.due(later, now=10.0)
    frame = pace.frame(later, now=10.0)
    assert (frame.partial, [c.id for c in frame.containers], frame.gone) == (True, ["c"], ["a"])
    pace.sent(later, now=10.0, partial=True)

    # A partial report does not put off the full one, due 60 s after the first.
    assert pace.wait(now=30.0) == 30.0
    assert not pace.due(running("b", "c", cpu=2.5), now=59.0)
    assert pace.frame(running("b", "c"), now=60.0) == running("b", "c")


def test_to_a_coordinator_that_takes_none_every_report_is_whole() -> None:
    pace = ReportPace(full_every=60.0)
    pace.sent(running("a", "b"), now=0.0)
    assert pace.frame(running("b"), now=1.0) == running("b")


def test_a_fresh_pace_a_new_session_starts_whole() -> None:
    assert not ReportPace(full_every=60.0, partial=True).frame(running("a"), now=5.0).partial
