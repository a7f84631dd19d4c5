"""A small reader over ``<root>/sys`` that turns kernel attribute files into values.

Discovery takes the root as a parameter so tests can point it at a recorded tree in a
temporary directory; on a host it is ``Sysfs(Path("/"))``. A missing file is normal
(older kernels, containers, platforms without NUMA) and reads as None; a file that is
present but holds something the kernel would never print raises SysfsError.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from shared.cpuset import CpuSet

T = TypeVar("T")


class SysfsError(ValueError):
    """A sysfs file holds a value that is not in the format the kernel prints there."""


class Sysfs:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, rel: str) -> Path:
        """The file for ``rel``, a path relative to ``<root>/sys``."""
        return self.root / "sys" / rel

    def text(self, rel: str) -> str | None:
        """The content without surrounding whitespace; None when missing or unreadable."""
        try:
            # Undecodable bytes survive as U+FFFD so the parsers below report them as garbage.
            return self.path(rel).read_text(errors="replace").strip()
        except OSError:
            return None

    def integer(self, rel: str) -> int | None:
        return self._parse(rel, int, "an integer")

    def integers(self, rel: str) -> list[int] | None:
        """A space-separated row of integers, like a NUMA node's ``distance``."""
        return self._parse(rel, lambda text: [int(word) for word in text.split()], "integers")

    def cpuset(self, rel: str) -> CpuSet | None:
        return self._parse(rel, CpuSet.parse, "a CPU list like '0-3,8'")

    def entries(self, rel: str) -> list[str]:
        """Names in the directory ``rel``, sorted; [] when it is missing."""
        try:
            return sorted(child.name for child in self.path(rel).iterdir())
        except OSError:
            return []

    def _parse(self, rel: str, parse: Callable[[str], T], expected: str) -> T | None:
        text = self.text(rel)
        if text is None:
            return None
        try:
            return parse(text)
        except ValueError:
            raise SysfsError(f"{self.path(rel)} holds {text!r}, expected {expected}") from None
