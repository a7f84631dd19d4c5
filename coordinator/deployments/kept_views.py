"""The placement views of the candidate nodes as the books hold them, kept between
decisions: a decision asks for them once (``Draft.candidate_views``) and gets the kept
list with its own draft's node states on top, instead of viewing every ready node again.

    kept = KeptViews()
    views, index, absent = kept.of(context.ready_states(), books)   # O(1) when unchanged

Invariant: the kept list is exactly ``[state.view() for state in draft.candidates()]`` of a
draft that changes nothing, for the ready states and the books it was made from (their
cordons, their node states); ``index`` gives each node's place in it, ``absent`` the ready,
uncordoned nodes left out for want of a state. It is made again when either moved: the
ready states when the node records did (``Context.ready_states`` gives the same list
while they stay), the books at every apply that writes a node state, a cordon or a
deletion (``Books.nodes_version``). The books change only once a commit succeeded, so a
failed commit leaves the list as it was, and a decision made while another commits sees
that one's writes through its draft, never through the list. A view is a pure function
of its immutable state (``NodeState.view``), so a node whose state did not change keeps
its view, and one whose state changed gets the new state's.

Cost: O(ready nodes) when made (the views of states that changed are built then, once),
O(1) otherwise. The naive way it replaced walked every ready node's state in every
decision: 10,000 dictionary reads and view calls a decision on 10,000 nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from coordinator.placement import Node, NodeState

if TYPE_CHECKING:
    from coordinator.deployments.books import Books

Ready = Sequence[tuple[str, NodeState | None]]
Kept = tuple[list[Node], dict[str, int], frozenset[str]]


class KeptViews:
    def __init__(self) -> None:
        # (the ready states, the books' nodes version) it was made for, and what it made;
        # replaced as a whole, so a reader on another thread sees one or the other.
        self._kept: tuple[Ready, int, Kept] | None = None

    def of(self, ready: Ready, books: Books) -> Kept:
        """The views of the ready, uncordoned nodes that have a state (the books' or the
        fresh one), in the order of ``ready``; each one's index; the ready, uncordoned
        nodes without one. Read them, never change them."""
        kept = self._kept
        if kept is not None and kept[0] is ready and kept[1] == books.nodes_version:
            return kept[2]
        version = books.nodes_version
        views: list[Node] = []
        index: dict[str, int] = {}
        absent: set[str] = set()
        nodes, cordoned = books.nodes, books.cordoned
        for name, fresh in ready:
            if name in cordoned:
                continue
            state = nodes.get(name) or fresh
            if state is None:
                absent.add(name)
                continue
            index[name] = len(views)
            views.append(state.view())
        made = (views, index, frozenset(absent))
        self._kept = (ready, version, made)
        return made
