"""What one session's agent holds of its node's desired state, and the one frame that
brings it up to date: only the containers that changed and the ids removed since the
revision it was last sent, or the whole state when the agent asked for it.

    feed = DesiredFeed(revision, containers, pace)       # what the welcome carried
    frame = feed.frame(revision, containers, pace)       # Desired, or None: up to date
    feed.want_full()                                     # the agent could not apply one

A websocket delivers frames in order and whole, so within a session the agent holds
exactly what the feed sent; each delta names the revision it applies to (``since``), and
an agent that holds another one (a bug, or a frame it refused) asks for the whole state
instead of guessing. A reconnect is a new session with a new feed, whose welcome carries
the whole state. The feed also carries a longer heartbeat pace to the agent, in a delta
of its own when no container changed.

The cost: the feed keeps the desired containers it sent (shallow structs sharing their
fields with the coordinator's records), and each frame compares them with the node's
state now: O(the node's containers), as encoding the whole state was. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from coordinator.heartbeat_pace import Pace
from shared.protocol import Desired, DesiredContainer


def desired_delta(
    before: Mapping[str, DesiredContainer], after: Sequence[DesiredContainer]
) -> tuple[list[DesiredContainer], list[str]]:
    """``(changed, removed)``: the containers of ``after`` that ``before`` lacks or holds
    otherwise, in ``after``'s order, and the ids of ``before`` that ``after`` lacks, sorted.
    Applying them to ``before`` gives ``after``. O(len(before) + len(after))."""
    changed = [c for c in after if before.get(c.id) != c]
    kept = {c.id for c in after}
    removed = sorted(container_id for container_id in before if container_id not in kept)
    return changed, removed


class DesiredFeed:
    def __init__(self, revision: int, containers: Sequence[DesiredContainer], pace: Pace) -> None:
        self._held = {c.id: c for c in containers}
        self._revision = revision
        self.pace = pace  # the one the agent was told
        self._full_wanted = False

    @property
    def revision(self) -> int:
        """The revision of the last desired state sent."""
        return self._revision

    def want_full(self) -> None:
        """The next frame carries the whole desired state."""
        self._full_wanted = True

    def frame(
        self, revision: int, containers: Sequence[DesiredContainer], pace: Pace
    ) -> Desired | None:
        """The frame that brings the agent to ``revision`` (whose desired state is
        ``containers``) and to ``pace`` if that is longer than the one it was told; None
        when it has both already. The feed then counts the frame as sent."""
        stretched = pace > self.pace
        beat = pace.heartbeat_seconds if stretched else None
        lease = pace.lease_seconds if stretched else None
        if self._full_wanted:
            frame = Desired(
                revision=revision,
                full=True,
                containers=list(containers),
                heartbeat_seconds=beat,
                lease_seconds=lease,
            )
        else:
            changed, removed = desired_delta(self._held, containers)
            if not (changed or removed or stretched or revision != self._revision):
                return None
            frame = Desired(
                revision=revision,
                full=False,
                containers=changed,
                removed=removed,
                since=self._revision,
                heartbeat_seconds=beat,
                lease_seconds=lease,
            )
        self._held = {c.id: c for c in containers}
        self._revision = revision
        self._full_wanted = False
        if stretched:
            self.pace = pace
        return frame
