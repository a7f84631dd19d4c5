"""The VM's tests in a pytest run of their own, beside the rest of the suite.

They take minutes in the emulated guest (about 230 s on an idle machine), and run after
everything else they added those minutes to ``make test``. So when a session holds other
tests as well, it starts a second pytest as collection ends, which boots the VM and runs
just the VM's tests while the session runs the rest; the session's own items for them
(``Reported``, still last) wait for that run and report its outcome test by test, a
failure with that run's report of it.

    beside = Beside.start(run_dir, ["tests/cgroup_v2/test_x.py::test_y", ...])
    outcome = beside.outcome("tests/cgroup_v2/test_x.py::test_y")   # waits for the run
    beside.stop()

The session asks for the first outcome once its own tests but the quiet ones are done (its
items for the VM's tests come just before its quiet tests), so that is when it gives the
second run its turn for the quiet tests (tests/quiet.py) and waits for that run to end,
at most ``RUN_SECONDS``.

The second run writes one JSON line per test phase (``record``, which its conftest calls
from ``pytest_runtest_logreport``) to the file named by ``RESULTS``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cgroup_v2.guest import Guest
from tests.quiet import SESSION, TURN

RESULTS = "ALLOT_CGROUP2_RESULTS"  # set in the second run: where it records outcomes
ROOT = Path(__file__).resolve().parents[2]
TAIL_LINES = 40
BOOT_DIR = "ALLOT_CGROUP2_BOOT_DIR"  # set in the second run: where it boots its VM
BOOT_DIR_NAME = "vm"
TURN_NAME = "quiet-turn"
# After its turn: the rest of the VM's tests (all of them, should the session's other tests
# have ended first), then its quiet ones, which take minutes in the emulated guest.
RUN_SECONDS = 1800.0


@dataclass(frozen=True)
class Outcome:
    status: str  # "passed", "failed" or "skipped"
    text: str  # a failure's report, or why it was skipped


class Beside:
    def __init__(self, run_dir: Path, process: subprocess.Popen[bytes]) -> None:
        self.run_dir = run_dir
        self._process = process
        self._outcomes: dict[str, Outcome] | None = None
        self._stopped_after: float | None = None  # seconds after its turn, if it was stopped
        self.waited: tuple[float, float] | None = None  # monotonic: turn given, run ended

    @classmethod
    def start(cls, run_dir: Path, nodeids: list[str]) -> Beside:
        results = run_dir / "results.jsonl"
        (run_dir / BOOT_DIR_NAME).mkdir()
        environment = {
            **os.environ,
            RESULTS: str(results),
            BOOT_DIR: str(run_dir / BOOT_DIR_NAME),
            TURN: str(run_dir / TURN_NAME),
            SESSION: str(os.getpid()),
        }
        with (run_dir / "pytest.log").open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *nodeids],
                cwd=ROOT,
                env=environment,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a group of its own, for ``stop``
            )
        return cls(run_dir, process)

    def outcome(self, nodeid: str, *, within: float = RUN_SECONDS) -> Outcome:
        """The test's outcome in the second run, once that run has ended; the first call
        gives that run its turn for the quiet tests, and stops it if it has not ended
        ``within`` seconds later."""
        if self._outcomes is None:
            (self.run_dir / TURN_NAME).touch()
            began = time.monotonic()
            try:
                self._process.wait(timeout=within)
            except subprocess.TimeoutExpired:
                self.stop()
                self._stopped_after = within
            self.waited = (began, time.monotonic())
            self._outcomes = _read(self.run_dir / "results.jsonl")
        found = self._outcomes.get(nodeid)
        if found is not None:
            return found
        if self._stopped_after is None:
            how = f"(exit status {self._process.returncode}) did not run {nodeid}"
        else:
            how = (
                f"had not ended {self._stopped_after:.0f} s after this session's other tests"
                f" were done and was stopped before it ran {nodeid}"
            )
        return Outcome(
            "failed",
            f"the cgroup v2 tests' own pytest run {how}; the end of its output:\n{self.said()}",
        )

    def said(self) -> str:
        """The end of the second run's output."""
        log = self.run_dir / "pytest.log"
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        return "\n".join(lines[-TAIL_LINES:])

    def stop(self) -> None:
        """End the second run if it still runs (the session was cut short): its whole
        process group (pytest, the boot script, a coordinator), then its VM, which QEMU
        runs detached in a session of its own."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGTERM)
            self._process.wait()
            Guest(self.run_dir / BOOT_DIR_NAME).stop()


def record(report: pytest.TestReport) -> None:
    """In the second run: append the phase's outcome to the results file."""
    path = os.environ.get(RESULTS)
    if not path:
        return
    line = {
        "nodeid": report.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "text": _text_of(report),
    }
    with open(path, "a") as results:
        results.write(json.dumps(line) + "\n")


def _text_of(report: pytest.TestReport) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])  # (file, line, reason)
    return report.longreprtext


def _read(path: Path) -> dict[str, Outcome]:
    """Each test's outcome: failed if a phase failed (that phase's report), else skipped
    if its setup was, else passed once its call passed."""
    phases: dict[str, list[dict[str, Any]]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            phases.setdefault(entry["nodeid"], []).append(entry)
    outcomes = {}
    for nodeid, entries in phases.items():
        failed = [e for e in entries if e["outcome"] == "failed"]
        skipped = [e for e in entries if e["outcome"] == "skipped"]
        called = any(e["when"] == "call" and e["outcome"] == "passed" for e in entries)
        if failed:
            outcomes[nodeid] = Outcome("failed", failed[0]["text"])
        elif skipped:
            outcomes[nodeid] = Outcome("skipped", skipped[0]["text"])
        elif called:
            outcomes[nodeid] = Outcome("passed", "")
    return outcomes


class Reported(pytest.Item):
    """A VM test as this session sees it: the outcome it had in the second run."""

    def __init__(self, *, beside: Beside, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.beside = beside

    def runtest(self) -> None:
        outcome = self.beside.outcome(self.nodeid)
        if outcome.status == "skipped":
            pytest.skip(outcome.text)
        if outcome.status == "failed":
            raise FailedBeside(outcome.text)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str:
        if isinstance(excinfo.value, FailedBeside):
            return f"in the cgroup v2 tests' own pytest run:\n{excinfo.value}"
        return str(super().repr_failure(excinfo, style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


class FailedBeside(Exception):
    """The test failed in the second run; the message is that run's report."""
