"""Headless Chromium for the browser tests: Debian's `chromium` and `chromium-driver`, driven by
Selenium; nothing is downloaded at run time (Selenium Manager is kept offline)."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1600,1000",
)


def browser_binaries() -> tuple[str, str]:
    """Chromium and its driver; a skip (a failure in CI, which must run these tests) when absent."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None:
        missing = "chromium" if chromium is None else "chromedriver"
        reason = f"{missing} is not installed (Debian: apt-get install chromium chromium-driver; .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return chromium, driver


@contextmanager
def headless_chromium() -> Iterator[webdriver.Chrome]:
    chromium, driver_path = browser_binaries()
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must not reach the network
    with tempfile.TemporaryDirectory(prefix="console-chromium-") as profile:
        options = Options()
        options.binary_location = chromium
        for flag in (*FLAGS, f"--user-data-dir={profile}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
        try:
            yield driver
        finally:
            driver.quit()
