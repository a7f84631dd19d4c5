"""How large a value from a peer may be: the bounds the wire types are declared with.

An agent is untrusted input. Every number it sends has a range and every string and list
a length, so that a value outside them is refused while the frame is decoded (msgspec
checks ``Meta`` constraints there) and never reaches the coordinator's state:

    hostname: Name                          # at most MAX_NAME characters
    problems: Annotated[list[Message], Meta(max_length=MAX_MESSAGES)]

The limits are far above what a real host reports (the largest single-image hosts have
a few thousand CPUs and tens of TiB of memory), and far below what would overflow a
64-bit integer when a cluster's figures are added up.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from shared.cpuset import MAX_CPU_ID

MAX_NAME = 253  # a DNS name; also ids, hostnames, versions and states
MAX_MESSAGE = 4096  # characters of one problem or error text
MAX_MESSAGES = 64  # problems or drift notes in one report
MAX_MEMORY = 2**50  # bytes: 1 PiB, of one host or used by one container
MAX_CPUS = MAX_CPU_ID + 1
MAX_SHOWN = 80  # characters of a peer's value quoted in a message
INT64_MAX = 2**63 - 1

Name = Annotated[str, Meta(max_length=MAX_NAME)]
Message = Annotated[str, Meta(max_length=MAX_MESSAGE)]
Messages = Annotated[list[Message], Meta(max_length=MAX_MESSAGES)]
Revision = Annotated[int, Meta(ge=0, le=INT64_MAX)]


def clipped(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut to at most ``limit`` characters, marked with "..." where it was cut,
    for a message of our own (an engine's error text) that must fit a ``Message``."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shown(value: object) -> str:
    """``repr(value)`` cut to ``MAX_SHOWN`` characters: a peer's value quoted in a message
    or a log line, however long it was."""
    return clipped(repr(value), MAX_SHOWN)
