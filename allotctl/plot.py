"""The seed's two graphs for each integral pool of a simulation (pools spec section 8):
usage and demand over time, in cores; accumulated volume over time with the capacity
line. matplotlib is the optional extra ``allot[plot]``, imported only when drawing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

HOUR = 3600.0


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def plot_simulation(steps: list[dict[str, Any]], out: Path, resource: str = "cpu") -> list[str]:
    """Draw ``simulate``'s steps into the PNG ``out``; returns the pools drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display: render to the file only
        from matplotlib import pyplot
    except ImportError as error:
        raise PlotUnavailable("--plot needs matplotlib: pip install 'allot[plot]'") from error
    pools = (
        sorted(
            name
            for name, pool in steps[0]["pools"].items()
            if pool["integral_guarantee_type"] != "none"
        )
        if steps
        else []
    )
    if not pools:
        raise ValueError("the simulation has no burst or relaxed pool to draw")
    hours = [step["time"] / HOUR for step in steps]
    figure, axes = pyplot.subplots(2, len(pools), figsize=(6 * len(pools), 7), squeeze=False)
    for column, name in enumerate(pools):
        series = [step["pools"][name] for step in steps]
        usage, volume = axes[0][column], axes[1][column]
        usage.plot(hours, [p["usage_resources"].get(resource, 0.0) for p in series], label="usage")
        usage.plot(
            hours, [p["demand_resources"].get(resource, 0.0) for p in series], "--", label="demand"
        )
        usage.set_title(f"{name} ({series[0]['integral_guarantee_type']}): {resource}")
        usage.set_ylabel(f"{resource} (cores)" if resource == "cpu" else resource)
        usage.legend()
        accumulated = [(p["accumulated_resource_volume"] or {}).get(resource, 0.0) for p in series]
        capacity = [(p["integral_pool_capacity"] or {}).get(resource, 0.0) for p in series]
        volume.plot(hours, accumulated, label="accumulated volume")
        volume.plot(hours, capacity, ":", label="capacity")
        volume.set_ylabel(f"{resource} x seconds")
        volume.set_xlabel("hours")
        volume.legend()
    figure.tight_layout()
    figure.savefig(out, format="png")
    pyplot.close(figure)
    return pools
