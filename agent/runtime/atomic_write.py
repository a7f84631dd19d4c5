"""Writing a file so that a reader, or the next start after a crash, finds either its
previous content or the new one, never part of either.

    write_atomically(path, data)
    keeper = QuietWriter("cannot write the agent state for allot-agent status")
    keeper.write(path, data)          # a failure is that warning, once per reason
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from shared.logs import get_logger

log = get_logger("allot.agent.runtime")


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to a file beside ``path``, then rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as f:
        f.write(data)
    os.replace(f.name, path)


class QuietWriter:
    """Writes a file the agent can run without (its status, what it applied). One that
    cannot be written is the ``warning`` with the reason, logged once until the reason
    changes or a write succeeds: the reconcile loop writes on every pass."""

    def __init__(self, warning: str) -> None:
        self._warning = warning
        self._problem = ""

    def write(self, path: Path, data: bytes) -> None:
        try:
            write_atomically(path, data)
        except OSError as error:
            reason = f"{error.strerror or error}: {error.filename or path}"
            if reason != self._problem:
                log.warning(self._warning, reason=reason)
            self._problem = reason
        else:
            self._problem = ""
