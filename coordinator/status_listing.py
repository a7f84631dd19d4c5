"""What a node's agent holds, by id, as its status frames in one session tell it: the
ids a full status lists, moved by each partial status since (``Status.partial``).

    listing = Listing()                 # one per agent session
    listed = listing.take(status)       # the ids held now; None: not known yet

Why: a partial status names only what changed, yet a stopping container counts as gone
when its agent no longer holds it; the listing answers that in O(the status), not
O(the node's containers).
"""

from __future__ import annotations

from collections.abc import Collection

from shared.protocol import Status


class Listing:
    """The container ids a node's agent holds, as of the last status it sent in this
    session; not known until a full status came (a session's first should be one)."""

    def __init__(self) -> None:
        self._ids: set[str] | None = None

    def take(self, status: Status) -> Collection[str] | None:
        """The ids held once ``status`` is taken in, or None while no full status has come
        in this session: a partial status alone cannot say what the agent holds. The
        answer is this listing's own, read only until the next ``take``. O(the status's
        containers and gone ids)."""
        if not status.partial:
            self._ids = {container.id for container in status.containers}
        elif self._ids is not None:
            self._ids.difference_update(status.gone)
            self._ids.update(container.id for container in status.containers)
        return self._ids
