"""How the session reads the outcomes of a group's own pytest run (tests/beside.py): a test
passes only when its call passed and no phase failed; one the run never reached fails."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.beside import TURN_NAME, Beside, Outcome, _read
from tests.test_quiet import collected


def phase(nodeid: str, when: str, outcome: str, text: str = "") -> str:
    return json.dumps({"nodeid": nodeid, "when": when, "outcome": outcome, "text": text})


def test_each_test_gets_the_outcome_of_its_worst_phase(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    lines = [
        phase("t.py::passes", "setup", "passed"),
        phase("t.py::passes", "call", "passed"),
        phase("t.py::passes", "teardown", "passed"),
        phase("t.py::fails", "setup", "passed"),
        phase("t.py::fails", "call", "failed", "assert 1 == 2"),
        phase("t.py::fails", "teardown", "passed"),
        phase("t.py::breaks_in_setup", "setup", "failed", "the VM could not be provided"),
        phase("t.py::breaks_in_teardown", "setup", "passed"),
        phase("t.py::breaks_in_teardown", "call", "passed"),
        phase("t.py::breaks_in_teardown", "teardown", "failed", "left a container"),
        phase("t.py::skipped", "setup", "skipped", "opted out"),
        phase("t.py::never_called", "setup", "passed"),
    ]
    results.write_text("\n".join(lines) + "\n")
    assert _read(results) == {
        "t.py::passes": Outcome("passed", ""),
        "t.py::fails": Outcome("failed", "assert 1 == 2"),
        "t.py::breaks_in_setup": Outcome("failed", "the VM could not be provided"),
        "t.py::breaks_in_teardown": Outcome("failed", "left a container"),
        "t.py::skipped": Outcome("skipped", "opted out"),
    }


def test_a_test_the_run_did_not_reach_fails_with_the_end_of_its_output(tmp_path: Path) -> None:
    said = "collected 0 items\nERROR: boom"
    with (tmp_path / "pytest.log").open("wb") as log:
        code = f"print({said!r}); raise SystemExit(4)"
        process = subprocess.Popen([sys.executable, "-c", code], stdout=log)
    outcome = Beside(tmp_path, process).outcome("t.py::lost")
    assert outcome.status == "failed"
    assert "exit status 4" in outcome.text
    assert "ERROR: boom" in outcome.text


def test_the_first_outcome_gives_the_run_its_turn_for_the_quiet_tests(tmp_path: Path) -> None:
    # a run whose quiet test waits for its turn, then records its outcome
    turn, results = tmp_path / TURN_NAME, tmp_path / "results.jsonl"
    line = phase("t.py::quiet", "call", "passed")
    code = (
        "import pathlib, time\n"
        f"while not pathlib.Path({str(turn)!r}).exists(): time.sleep(0.05)\n"
        f"pathlib.Path({str(results)!r}).write_text({line!r} + '\\n')\n"
    )
    process = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    assert Beside(tmp_path, process).outcome("t.py::quiet", within=60) == Outcome("passed", "")


def test_a_run_that_outlasts_its_bound_is_stopped_and_its_tests_fail(tmp_path: Path) -> None:
    (tmp_path / "pytest.log").write_text("tests/cgroup_v2/test_x.py::test_y still measuring\n")
    process = subprocess.Popen(["sleep", "60"], start_new_session=True)
    outcome = Beside(tmp_path, process).outcome("t.py::late", within=0.5)
    assert process.poll() is not None  # stopped, not left behind
    assert outcome.status == "failed"
    assert "had not ended 0 s after this session's other tests" in outcome.text
    assert "still measuring" in outcome.text


def test_the_session_runs_its_own_tests_then_each_groups_the_vms_and_the_quiet_ones() -> None:
    docker, e2e = "tests/docker/test_smoke.py", "tests/e2e/test_extended.py"
    in_the_vm = "tests/cgroup_v2/test_agent_on_cgroup_v2.py"
    pools_on_host = "tests/docker/test_pools_on_host.py"
    ids = collected(pools_on_host, in_the_vm, e2e, docker, "tests/test_beside.py")
    files = [i.split("::")[0] for i in ids]
    runs = [f for n, f in enumerate(files) if n == 0 or files[n - 1] != f]
    # the VM's quiet test is its last; the quiet ones: the host's, then the VM's
    assert runs == ["tests/test_beside.py", docker, e2e, in_the_vm, pools_on_host, in_the_vm]
