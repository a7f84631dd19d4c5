"""The dashboard in a real browser: Debian's headless chromium against a real coordinator
and a real agent whose containers run on the real Docker engine.

An admin logs in and finds the bound container on its node's core map, the quota's bar,
the pool and its volume plot, and (after a drain, without reloading the page) the
pending stand-in with its reason; a namespace token's dashboard shows none of the other
namespace's containers; a phone-sized window needs no horizontal scrolling; the browser's
console stays free of errors. Every page is saved as a screenshot in the test's tmp_path
(``screenshots/``). (The README's docs/dashboard.png comes from a larger host:
``test_core_map_in_chromium.py``.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import docker
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.wait import WebDriverWait

from tests.docker.clusters import deploy, running_cluster, wait_until_running
from tests.docker.conftest import IMAGE
from tests.e2e.processes import API_TOKEN, allotctl, api
from tests.ui.browser import DESKTOP

pytestmark = [pytest.mark.docker, pytest.mark.e2e]

TEAM_B_TOKEN = "e2e-team-b-token-0123456789abcdef"
CONFIG = f"""\
[[namespace_tokens]]
token = "{TEAM_B_TOKEN}"
namespaces = ["team-b"]

[pools]
fair_share_update_period = 0.2
"""
QUOTA = {"namespace": "team-a", "min": {"cpu": "0.5"}, "max": {"cpu": "2"}}
RESEARCH = {"integral_guarantees": {"guarantee_type": "relaxed", "resource_flow": {"cpu": 0.5}}}
SLEEPER = {"image": IMAGE, "command": ["sleep", "3600"]}
PHONE = (390, 844)
WAIT_SECONDS = 30  # for the page's own refresh, every 5 s, on a loaded machine


def test_the_dashboard_in_headless_chromium(
    tmp_path: Path, docker_client: docker.DockerClient, browser: webdriver.Chrome
) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with running_cluster(tmp_path, docker_client, nodes=1, cpus_each=2, toml=CONFIG) as cluster:
        url, (node,) = cluster.url, cluster.nodes
        api(url, "/v1/elasticquotas/team-a", QUOTA, method="PUT")
        api(url, "/v1/pools/research", RESEARCH, method="PUT")
        resources = {"cpu": "1", "memory": "16Mi"}
        body = SLEEPER | {"name": "web", "cpu_bind": True, "resources": resources}
        (web,) = deploy(url, "team-a", body)
        resources = {"cpu": "0.1", "memory": "16Mi"}
        deploy(url, "team-b", SLEEPER | {"name": "db", "resources": resources})
        wait_until_running(url, 2)
        cpu = web["limits"]["cpuset_cpus"]
        cell = f'g.cpu-cell[data-cpu="{cpu}"]'

        log_in(browser, url, API_TOKEN)
        page = Pages(browser, url, shots)
        overview = page.show("/ui/", "overview")
        assert {"team-a/web", "team-b/db", node} <= set(overview.split())

        page.show(f"/ui/nodes/{node}", "node")
        bound = browser.find_element(By.CSS_SELECTOR, cell)
        assert bound.get_attribute("data-kind") == "bound"
        title = bound.find_element(By.TAG_NAME, "title").get_attribute("textContent")
        assert title == f"CPU {cpu}: bound to team-a/web {web['id']}"

        page.show("/ui/quotas", "quotas")
        cells = cells_of(browser, 'tr.quota-bar[data-resource="cpu"]')
        assert cells[2:] == ["0.5", "1", "2", "0.5"]  # min, used, max, borrowed

        page.show("/ui/pools", "pools")
        research = cells_of(browser, 'tr.pool[data-pool="research"]')
        assert research[:2] == ["research", "relaxed"]
        assert browser.find_elements(By.CSS_SELECTOR, "figure#volume-research svg polyline")

        page.show("/ui/leases", "leases")

        browser.set_window_size(*PHONE)
        page.show("/ui/", "overview-phone")
        widths = browser.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert widths[0] <= widths[1], f"a horizontal scrollbar at {PHONE}: {widths}"
        browser.set_window_size(*DESKTOP)
        assert console_errors(browser) == []

        # team-b's token sees its own container, and of team-a's only that a CPU is taken.
        log_out(browser)
        log_in(browser, url, TEAM_B_TOKEN)
        for path, name in (("/ui/", "team-b-overview"), (f"/ui/nodes/{node}", "team-b-node")):
            text = page.show(path, name)
            assert "team-b/db" in text
            assert "team-a" not in browser.page_source
            assert web["id"] not in browser.page_source
        hidden = browser.find_element(By.CSS_SELECTOR, f"{cell} title")
        assert hidden.get_attribute("textContent") == f"CPU {cpu}: bound to another namespace"
        assert console_errors(browser) == []

        # A drain: the deployment's page, left open, shows the pending stand-in by itself.
        log_out(browser)
        log_in(browser, url, API_TOKEN)
        page.show("/ui/deployments/team-a/web", "deployment")
        drained = allotctl(url, "drain", node)
        assert drained.returncode == 3, drained  # nowhere to go: pending
        pending = WebDriverWait(browser, WAIT_SECONDS).until(
            lambda b: b.find_elements(By.CSS_SELECTOR, 'tr.container[data-state="pending"]')
        )
        reason = pending[0].find_element(By.CSS_SELECTOR, "td.reason").text
        (view,) = api(url, "/v1/containers?deployment=web&state=pending")["containers"]
        assert reason == view["reason"]
        assert "cordoned" in reason
        browser.save_screenshot(str(shots / "deployment-drained.png"))
        assert console_errors(browser) == []


class Pages:
    """Opens dashboard pages and saves each one's screenshot."""

    def __init__(self, browser: webdriver.Chrome, url: str, shots: Path) -> None:
        self.browser, self.url, self.shots = browser, url, shots

    def show(self, path: str, name: str) -> str:
        """The page's visible text, once it is loaded."""
        self.browser.get(self.url + path)
        assert self.browser.current_url == self.url + path, self.browser.current_url
        self.browser.save_screenshot(str(self.shots / f"{name}.png"))
        text: str = self.browser.find_element(By.TAG_NAME, "main").text
        return text


def log_in(browser: webdriver.Chrome, url: str, token: str) -> None:
    """Through the form, as a person would: the dashboard sends them there first."""
    browser.get(url + "/ui/")
    assert browser.current_url == url + "/ui/login?next=/ui/"
    browser.find_element(By.ID, "token").send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda b: b.current_url == url + "/ui/")


def log_out(browser: webdriver.Chrome) -> None:
    browser.find_element(By.LINK_TEXT, "Log out").click()
    WebDriverWait(browser, 10).until(lambda b: "/ui/login" in b.current_url)


def cells_of(browser: webdriver.Chrome, row: str) -> list[str]:
    return [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, f"{row} td")]


def console_errors(browser: webdriver.Chrome) -> list[dict[str, Any]]:
    """The console's errors since the last look (reading the log empties it)."""
    entries: list[dict[str, Any]] = browser.get_log("browser")  # type: ignore[no-untyped-call]
    return [entry for entry in entries if entry["level"] == "SEVERE"]
