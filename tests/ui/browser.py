"""Debian's chromium, headless, driven by selenium through Debian's chromedriver.

``make test`` has both (scripts/provision installs chromium and chromium-driver). When
either is missing the browser tests fail and say so; they are skipped only when a person
asks for it with ALLOT_SKIP_BROWSER_TESTS=1.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
OPT_OUT = "ALLOT_SKIP_BROWSER_TESTS"
HOW_TO_FIX = (
    "run scripts/provision (as root it installs chromium and chromium-driver), or set"
    f" {OPT_OUT}=1 to skip the browser tests on purpose"
)
DESKTOP = (1280, 900)


def chromium() -> Iterator[webdriver.Chrome]:
    """A headless chromium with a desktop-sized window whose console the test reads
    (``driver.get_log("browser")``); it quits afterwards."""
    if os.environ.get(OPT_OUT) == "1":
        pytest.skip(f"{OPT_OUT}=1: browser tests skipped on request")
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    if missing:
        pytest.fail(f"{' and '.join(missing)} missing; {HOW_TO_FIX}", pytrace=False)
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",  # as root, on a CI machine
        "--disable-dev-shm-usage",
        f"--window-size={DESKTOP[0]},{DESKTOP[1]}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=str(CHROMEDRIVER))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()
