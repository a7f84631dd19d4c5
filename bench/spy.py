"""A sampling profile of another process over a window, with py-spy, for the benchmarks.

    spy = Spy(pid, Path("profile.txt"))   # py-spy starts sampling
    ...                                   # the window
    spy.stop()                            # py-spy writes its collapsed stacks
    for line in top_of(Path("profile.txt"), 15): print(line)

py-spy is not a dependency of the project: ``.venv/bin/pip install py-spy`` where it is
wanted. It samples without pausing the process (``--nonblocking``), so the profiled
process runs as it would, at the price of a torn stack now and then. It needs the right
to trace the process (root, or ``ptrace_scope`` 0 for one's own processes).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

RATE = 100  # samples a second


class Spy:
    def __init__(self, pid: int, output: Path) -> None:
        binary = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which(
            "py-spy"
        )
        if binary is None:
            raise SystemExit("no py-spy: .venv/bin/pip install py-spy (not a project dependency)")
        self.output = output
        self._process = subprocess.Popen(
            [
                binary,
                "record",
                f"--pid={pid}",
                f"--rate={RATE}",
                "--nonblocking",
                "--format=raw",
                f"--output={output}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def stop(self) -> None:
        """Ends the sampling; py-spy writes the stacks as it exits."""
        self._process.send_signal(signal.SIGINT)
        try:
            _, errors = self._process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            _, errors = self._process.communicate()
        if not self.output.exists():
            raise RuntimeError(f"py-spy wrote no profile: {errors.decode(errors='replace')}")


def top_of(profile: Path, count: int) -> list[str]:
    """The ``count`` functions most often on top of the stack (self) and on it at all
    (inclusive), as shares of the samples, from py-spy's collapsed stacks."""
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    samples = 0
    for line in profile.read_text().splitlines():
        stack, _, times = line.rpartition(" ")
        if not stack or not times.isdigit():
            continue
        n = int(times)
        frames = [frame.split(" (")[0] + _place(frame) for frame in stack.split(";")]
        samples += n
        own[frames[-1]] += n
        for frame in set(frames):
            anywhere[frame] += n
    if not samples:
        return ["no samples"]
    lines = [f"{samples:,} samples at {RATE}/s; self:"]
    lines += [f"  {n / samples:6.1%}  {frame}" for frame, n in own.most_common(count)]
    lines.append("inclusive:")
    lines += [f"  {n / samples:6.1%}  {frame}" for frame, n in anywhere.most_common(count)]
    return lines


def _place(frame: str) -> str:
    """`` (file)`` of a frame ``name (path/file.py:line)``, without the line, shortened."""
    _, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0]
    parts = Path(path).parts
    return f" ({'/'.join(parts[-2:])})" if parts else ""
