"""What each namespace's live containers ask for, kept as the books change, so that a
quota's usage is read in O(its namespaces x their request shapes) instead of recounted
over every container of its namespaces on every read.

    tally = RequestTally()
    tally.count(record)                  # a live container came or changed
    tally.forget(container_id)           # it is no longer live
    tally.shapes(["team-a", "team-b"])   # [({"cpu": "0.5", "memory": 134217728}, 40), ...]

A *shape* is a container's ``requests`` as submitted; the containers of one deployment
share one, so a namespace holds about as many shapes as deployments. Parsing a shape
into amounts needs the quota settings, which the quota side has; the tally only counts.

Invariant (``check``): each live container is counted exactly once, under its namespace
and its shape, and no shape is kept with a count of 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from shared.api.containers import ContainerRecord

Shape = tuple[tuple[str, int | str], ...]  # a container's requests, as ordered items


def shape_of(record: ContainerRecord) -> Shape:
    return tuple(record.requests.items())


class RequestTally:
    def __init__(self) -> None:
        self._counted: dict[str, tuple[str, Shape]] = {}  # id -> (namespace, shape)
        self._shapes: dict[str, Counter[Shape]] = {}

    def count(self, record: ContainerRecord) -> None:
        """Count the live container ``record`` (anew if it was counted). O(r)."""
        self.forget(record.id)
        shape = shape_of(record)
        self._counted[record.id] = (record.namespace, shape)
        self._shapes.setdefault(record.namespace, Counter())[shape] += 1

    def forget(self, container_id: str) -> None:
        """Stop counting the container; nothing if it was not counted. O(1)."""
        counted = self._counted.pop(container_id, None)
        if counted is None:
            return
        namespace, shape = counted
        shapes = self._shapes[namespace]
        shapes[shape] -= 1
        if not shapes[shape]:
            del shapes[shape]
            if not shapes:
                del self._shapes[namespace]

    def shapes(self, namespaces: Iterable[str]) -> list[tuple[dict[str, int | str], int]]:
        """Each shape the live containers of ``namespaces`` ask for, with how many do
        (a namespace named twice counts once). O(the shapes)."""
        return [
            (dict(shape), count)
            for namespace in dict.fromkeys(namespaces)
            for shape, count in self._shapes.get(namespace, {}).items()
        ]

    def check(self, containers: Mapping[str, ContainerRecord]) -> None:
        """``AssertionError`` unless the tally equals one counted afresh. O(n): tests."""
        fresh = RequestTally()
        for record in containers.values():
            fresh.count(record)
        assert self._counted == fresh._counted, "request tally drifted"
        assert self._shapes == fresh._shapes, "request shapes drifted"
