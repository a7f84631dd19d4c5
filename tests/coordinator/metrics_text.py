"""Reading a coordinator's /metrics in tests: the exposition parsed with
prometheus_client's own parser, each sample by its name and labels.

    seen = await scrape(coordinator.http, coordinator.url)
    seen.value("allot_deployment_containers", namespace="team-a", deployment="web",
               state="pending")
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

Key = tuple[str, frozenset[tuple[str, str]]]


@dataclass(frozen=True)
class Scraped:
    families: frozenset[str]
    samples: dict[Key, float]

    def value(self, name: str, **labels: str) -> float:
        """The one sample of ``name`` with exactly ``labels``; KeyError naming the
        samples of that name when there is none."""
        key = (name, frozenset(labels.items()))
        if key not in self.samples:
            near = sorted(str(dict(k[1])) for k in self.samples if k[0] == name)
            raise KeyError(f"no {name}{labels}; there are {near}")
        return self.samples[key]

    def with_name(self, name: str) -> dict[frozenset[tuple[str, str]], float]:
        return {labels: value for (sample, labels), value in self.samples.items() if sample == name}


def parse(text: str) -> Scraped:
    families: set[str] = set()
    samples: dict[Key, float] = {}
    for family in text_string_to_metric_families(text):
        families.add(family.name)
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            assert key not in samples, f"two samples {key}"
            samples[key] = sample.value
    return Scraped(frozenset(families), samples)


async def scrape(http: aiohttp.ClientSession, url: str) -> Scraped:
    """GET ``url``/metrics with no token, as Prometheus does; 200 and parsed."""
    async with http.get(url + "/metrics") as response:
        assert response.status == 200, await response.text()
        assert response.content_type == "text/plain"
        return parse(await response.text())
