"""shared.logs: one ``message key=value`` line per event, journald-aware."""

from __future__ import annotations

import io
import logging
import re

import pytest

from shared.logs import EventFormatter, configure, format_value, get_logger

TIMESTAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR) ")


pytestmark = pytest.mark.usefixtures("restore_allot_logger")


def configured(level: str = "debug", *, journal: bool | None = None) -> io.StringIO:
    stream = io.StringIO()
    configure(level, stream=stream, journal=journal)
    return stream


def lines_of(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


# --- format_value ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("n1", "n1"),
        (15.0, "15.0"),
        (3, "3"),
        (None, "-"),
        (True, "true"),
        (False, "false"),
        ("", '""'),
        ("two words", '"two words"'),
        ("tab\there", '"tab\there"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("a=b", '"a=b"'),
        ("C:\\dir", '"C:\\\\dir"'),
        ("line1\nline2", '"line1\\nline2"'),
        ("/v1/agent?x", "/v1/agent?x"),
        (["a", "b"], "\"['a', 'b']\""),
    ],
    ids=[
        "bare-word",
        "float",
        "int",
        "none",
        "true",
        "false",
        "empty",
        "space",
        "tab",
        "quotes",
        "equals",
        "backslash",
        "newline",
        "punctuation-stays-bare",
        "list-repr-has-spaces",
    ],
)
def test_format_value(value: object, expected: str) -> None:
    assert format_value(value) == expected


def test_escaped_value_never_spans_lines() -> None:
    assert "\n" not in format_value("a\nb\n\nc")
    assert format_value("a\r\nb") == '"a\\r\\nb"'


# --- EventFormatter ----------------------------------------------------------------------


def record(level: int, message: str, fields: dict[str, object] | None = None) -> logging.LogRecord:
    made = logging.LogRecord("allot.test", level, __file__, 1, message, None, None)
    if fields is not None:
        made.allot_fields = fields
    return made


def test_fields_follow_the_message_in_order() -> None:
    line = EventFormatter(journal=True).format(
        record(logging.INFO, "registered", {"node": "n1", "lease_s": 15.0, "attempt": 2})
    )
    assert line == "<6>registered node=n1 lease_s=15.0 attempt=2"


def test_message_without_fields_has_no_trailing_space() -> None:
    assert EventFormatter(journal=True).format(record(logging.INFO, "started")) == "<6>started"


@pytest.mark.parametrize(
    ("level", "prefix"),
    [
        (logging.ERROR, "<3>"),
        (logging.WARNING, "<4>"),
        (logging.INFO, "<6>"),
        (logging.DEBUG, "<7>"),
        (logging.CRITICAL, "<2>"),
    ],
    ids=["error", "warning", "info", "debug", "critical"],
)
def test_journal_line_starts_with_syslog_priority(level: int, prefix: str) -> None:
    line = EventFormatter(journal=True).format(record(level, "event", {"k": "v"}))
    assert line == f"{prefix}event k=v"


def test_plain_line_starts_with_utc_timestamp_and_level() -> None:
    made = record(logging.WARNING, "slow", {"ms": 1500})
    made.created = 1_700_000_000.25  # 2023-11-14T22:13:20.250 UTC
    made.msecs = 250.0
    line = EventFormatter(journal=False).format(made)
    assert line == "2023-11-14T22:13:20.250Z WARNING slow ms=1500"


# --- configure and EventLogger -----------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "prefix"),
    [("error", "<3>"), ("warning", "<4>"), ("info", "<6>"), ("debug", "<7>")],
    ids=["error", "warning", "info", "debug"],
)
def test_logger_methods_in_journal_mode(method: str, prefix: str) -> None:
    stream = configured(journal=True)
    getattr(get_logger("allot.test"), method)("hello there", node="n 1", ok=True, gone=None)
    assert lines_of(stream) == [f'{prefix}hello there node="n 1" ok=true gone=-']


def test_logger_in_plain_mode_writes_timestamp_then_level() -> None:
    stream = configured(journal=False)
    log = get_logger("allot.test")
    log.info("one", a=1)
    log.error("two")
    first, second = lines_of(stream)
    assert TIMESTAMPED.match(first)
    assert first.endswith(" INFO one a=1")
    assert TIMESTAMPED.match(second)
    assert second.endswith(" ERROR two")
    assert not first.startswith("<")


def test_exception_appends_the_error() -> None:
    stream = configured(journal=True)
    log = get_logger("allot.test")
    try:
        raise ConnectionError("peer went away")
    except ConnectionError:
        log.exception("link lost", node="n1")
    assert lines_of(stream) == ['<3>link lost node=n1 error="ConnectionError: peer went away"']


def test_exception_with_a_one_word_message() -> None:
    stream = configured(journal=True)
    try:
        raise KeyError("x")
    except KeyError:
        get_logger("allot.test").exception("lookup failed")
    assert lines_of(stream) == ["<3>lookup failed error=\"KeyError: 'x'\""]


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        ("debug", ["<7>d", "<6>i", "<4>w", "<3>e"]),
        ("info", ["<6>i", "<4>w", "<3>e"]),
        ("warning", ["<4>w", "<3>e"]),
        ("error", ["<3>e"]),
    ],
    ids=["debug", "info", "warning", "error"],
)
def test_level_filtering(level: str, expected: list[str]) -> None:
    stream = configured(level, journal=True)
    log = get_logger("allot.filtering")
    log.debug("d")
    log.info("i")
    log.warning("w")
    log.error("e")
    assert lines_of(stream) == expected


def test_configure_takes_over_the_allot_logger() -> None:
    stream = configured("warning", journal=True)
    logger = logging.getLogger("allot")
    assert logger.level == logging.WARNING
    assert logger.propagate is False
    assert len(logger.handlers) == 1
    configure("info", stream=stream, journal=True)  # again: replaced, not added
    assert len(logger.handlers) == 1


def test_loggers_outside_allot_are_not_captured() -> None:
    stream = configured(journal=True)
    get_logger("other.library").error("not ours")
    assert stream.getvalue() == ""


@pytest.mark.parametrize("level", ["verbose", "INFO", "", "critical"])
def test_configure_refuses_unknown_level(level: str) -> None:
    with pytest.raises(ValueError, match="is not one of debug, info, warning, error"):
        configure(level, stream=io.StringIO())


@pytest.mark.parametrize(
    ("journal_stream", "journal"),
    [("8:12345", True), (None, False), ("", False)],
    ids=["set", "unset", "empty"],
)
def test_configure_detects_journal_from_environment(
    monkeypatch: pytest.MonkeyPatch, journal_stream: str | None, journal: bool
) -> None:
    if journal_stream is None:
        monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    else:
        monkeypatch.setenv("JOURNAL_STREAM", journal_stream)
    stream = configured("info")
    get_logger("allot.test").info("ready")
    (line,) = lines_of(stream)
    if journal:
        assert line == "<6>ready"
    else:
        assert TIMESTAMPED.match(line)
        assert line.endswith(" INFO ready")


def test_explicit_journal_flag_wins_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOURNAL_STREAM", "8:12345")
    stream = configured("info", journal=False)
    get_logger("allot.test").info("ready")
    assert TIMESTAMPED.match(stream.getvalue())


def test_a_message_with_line_breaks_stays_one_journal_entry() -> None:
    line = EventFormatter(journal=True).format(record(logging.WARNING, "first\nsecond\rthird"))
    assert line == "<4>first\\nsecond\\rthird"
