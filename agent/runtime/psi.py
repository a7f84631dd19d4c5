"""The kernel's pressure stall information (PSI) for CPU, as its files print it.

    psi_averages("some avg10=39.65 avg60=38.82 avg300=27.82 total=3460158711\n"
                 "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")   -> (39.65, 38.82)

``/proc/pressure/cpu`` (the whole host, kernels >= 4.20 built with PSI) and a cgroup v2
group's ``cpu.pressure`` share this format: "some" is the share of wall time in which at
least one runnable task waited for a CPU, averaged over 10, 60 and 300 s, in percent.
"""

from __future__ import annotations


def psi_averages(text: str) -> tuple[float, float]:
    """(avg10, avg60) of the "some" line of a PSI file, e.g.
    ``some avg10=39.65 avg60=38.82 avg300=27.82 total=3460158711``; ``ValueError`` for
    a text without such a line or with a figure out of 0..100."""
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind != "some":
            continue
        fields = dict(field.split("=", 1) for field in rest.split() if "=" in field)
        try:
            averages = float(fields["avg10"]), float(fields["avg60"])
        except KeyError as missing:
            raise ValueError(f"PSI line without {missing}: {line!r}") from None
        if not all(0 <= figure <= 100 for figure in averages):  # also refuses NaN
            raise ValueError(f"PSI average out of 0..100: {line!r}")
        return averages
    raise ValueError("no 'some' line in the PSI text")
