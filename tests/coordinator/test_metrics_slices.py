"""A scrape written in slices (``Metrics.render_in_slices``, what ``GET /metrics`` sends):
the same text as one written in one go (``Metrics.render``), valid for ``promtool check
metrics``; the event loop runs other tasks between its slices; and containers removed
from the books between two slices leave a valid text, never an error.

The books are those of ``bench/metrics_scrape.py`` at a small size: nodes with bound and
unbound containers, every placed one reported running with its usage, some pending."""

from __future__ import annotations

import asyncio
import subprocess

from bench.metrics_scrape import BuiltFleet, build
from coordinator.deployments.decision import Decision
from coordinator.metrics import Metrics
from coordinator.metrics_deployments import DeploymentCollector
from coordinator.metrics_nodes import NodeFigures
from coordinator.metrics_usage import ContainerUsage
from tests.prometheus.tools import tool


def metrics_of(fleet: BuiltFleet) -> Metrics:
    metrics = Metrics()
    metrics.follow(DeploymentCollector(fleet))
    metrics.write(NodeFigures(fleet))
    metrics.write(ContainerUsage(fleet))
    return metrics


def steady(text: bytes) -> list[bytes]:
    """The lines but the process's own figures, which move between two scrapes."""
    return [line for line in text.splitlines() if not line.startswith((b"process_", b"python_"))]


def promtool_check(text: bytes) -> None:
    checked = subprocess.run(
        [tool("promtool"), "check", "metrics"], input=text, capture_output=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_slices_write_the_same_text_as_one_go_and_promtool_takes_it() -> None:
    fleet = build(nodes=40, containers=2000)
    metrics = metrics_of(fleet)
    whole = metrics.render()
    sliced = asyncio.run(metrics.render_in_slices(slice_seconds=0.0))
    assert steady(sliced) == steady(whole)
    assert b'allot_container_cpu_usage_cores{namespace="team-0"' in sliced
    promtool_check(sliced)


def test_other_tasks_run_between_slices_and_removals_meanwhile_are_left_out() -> None:
    fleet = build(nodes=40, containers=2000)
    books = fleet.books
    placed = sorted(books.containers)

    async def scrape_while_removing() -> tuple[bytes, int]:
        removed = 0
        scraping = asyncio.create_task(metrics_of(fleet).render_in_slices(slice_seconds=0.0))
        while not scraping.done():
            change = Decision()
            gone = books.containers[placed[removed]]
            change.remove(gone.id, gone.node)
            books.apply(change, 2 + removed)
            removed += 1
            await asyncio.sleep(0)
        return await scraping, removed

    text, removed = asyncio.run(scrape_while_removing())
    assert removed > 2, "the scrape never handed the loop back"
    books.check_indexes()
    promtool_check(text)
    # The first went before the scrape's first line: left out.
    assert f'container="{placed[0]}"'.encode() not in text
