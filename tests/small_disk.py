"""A small tmpfs of a test's own, to fill up: ``small_disk`` (a fixture) and ``fill``.

Mounting needs root (or CAP_SYS_ADMIN). Without it a test that asks for the disk fails
and says so, unless ``ALLOT_SKIP_MOUNT_TESTS=1`` asks to skip it, as with the other real
parts the tests use.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

OPT_OUT = "ALLOT_SKIP_MOUNT_TESTS"
SIZE = "2m"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs mounted for this test alone, unmounted afterwards."""
    if os.environ.get(OPT_OUT) == "1":
        pytest.skip(f"{OPT_OUT}=1: tests that mount a filesystem skipped on request")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.fail(
            f"cannot mount a tmpfs ({mounted.stderr.strip()}): run the tests as root, or set"
            f" {OPT_OUT}=1 to skip the tests that need one on purpose",
            pytrace=False,
        )
    try:
        yield disk
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=True)


def fill(disk: Path) -> Path:
    """A file on ``disk`` that takes every free byte of it."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (65536, 4096, 512, 1):  # down to the last partial block
            _write_until_full(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


def _write_until_full(fd: int, block: bytes) -> None:
    while True:
        try:
            os.write(fd, block)
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
            return
