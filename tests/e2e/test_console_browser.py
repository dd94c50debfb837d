"""The memory console in a real browser (headless Chromium), against `python -m infra.console` run
as a person would: a new process on free ports.

With UPDATE_CONSOLE_SCREENSHOT=1 the screenshot it takes is written to docs/console.png (the
README shows it); otherwise to the test's own directory, so a test run never changes the repo.
"""

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.support.browser import headless_chromium

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 60


@pytest.fixture(scope="module")
def console_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_file = tmp_path_factory.mktemp("console") / "table.jsonl"
    ports = ("--port", "0", "--dynamodb-port", "0", "--bedrock-port", "0", "--twilio-port", "0")
    printed = data_file.with_name("stdout.txt")
    with printed.open("w") as out:
        # To a file, not a pipe: the functions' log lines would fill a pipe nobody reads, and block.
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "infra.console", *ports, "--data-file", str(data_file), "--chunk-delay", "0.03"],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + WAIT_S
        while not (match := re.search(r"Memory console: (http://\S+)", printed.read_text())):
            assert process.poll() is None, printed.read_text()[-2000:]
            assert time.monotonic() < deadline, "the console did not start"
            time.sleep(0.1)
        yield match.group(1)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with headless_chromium() as driver:
        yield driver


def wait(driver: WebDriver, condition: Callable[[WebDriver], Any]) -> Any:
    return WebDriverWait(driver, WAIT_S, poll_frequency=0.05).until(condition)


def turns(driver: WebDriver) -> int:
    return int(driver.execute_script("return document.body.dataset.turns || '0'"))


def idle(driver: WebDriver) -> bool:
    """The page is loaded and no action is running (they disable every button while they do)."""
    return bool(
        driver.execute_script(
            "return document.body.dataset.ready === 'true' && !document.querySelector('button:disabled')"
        )
    )


def open_as(driver: WebDriver, url: str, user: str) -> None:
    driver.get(f"{url}#{user}")
    wait(driver, idle)


def switch(driver: WebDriver, user: str) -> None:
    driver.find_element(By.ID, "user-id").clear()
    driver.find_element(By.ID, "user-id").send_keys(user)
    driver.find_element(By.ID, "switch-user").click()
    wait(driver, lambda d: d.execute_script("return document.body.dataset.user") == user and idle(d))


def send(driver: WebDriver, message: str) -> None:
    before = turns(driver)
    box = driver.find_element(By.ID, "message")
    box.send_keys(message)
    driver.find_element(By.ID, "send").click()
    wait(driver, lambda d: turns(d) == before + 1 and idle(d))


def text_of(driver: WebDriver, element_id: str) -> str:
    return str(driver.find_element(By.ID, element_id).text)


def window_tokens(driver: WebDriver) -> int:
    return int(driver.find_element(By.CSS_SELECTOR, "#budget-bar .seg-window").get_attribute("data-tokens") or 0)


def answer(driver: WebDriver, field: str) -> Any:
    return driver.find_element(By.CSS_SELECTOR, f'#answers tr[data-path="answers.fitness_assessment.{field}"]')


TRACE = """
window.trace = [];
new MutationObserver(() => {
  const reply = document.querySelector('.bubble.assistant[data-streaming]');
  if (reply) window.trace.push(reply.textContent.length);
}).observe(document.getElementById('chat-log'), {subtree: true, childList: true, characterData: true});
"""


def test_chat_see_the_plan_switch_users_text_link_and_erase(
    browser: WebDriver, console_url: str, tmp_path: Path
) -> None:
    user, other = f"ana-{uuid.uuid4().hex[:6]}", f"ben-{uuid.uuid4().hex[:6]}"
    open_as(browser, console_url, user)

    # Tokens arrive before the reply ends: the reply grew in steps while it was still streaming.
    browser.execute_script(TRACE)
    send(browser, "Hi! My name is Ana")
    reply = browser.find_elements(By.CSS_SELECTOR, ".bubble.assistant")[-1].text
    partial = [n for n in browser.execute_script("return window.trace") if 0 < n < len(reply)]
    assert len(partial) >= 3, "the reply appeared all at once"
    assert "Ana" in text_of(browser, "plan-panel")

    # The window and budget bars follow the turns: the second turn's window holds the first.
    first_window = window_tokens(browser)
    first_budget = text_of(browser, "budget-text")
    send(browser, "Beginner")
    assert window_tokens(browser) > first_window
    assert text_of(browser, "budget-text") != first_budget
    width = browser.find_element(By.CSS_SELECTOR, "#window-bar span").value_of_css_property("width")
    assert float(width.removesuffix("px")) > 0
    assert "sent exactly" in text_of(browser, "plan-match")
    level = answer(browser, "fitness_level")
    assert "Beginner" in level.text
    assert "changed" in (level.get_attribute("class") or "")  # what this turn changed is highlighted
    assert "ms in the browser" in text_of(browser, "fig-first-token")
    assert "Query 1" in text_of(browser, "fig-dynamodb")

    # Switch users: another memory; and back: ours, with the conversation.
    switch(browser, other)
    assert "Beginner" not in answer(browser, "fitness_level").text
    assert not browser.find_elements(By.CSS_SELECTOR, ".bubble")
    switch(browser, user)
    assert "Beginner" in answer(browser, "fitness_level").text
    assert len(browser.find_elements(By.CSS_SELECTOR, ".bubble")) >= 4

    # Text the coach from a phone, then link that phone with a code.
    phone = f"+1555{uuid.uuid4().int % 10**7:07d}"
    browser.find_element(By.ID, "sms-from").clear()
    browser.find_element(By.ID, "sms-from").send_keys(phone)
    before = turns(browser)
    browser.find_element(By.ID, "sms-text").send_keys("Hello from my phone")
    browser.find_element(By.ID, "send-sms").click()
    wait(browser, lambda d: turns(d) == before + 1 and idle(d))
    assert browser.find_elements(By.CSS_SELECTOR, ".bubble.assistant.sms")[-1].text
    browser.find_element(By.ID, "link-phone").click()
    wait(browser, lambda d: phone in d.find_element(By.ID, "phones").text)
    wait(browser, idle)

    shot = REPO / "docs" / "console.png" if os.environ.get("UPDATE_CONSOLE_SCREENSHOT") else None
    Select(browser.find_element(By.ID, "turns")).select_by_index(1)  # the second chat turn, for the picture
    wait(browser, lambda d: "Beginner" in d.find_element(By.ID, "current").text)
    assert browser.save_screenshot(str(shot or tmp_path / "console.png"))

    # Erase: the memory is gone.
    browser.find_element(By.ID, "erase").click()
    wait(browser, expected_conditions.alert_is_present()).accept()
    wait(browser, lambda d: d.execute_script("return document.body.dataset.erased") == user)
    assert "Beginner" not in answer(browser, "fitness_level").text
    assert phone not in text_of(browser, "phones")
    assert "Erased" in text_of(browser, "notice")


def row_text(driver: WebDriver, step: str, field: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, f'#answers tr[data-path="answers.{step}.{field}"]').text)


CLOCK = r"\d{1,2}:\d{2}:\d{2}(?:\s?[AP]M)?"


def test_the_memory_panel_shows_each_answer_plainly_and_fits_1280_px(browser: WebDriver, console_url: str) -> None:
    """What a person reads in the memory panel, as text: a plain answer, a corrected one with its
    earlier value, a profile fact; each with when and in which message it was said. The page opens
    on the chat's default user and nothing sits off-screen at 1280 px."""
    browser.set_window_size(1280, 900)
    try:
        browser.get(console_url + "/")  # no user in the address: the chat's default user
        wait(browser, idle)
        assert browser.execute_script("return document.body.dataset.user") == "local-user"
        user = f"plain-{uuid.uuid4().hex[:6]}"
        switch(browser, user)
        send(browser, "Hi! My name is Ana")
        send(browser, "beginner")
        # A long word (a pasted link) must wrap inside its column, not push the panel wider.
        send(browser, "I run twice a week: strava.com/athletes/" + "0123456789abcdef" * 8)
        assert re.fullmatch(
            rf"fitness level\nbeginner\nsaid {CLOCK} in “beginner”",
            row_text(browser, "fitness_assessment", "fitness_level"),
        ), row_text(browser, "fitness_assessment", "fitness_level")
        send(browser, "actually I'm intermediate now")
        corrected = row_text(browser, "fitness_assessment", "fitness_level")
        assert re.fullmatch(
            rf"fitness level\nintermediate\nsaid {CLOCK} in “actually I'm intermediate now”\n"
            rf"earlier: “beginner” \(said {CLOCK}, until {CLOCK}\)",
            corrected,
        ), corrected
        profile = text_of(browser, "profile")
        # A profile fact, and the profile's copy of the level, each from the message that said it.
        assert re.fullmatch(
            rf"name: Ana\nsaid {CLOCK} in “Hi! My name is Ana”\n"
            rf"level: intermediate\nsaid {CLOCK} in “actually I'm intermediate now”",
            profile,
        ), profile
        panel = text_of(browser, "memory-panel")
        for raw in ("{'value'", "mappingproxy", "said_in", "'previous'"):
            assert raw not in panel
        cost = text_of(browser, "fig-cost")
        assert cost.startswith("$"), cost
        assert "issue" not in cost, cost
        assert "issue" not in cost, cost
        # Nothing hidden behind a scroll bar: the page, and each panel, no wider than its box.
        widths = browser.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth,"
            " ...[...document.querySelectorAll('.panel')].flatMap(p => [p.scrollWidth, p.clientWidth])]"
        )
        pairs = list(zip(widths[::2], widths[1::2], strict=True))
        assert all(scroll <= client for scroll, client in pairs), pairs
    finally:
        browser.set_window_size(1600, 1000)
