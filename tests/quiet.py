"""The quiet phase: tests that measure absolute CPU run at the end of a pytest run, alone.

A test marked ``quiet`` asserts cores, not proportions, so nothing else of the run may use
the CPUs beside it. Quiet tests run after every other test of the run, one at a time
(tests/beside.py orders them). In ``make test`` groups of slow tests run in pytest runs of
their own beside the session (tests/beside.py): the host's Docker and end-to-end tests,
which have no quiet tests there, and the cgroup v2 VM's, which has. They take turns:

1. the session runs its other tests while each run beside it runs its own other tests;
2. once the session's other tests are done, it waits for the host's runs, then gives the
   VM's run its turn (creates the file ``TURN`` names there) and waits for it to end; the
   run's quiet tests wait for that file (``wait_for_turn``), then measure;
3. the session runs its own quiet tests, every run beside it ended and the VM stopped.

A quiet test waits for its turn once its fixtures are set up, so that slow set-ups (a
cluster in the emulated guest, its burners deployed and stopped) overlap the session's last
tests; its fixtures must not burn CPU while they wait.

Every wait is bounded and fails saying what it waited for: a run whose session is gone
fails its quiet tests at once, one whose turn never came fails them after ``TURN_SECONDS``
from its start, and the session stops a run that has not ended ``beside.RUN_SECONDS``
after its turn. A run on its own (``pytest -m cgroup_v2``, or one file) waits for nobody.

    wait_for_turn()    # before each quiet test; returns at once unless a session gives turns
    tell(lines)        # a quiet test's figures, printed at the run's end whatever its outcome
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

MARKER = "quiet"
TURN = "ALLOT_QUIET_TURN"  # in a run beside a session: the file that gives it its turn
SESSION = "ALLOT_QUIET_SESSION"  # ... and the pid of that session
# The session's other tests take 13 to 17 minutes in make test on this 2-core machine.
TURN_SECONDS = 3600.0
POLL_SECONDS = 0.2
_STARTED = time.monotonic()  # this module is imported as the run's conftest is read


def is_quiet(item: pytest.Item) -> bool:
    return item.get_closest_marker(MARKER) is not None


class NoTurn(Exception):
    """The run's quiet tests may not measure: its turn never came; the message says why."""


@dataclass(frozen=True)
class Turn:
    """The turn a session gives the run it started beside it: ``path`` exists once the
    session's other tests are done; ``session`` is that session's pid, this run's parent."""

    path: Path
    session: int
    deadline: float  # monotonic

    @classmethod
    def given(cls) -> Turn | None:
        """This run's turn, when a session started it beside its own tests."""
        path, session = os.environ.get(TURN), os.environ.get(SESSION)
        if not path or not session:
            return None
        return cls(Path(path), int(session), _STARTED + TURN_SECONDS)

    def wait(self) -> None:
        """Until the session gives the turn; ``NoTurn`` if it is gone or the deadline
        passes first."""
        while not self.path.exists():
            if os.getppid() != self.session:
                raise NoTurn(
                    f"the session that started this run (pid {self.session}) ended before"
                    " its other tests were done: the quiet tests did not run"
                )
            if time.monotonic() > self.deadline:
                raise NoTurn(
                    f"the session that started this run (pid {self.session}) did not finish"
                    f" its other tests within {TURN_SECONDS:.0f} s of this run's start"
                    f" ({self.path} never appeared): the quiet tests did not run"
                )
            time.sleep(POLL_SECONDS)


def wait_for_turn() -> None:
    """Before a quiet test: in a run beside a session, until that session's other tests
    are done (``pytest.fail`` saying why if they never are); otherwise at once."""
    turn = Turn.given()
    if turn is None:
        return
    try:
        turn.wait()
    except NoTurn as error:
        pytest.fail(str(error), pytrace=False)


FIGURES = "figures: "  # how each line of ``tell`` begins in the run's summary
_told: list[str] = []


def tell(lines: list[str]) -> None:
    """Keep a quiet test's figures for the run's summary (``told``): what it measured is
    worth reading when it passes, not only when an assertion prints it."""
    _told.extend(lines)


def told() -> list[str]:
    """The figures quiet tests kept, each line beginning with ``FIGURES``."""
    return [FIGURES + line for line in _told]
