"""Whether the embedded store's writes fail, and why: said once when they start failing
(or fail for another cause), once when one succeeds again, and asked by ``/readyz``.

    health = WriteHealth(data_dir)
    health.failed("database or disk is full")
    # ERROR store writes fail: database or disk is full data_dir=/var/lib/allot free_bytes=0
    health.problem      # 'database or disk is full (0 bytes free in /var/lib/allot)'
    health.succeeded()
    # INFO store writes succeed again data_dir=/var/lib/allot free_bytes=1048576

A full disk fails every write until space is freed; a line per refused request would
bury the one line that says what to do.
"""

from __future__ import annotations

import os
from pathlib import Path

from shared.logs import get_logger

log = get_logger("allot.coordinator.store")


def free_bytes(directory: Path) -> int:
    """The bytes an unprivileged writer may still use on ``directory``'s filesystem."""
    stats = os.statvfs(directory)
    return stats.f_bavail * stats.f_frsize


def disk_note(directory: Path) -> str:
    """``"N bytes free in DIR"``, for messages about a failed write or open."""
    try:
        return f"{free_bytes(directory)} bytes free in {directory}"
    except OSError as error:
        return f"free space in {directory} unknown: {error.strerror}"


class WriteHealth:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._cause = ""  # why writes fail now; "" while they succeed
        self._problem = ""

    @property
    def problem(self) -> str:
        """Why writes fail, with the free space when it was noticed; "" when they succeed."""
        return self._problem

    def failed(self, cause: str) -> None:
        if cause == self._cause:
            return
        self._cause = cause
        self._problem = f"{cause} ({disk_note(self.directory)})"
        log.error(f"store writes fail: {cause}", data_dir=self.directory, **self._space())

    def succeeded(self) -> None:
        if not self._cause:
            return
        self._cause = self._problem = ""
        log.info("store writes succeed again", data_dir=self.directory, **self._space())

    def _space(self) -> dict[str, object]:
        try:
            return {"free_bytes": free_bytes(self.directory)}
        except OSError as error:
            return {"free_bytes": f"unknown ({error.strerror})"}
