"""Which nodes are under CPU pressure: their agents' readings, with hysteresis.

    book = PressureBook(PressureSettings(enter_percent=60, leave_percent=30))
    book.report("n1", CpuPressure(source="psi", avg10=72.0), now=t)   -> [Note("pressure", ...)]
    book.under()   -> frozenset({"n1"})
    book.of("n1")  -> NodePressure(under=True, source="psi", avg10=72.0, ...)

A node enters pressure when a reading's avg10 reaches ``enter_percent`` and leaves it when
one falls to ``leave_percent`` or below; in between it stays as it was (``held_under``).
Entering and leaving are events of the node (``pressure``, ``relieved``). Readings are
kept in memory only, never stored: a reading is not a decision. A new coordinator (a
restart, a takeover) starts with none and learns each node's from its agent's first status
of the new session, which the agent sends whole, reading included, right after the
welcome (``agent.report_pace``: the first report of a session is always due). Until then
the node counts as calm; a node still under pressure then enters it again (a second
``pressure`` event), and one that calmed down meanwhile gets no ``relieved``.
"""

from __future__ import annotations

from coordinator.config import PressureSettings
from coordinator.services.events import Note
from shared.api.nodes import NodePressure
from shared.protocol import CpuPressure


def held_under(was_under: bool, avg10: float, settings: PressureSettings) -> bool:
    """Whether a node is under pressure after a reading of ``avg10`` percent.

    Postcondition: True if ``avg10 >= enter_percent``, False if ``avg10 <=
    leave_percent``, else ``was_under`` (leave_percent < enter_percent, so exactly one
    applies)."""
    if avg10 >= settings.enter_percent:
        return True
    if avg10 <= settings.leave_percent:
        return False
    return was_under


class PressureBook:
    def __init__(self, settings: PressureSettings) -> None:
        self.settings = settings
        self._nodes: dict[str, NodePressure] = {}
        self._under: frozenset[str] = frozenset()

    def of(self, node: str) -> NodePressure | None:
        return self._nodes.get(node)

    def under(self) -> frozenset[str]:
        """The nodes under pressure now. O(1): the set is rebuilt only when one changes."""
        return self._under

    def report(self, node: str, reading: CpuPressure | None, *, now: float) -> list[Note]:
        """Take the node's reading (None: its agent can tell none, or the node went away);
        the event of its entering or leaving pressure, if it did."""
        before = self._nodes.get(node)
        was_under = before is not None and before.under
        if reading is None:
            self._nodes.pop(node, None)
            self._set(node, False)
            return (
                [self._note(node, "relieved", "no pressure reading from its agent")]
                if was_under
                else []
            )
        under = held_under(was_under, reading.avg10, self.settings)
        changed = before is None or under != was_under
        self._nodes[node] = NodePressure(
            under=under,
            source=reading.source,
            avg10=reading.avg10,
            avg60=reading.avg60,
            at=now,
            since=before.since if before is not None and not changed else now,
        )
        self._set(node, under)
        if under == was_under:
            return []
        figure = f"cpu pressure {reading.avg10:g}% ({_named(reading.source)})"
        if under:
            return [self._note(node, "pressure", f"{figure} >= {self.settings.enter_percent:g}%")]
        return [self._note(node, "relieved", f"{figure} <= {self.settings.leave_percent:g}%")]

    def _set(self, node: str, under: bool) -> None:
        if under != (node in self._under):
            self._under = self._under | {node} if under else self._under - {node}

    @staticmethod
    def _note(node: str, kind: str, reason: str) -> Note:
        return Note(kind, reason, node=node)


def _named(source: str) -> str:
    return "PSI some avg10" if source == "psi" else "CFS periods throttled"
