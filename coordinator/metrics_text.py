"""A gauge family written straight as Prometheus exposition text, for the families with a
series per node or per container: through prometheus_client's families each sample cost
about 25 us to build and print, and a scrape of the 480,000 samples of 10,000 nodes and
200,000 containers took 8.7 s at best, 11.6 s at the median (bench/metrics_scrape.py,
wall time, load about 12); a line of text costs a few microseconds.

    cpu = TextGauge("allot_node_cpu_cores", "A node's CPU.", ("node", "kind"))
    cpu.header()                    # '# HELP allot_node_cpu_cores A node's CPU.\\n# TYPE ...'
    cpu.line(("n1", "offered"), 24)  # 'allot_node_cpu_cores{node="n1",kind="offered"} 24.0\\n'

A family is its header, then its lines, which the writer yields one at a time (never a
list of them built first), so that a scrape can hand the event loop back between any
two lines (``Metrics.render_in_slices``).
"""

from __future__ import annotations

from collections.abc import Sequence


class TextGauge:
    def __init__(self, name: str, help_text: str, labels: Sequence[str]) -> None:
        self._name = name
        self._help = help_text.replace("\\", "\\\\").replace("\n", "\\n")
        self._labels = tuple(labels)

    def header(self) -> str:
        """The family's HELP and TYPE lines, which come first."""
        return f"# HELP {self._name} {self._help}\n# TYPE {self._name} gauge\n"

    def line(self, values: Sequence[str], value: float) -> str:
        """One sample: ``values`` of the labels, in their order. O(labels)."""
        pairs = ",".join(
            f'{label}="{_escaped(v)}"' for label, v in zip(self._labels, values, strict=True)
        )
        return f"{self._name}{{{pairs}}} {float(value)!r}\n"


def _escaped(value: str) -> str:
    """A label value as the text format writes it (names rarely need it: checked first)."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value
