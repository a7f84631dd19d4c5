"""One line per event: ``message key=value ...``, human words first, context after.

    log = get_logger("allot.agent")
    log.info("registered with coordinator", node="n1", lease_s=15.0)
    # 2026-11-21T09:10:00.123Z INFO registered with coordinator node=n1 lease_s=15.0

Under systemd (``JOURNAL_STREAM`` set) the timestamp and level give way to the syslog
priority prefix (``<3>`` error, ``<4>`` warning, ``<6>`` info, ``<7>`` debug), which
journald strips and stores, so ``journalctl -p warning`` works.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Mapping
from typing import IO

LEVELS = ("debug", "info", "warning", "error")

_SYSLOG_PRIORITY = {
    logging.DEBUG: 7,
    logging.INFO: 6,
    logging.WARNING: 4,
    logging.ERROR: 3,
    logging.CRITICAL: 2,
}
_FIELDS = "allot_fields"


def format_value(value: object) -> str:
    """A value as logfmt writes it: bare when it is one token, double-quoted otherwise."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if text and not any(c.isspace() or c in '"=\\' for c in text):
        return text
    escaped = _one_line(text.replace("\\", "\\\\").replace('"', '\\"'))
    return f'"{escaped}"'


def _one_line(text: str) -> str:
    """Line breaks written as escapes, so one event stays one line (and one journal entry)."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


class EventFormatter(logging.Formatter):
    def __init__(self, *, journal: bool) -> None:
        super().__init__()
        self._journal = journal

    def format(self, record: logging.LogRecord) -> str:
        fields = fields_of(record)
        line = _one_line(record.getMessage())
        if fields:
            line += " " + " ".join(f"{k}={format_value(v)}" for k, v in fields.items())
        if record.exc_info:
            exc = record.exc_info[1]
            line += f" error={format_value(f'{type(exc).__name__}: {exc}')}"
        if self._journal:
            priority = _SYSLOG_PRIORITY.get(record.levelno, 6)
            return f"<{priority}>{line}"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        return f"{stamp}.{int(record.msecs):03d}Z {record.levelname} {line}"


class EventLogger:
    """A thin face on a stdlib logger that takes the context as keyword arguments."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def debug(self, message: str, /, **fields: object) -> None:
        self._log(logging.DEBUG, message, fields)

    def info(self, message: str, /, **fields: object) -> None:
        self._log(logging.INFO, message, fields)

    def warning(self, message: str, /, **fields: object) -> None:
        self._log(logging.WARNING, message, fields)

    def error(self, message: str, /, **fields: object) -> None:
        self._log(logging.ERROR, message, fields)

    def exception(self, message: str, /, **fields: object) -> None:
        """An error with the exception being handled appended as ``error=...``."""
        self._logger.error(message, exc_info=True, extra={_FIELDS: fields})

    def _log(self, level: int, message: str, fields: dict[str, object]) -> None:
        if self._logger.isEnabledFor(level):
            self._logger.log(level, message, extra={_FIELDS: fields})


def fields_of(record: logging.LogRecord) -> Mapping[str, object]:
    """The key=value context an ``EventLogger`` attached to a record."""
    fields: Mapping[str, object] = getattr(record, _FIELDS, {})
    return fields


def get_logger(name: str) -> EventLogger:
    return EventLogger(logging.getLogger(name))


def configure(level: str, *, stream: IO[str] | None = None, journal: bool | None = None) -> None:
    """Send allot's loggers to ``stream`` (stderr) at ``level``, one line per event."""
    if level not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    if journal is None:
        journal = bool(os.environ.get("JOURNAL_STREAM"))
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(EventFormatter(journal=journal))
    root = logging.getLogger("allot")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
