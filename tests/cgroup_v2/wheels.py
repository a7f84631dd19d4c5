"""The wheelhouse the install tests copy into the VM: allot and its dependencies as wheels,
and pip's own, as the README says to make them for a host without a package index.

    build = WheelBuild()               # pip wheel under way in the background
    wheels = build.wait()              # the directory, once every wheel is there

The VM's run starts the build as its collection ends, beside the VM's start and the agent tests
(tests/cgroup_v2/conftest.py): built when the install tests came to it, the guest idled
for about 40 s while this machine made the wheels.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.cgroup_v2.guest import REPO

PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
BUILD_SECONDS = 600.0


def pip_wheel_argv(*sources: str | Path, into: Path) -> list[str]:
    return [*PIP, "wheel", "--quiet", *map(str, sources), "--wheel-dir", str(into)]


def pip_wheel(*sources: str | Path, into: Path) -> None:
    subprocess.run(pip_wheel_argv(*sources, into=into), check=True, timeout=BUILD_SECONDS, cwd=into)


class WheelBuild:
    """``pip wheel`` of this checkout and pip into ``into``, in a new temporary directory
    that also holds its log (shown should the build fail), in the background."""

    def __init__(self) -> None:
        self._directory = Path(tempfile.mkdtemp(prefix="allot-wheels-"))
        self.into = self._directory / "wheels"
        self.into.mkdir()
        self._log = self._directory / "pip-wheel.log"
        with self._log.open("wb") as log:
            self._process = subprocess.Popen(
                pip_wheel_argv(REPO, "pip", into=self.into),
                cwd=self.into,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def wait(self) -> Path:
        status = self._process.wait(timeout=BUILD_SECONDS)
        if status != 0:
            raise AssertionError(f"pip wheel failed ({status}):\n{self._log.read_text()}")
        return self.into

    def remove(self) -> None:
        """Stop the build if it still runs, and remove its directory."""
        if self._process.poll() is None:
            self._process.terminate()
            self._process.wait()
        shutil.rmtree(self._directory, ignore_errors=True)
