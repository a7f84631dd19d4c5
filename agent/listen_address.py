"""A listening address as an operator writes it: ``host:port``, ``[v6]:port``.

    split_host_port("127.0.0.1:7601")   # ("127.0.0.1", 7601)
    split_host_port("[::1]:7601")       # ("::1", 7601)
    split_host_port(":7601")            # ("", 7601): every address

Port 0 is taken (the kernel picks one: the tests read it back from the log).
"""

from __future__ import annotations

MAX_PORT = 65535


def split_host_port(address: str) -> tuple[str, int]:
    """``address`` as host and port; ``ValueError`` saying what is wrong otherwise."""
    host, colon, port = address.rpartition(":")
    if not colon or not port.isascii() or not port.isdigit():
        raise ValueError(f"{address!r} is not host:port, e.g. 127.0.0.1:7601")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{address!r}: write an IPv6 address in brackets, e.g. [::1]:7601")
    number = int(port)
    if number > MAX_PORT:
        raise ValueError(f"{address!r}: port {number} is above {MAX_PORT}")
    return host, number
