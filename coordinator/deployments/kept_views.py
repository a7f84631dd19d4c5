"""The placement views of the candidate nodes as the books hold them, kept between
decisions: a decision asks for them once (``Draft.candidate_views``) and gets the kept
list with its own draft's node states on top, instead of viewing every ready node again.

    kept = KeptViews()
    views, index, absent = kept.of(context.ready_states(), books)   # O(states moved)
    kept.moved(change.nodes, relisted=False)                         # at apply: O(change)

Invariant: ``of`` answers exactly ``[state.view() for state in draft.candidates()]`` of a
draft that changes nothing, for these ready states and these books (their cordons, their
node states); ``index`` gives each node's place in it, ``absent`` the ready, uncordoned
nodes left out for want of a state. The books tell it every node state an apply wrote
(``moved``), and the view of each is built at the next read, in the deciding thread, not
on the event loop; an apply that writes cordons or deletes nodes changes which nodes are
listed, and the list is made again at the next read, as it is when the ready states
changed (``Context.ready_states`` gives the same list while the node records stay). The
books change only once a commit succeeded, so a failed commit leaves the list as it was,
and a decision made while another commits sees that one's writes through its draft, never
through the list. A view is a pure function of its immutable state (``NodeState.view``):
a node whose state did not change keeps its view.

Every change replaces the kept tuple as a whole, so a reader on another thread (a plan on
the event loop) sees one or the other. Cost: O(ready nodes) when made; O(the states moved
since the last read) otherwise, plus a copy of the list (C speed). The naive way it
replaced walked every ready node's state in every decision: 10,000 dictionary reads and
view calls a decision on 10,000 nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from coordinator.placement import Node, NodeState

if TYPE_CHECKING:
    from coordinator.deployments.books import Books

Ready = Sequence[tuple[str, NodeState | None]]
Kept = tuple[list[Node], dict[str, int], frozenset[str]]


class KeptViews:
    def __init__(self) -> None:
        # The ready states it was made for, what it made, and the node states written
        # since, whose views are not built yet.
        self._kept: tuple[Ready, Kept, dict[str, NodeState]] | None = None

    def of(self, ready: Ready, books: Books) -> Kept:
        """The views of the ready, uncordoned nodes that have a state (the books' or the
        fresh one), in the order of ``ready``; each one's index; the ready, uncordoned
        nodes without one. Read them, never change them."""
        kept = self._kept
        if kept is None or kept[0] is not ready:
            made = _made(ready, books)
        elif kept[2]:
            made = on_top(kept[1], kept[2])
        else:
            return kept[1]
        self._kept = (ready, made, {})
        return made

    def moved(self, states: Mapping[str, NodeState], *, relisted: bool) -> None:
        """The books took in ``states`` (``relisted``: and cordons or deletions, which
        change which nodes are listed). O(len(states))."""
        kept = self._kept
        if kept is None or not (states or relisted):
            return
        ready, made, waiting = kept
        if relisted or not made[2].isdisjoint(states):
            self._kept = None  # a node comes or goes: made again at the next read
            return
        self._kept = (ready, made, {**waiting, **states})


def _made(ready: Ready, books: Books) -> Kept:
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
    return views, index, frozenset(absent)


def on_top(made: Kept, states: Mapping[str, NodeState]) -> Kept:
    """``made`` with the views of ``states`` in their places, in a copy of the list (a
    node not listed is not a candidate: not ready, or cordoned; none may be ``absent``).
    O(the list, at C speed) + O(states)."""
    views, index, absent = made
    views = list(views)
    for name, state in states.items():
        at = index.get(name)
        if at is not None:
            views[at] = state.view()
    return views, index, absent
