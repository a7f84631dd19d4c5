"""The cgroup v2 virtual machine of scripts/cgroup2-host, as the tests use it: shell
commands in the guest, its containers' cgroup files, and an agent process running there.

    guest = Starting(run_dir).wait()          # scripts/cgroup2-host start; Docker answers
    guest.sh("nproc")                        # "2\\n"
    guest.cgroup_files("team-a-web-1a2b3c")  # {"cpu.weight": "20", "memory.max": "max", ...}
    agent = guest.agent(server="http://10.0.2.2:7600", node="vm", log=tmp / "agent.log")
    guest.stop()

The VM does not boot: start restores the guest saved, Docker up, when its image was
built, sets its clock and mounts the repository read-only at /allot there; the agent runs
from it with the guest's python3 (bookworm's 3.11, the version of this project's
virtualenv, whose site-packages it imports the dependencies from).
"""

from __future__ import annotations

import py_compile
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from shared.cpuset import CpuSet

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "cgroup2-host"
HOST_FROM_GUEST = "10.0.2.2"  # QEMU user-mode networking: this machine's loopback
SITE_PACKAGES = f"/allot/.venv/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"
AGENT_PID_FILE = "/run/allot-agent.pid"
STATE_DIR = "/var/lib/allot/agent"
COMMAND_SECONDS = 180  # one command in the emulated guest; docker calls there take seconds
# The v2 files the tests read, beside the effective cpusets the kernel computes.
CGROUP_FILES = (
    "cpuset.cpus",
    "cpuset.cpus.effective",
    "cpuset.mems",
    "cpuset.mems.effective",
    "cpu.weight",
    "cpu.max",
    "cpu.stat",
    "cpu.pressure",
    "memory.max",
    "memory.low",
    "memory.swap.max",
    "memory.current",
    "memory.stat",
)


# Where Docker's systemd driver puts a container: in system.slice, or in its pool's slice
CONTAINER_CGROUP = re.compile(
    r"/sys/fs/cgroup/system\.slice/(system-allotpool_[a-z0-9_]+\.slice/)?docker-[0-9a-f]{64}\.scope"
)
# (a VM's run directory, a container's allot id) -> the cgroup its main process was in
_cgroups: dict[tuple[Path, str], str] = {}


class GuestUnavailable(Exception):
    """scripts/cgroup2-host could not provide the VM; the message says why."""


# The agent's Python environment in the guest.
PYTHON_ENVIRONMENT = {"PYTHONPATH": f"/allot:{SITE_PACKAGES}"}
# The packages the guest's agent imports from the repository, compiled here before a start.
AGENT_PACKAGES = ("agent", "shared")


def compile_for_the_guest() -> None:
    """Write the bytecode of AGENT_PACKAGES beside their sources, where the guest's python3
    (the same 3.11) finds it through the read-only mount. The emulated guest compiled
    them itself in every run: 33 s of the emulator's CPU for the first ``import
    agent.main``, against 11 s with this. Written whatever PYTHONDONTWRITEBYTECODE says
    here, since that only keeps this machine's imports from writing it."""
    for package in AGENT_PACKAGES:
        for source in (REPO / package).rglob("*.py"):
            name = f"{source.stem}.{sys.implementation.cache_tag}.pyc"
            py_compile.compile(str(source), cfile=str(source.parent / "__pycache__" / name))


class Starting:
    """scripts/cgroup2-host start under way in the background, so that the VM's start (a
    restore of the saved guest, 9 to 17 s, or a first run's image build and its boot,
    minutes) overlaps other tests."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._output = run_dir / "start.log"
        compile_for_the_guest()
        with self._output.open("wb") as output:
            self._process = subprocess.Popen(
                [str(SCRIPT), "start", str(run_dir)],
                stdout=output,
                stderr=subprocess.STDOUT,
            )

    def wait(self) -> Guest:
        """The guest once its Docker answers; ``GuestUnavailable`` saying why it does not."""
        status = self._process.wait()
        if status != 0:
            raise GuestUnavailable(self.said() or f"{SCRIPT} start: exit status {status}")
        return Guest(self.run_dir)

    def said(self) -> str:
        """What the start printed so far."""
        return self._output.read_text().strip() if self._output.exists() else ""

    def stop(self) -> None:
        """Stop the VM, started or still starting."""
        if self._process.poll() is None:
            self._process.terminate()
            self._process.wait()
        Guest(self.run_dir).stop()


@dataclass
class Guest:
    run_dir: Path

    def stop(self) -> None:
        subprocess.run([str(SCRIPT), "stop", str(self.run_dir)], check=False, capture_output=True)

    def ssh_argv(self, command: str) -> list[str]:
        return [str(SCRIPT), "ssh", str(self.run_dir), command]

    def sh(self, command: str, *, check: bool = True, timeout: float = COMMAND_SECONDS) -> str:
        """What ``command`` printed; it must succeed unless ``check`` is false."""
        result = subprocess.run(
            self.ssh_argv(command),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"in the guest, {command!r} failed ({result.returncode}): {result.stderr}"
            )
        return result.stdout

    def put(self, directory: Path, into: str) -> None:
        """Copy the files of ``directory`` here into the guest's ``into``, made anew."""
        tar = subprocess.Popen(["tar", "-C", str(directory), "-c", "."], stdout=subprocess.PIPE)
        quoted = shlex.quote(into)
        untar = subprocess.run(
            self.ssh_argv(f"rm -rf {quoted} && mkdir -p {quoted} && tar -C {quoted} -x"),
            stdin=tar.stdout,
            capture_output=True,
            timeout=COMMAND_SECONDS,
            check=False,
        )
        assert (tar.wait(), untar.returncode) == (0, 0), untar.stderr

    def started(self) -> dict[str, str]:
        """Each allot container in the guest, by its allot id: Docker id and start time.
        One the agent removes between the listing and its inspect is left out (inspect
        then says "No such object" and exits 1, having printed the others)."""
        lines = self.sh(
            "docker ps -q --filter label=allot.id | xargs -r docker inspect -f "
            "'{{index .Config.Labels \"allot.id\"}} {{.Id}} {{.State.StartedAt}}'"
            " 2>/dev/null; true"
        ).splitlines()
        return {line.split()[0]: " ".join(line.split()[1:]) for line in lines if line.strip()}

    def docker_id(self, allot_id: str) -> str:
        """The Docker id of the container the agent made for ``allot_id``."""
        found = self.sh(f"docker ps -q --no-trunc --filter label=allot.id={allot_id}").split()
        assert len(found) == 1, f"{allot_id}: {len(found)} running containers in the guest"
        return found[0]

    def cgroup_dir(self, allot_id: str) -> str:
        """The cgroup of the running container the agent made for ``allot_id``, below
        /sys/fs/cgroup: ``system.slice/docker-<id>.scope``, or in its pool's slice
        ``system.slice/system-allotpool_<pool>_<digest>.slice/docker-<id>.scope``."""
        self.cgroup_files(allot_id)
        return _cgroups[(self.run_dir, allot_id)].removeprefix("/sys/fs/cgroup/")

    def cgroup_files(self, allot_id: str) -> dict[str, str]:
        """The v2 files of the running container the agent made for ``allot_id``, by
        name, from its main process's cgroup. Finding that cgroup takes two Docker calls,
        each about 2 s of the emulator's CPU, and the tests poll these files every second
        while they wait: so the cgroup found is kept (``_cgroups``), and read again alone
        while it still holds a process (a container made anew has a cgroup of its own)."""
        names = " ".join(CGROUP_FILES)
        read = f"pwd && for f in {names}; do printf '%s\\0' \"$f\"; cat \"$f\"; printf '\\0'; done"
        kept = _cgroups.get((self.run_dir, allot_id))
        said = ""
        if kept is not None:
            alive = f"cd {shlex.quote(kept)} && grep -q . cgroup.procs"
            said = self.sh(f"{alive} && {read}", check=False)
        if not said:
            said = self.sh(
                f"pid=$(docker ps -q --filter label=allot.id={allot_id} | "
                f"xargs -r docker inspect -f '{{{{.State.Pid}}}}') && "
                f'cd "/sys/fs/cgroup$(sed -n "s/^0:://p" /proc/$pid/cgroup)" && {read}'
            )
        where, _, rest = said.partition("\n")
        assert CONTAINER_CGROUP.fullmatch(where), where
        _cgroups[(self.run_dir, allot_id)] = where
        parts = rest.split("\0")
        return {parts[i]: parts[i + 1].strip() for i in range(0, len(parts) - 1, 2)}

    @cached_property
    def runc_version(self) -> str:
        """The version of the guest's runc, e.g. "1.1.5"."""
        first = self.sh("runc --version").splitlines()[0]  # "runc version 1.1.5+ds1"
        return first.split()[2]

    @cached_property
    def online(self) -> CpuSet:
        """The guest's online CPUs."""
        return CpuSet.parse(self.sh("cat /sys/devices/system/cpu/online").strip())

    @cached_property
    def memory_nodes(self) -> CpuSet:
        """The guest's memory (NUMA) nodes."""
        return CpuSet.parse(self.sh("cat /sys/devices/system/node/online").strip())

    def agent_command(self, *, server: str, node: str, token: str) -> str:
        """The shell command that runs an agent in the guest, its pid in AGENT_PID_FILE."""
        environment = PYTHON_ENVIRONMENT | {"ALLOT_AGENT_JOIN_TOKEN": token}
        argv = [
            "python3",
            "-c",
            "from agent.main import main; main()",
            "run",
            f"--server={server}",
            f"--node-name={node}",
            f"--state-dir={STATE_DIR}",
            "--backoff-initial-seconds=0.2",
            "--backoff-max-seconds=1",
            "--stop-timeout-seconds=1",
            # the emulated guest's dockerd takes tens of seconds to answer at times
            "--docker-timeout-seconds=120",
        ]
        return (
            f"mkdir -p {STATE_DIR} && echo $$ > {AGENT_PID_FILE} && "
            f"exec {shlex.join(['env', *_assignments(environment), *argv])} 2>&1"
        )

    def start_agent(
        self, *, server: str, node: str, token: str, log: Path
    ) -> subprocess.Popen[bytes]:
        """An agent in the guest; its lines are appended to ``log`` on this machine."""
        with log.open("ab") as handle:
            return subprocess.Popen(
                self.ssh_argv(self.agent_command(server=server, node=node, token=token)),
                stdout=handle,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def kill9_agent(self) -> None:
        """SIGKILL to the guest's agent, by the pid it wrote, and wait until it is gone."""
        self.sh(
            f"pid=$(cat {AGENT_PID_FILE}) && kill -9 $pid && "
            f"while kill -0 $pid 2>/dev/null; do sleep 0.1; done"
        )


def _assignments(environment: dict[str, str]) -> list[str]:
    return [f"{name}={value}" for name, value in environment.items()]
