"""The browser tests skip only where Chromium is truly absent, and never in CI, which must run them."""

import shutil

import pytest

from tests.support import browser

pytestmark = pytest.mark.unit


def test_without_chromium_the_browser_tests_skip_locally_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(pytest.skip.Exception, match="chromium is not installed"):
        browser.browser_binaries()


def test_without_chromium_the_browser_tests_fail_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "chromedriver" else f"/usr/bin/{name}")
    with pytest.raises(pytest.fail.Exception, match="chromedriver is not installed"):
        browser.browser_binaries()
