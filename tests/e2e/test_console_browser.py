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
    driver.get("about:blank")  # a page already open would only change its address's #user
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


def texts(driver: WebDriver) -> int:
    return int(driver.execute_script("return document.body.dataset.texts || '0'"))


def text_from(driver: WebDriver, phone: str, message: str) -> None:
    before = texts(driver)
    driver.find_element(By.ID, "sms-from").clear()
    driver.find_element(By.ID, "sms-from").send_keys(phone)
    driver.find_element(By.ID, "sms-text").send_keys(message)
    driver.find_element(By.ID, "send-sms").click()
    wait(driver, lambda d: texts(d) == before + 1 and idle(d))


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

    # Text the coach from a new phone (a user of its own: the page stays on ours and says so),
    # then link that phone with a code: its texts are then ours.
    phone = f"+1555{uuid.uuid4().int % 10**7:07d}"
    text_from(browser, phone, "Hello from my phone")
    assert f"still shows {user}" in text_of(browser, "notice")
    browser.find_element(By.ID, "link-phone").click()
    wait(browser, lambda d: phone in d.find_element(By.ID, "phones").text)
    wait(browser, idle)
    text_from(browser, phone, "Hi again, by text")
    assert browser.find_elements(By.CSS_SELECTOR, ".bubble.assistant.sms")[-1].text

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


# How far an element's visible bounds are inside each box that can hide it: the window, and every
# scrolling ancestor (negative: that many pixels hidden at its top or bottom).
INSIDE = """
const box = arguments[0].getBoundingClientRect();
const margins = [["window", box.top, window.innerHeight - box.bottom]];
for (let node = arguments[0].parentElement; node; node = node.parentElement) {
  if (!/(auto|scroll|hidden)/.test(getComputedStyle(node).overflowY)) continue;
  const outer = node.getBoundingClientRect(), top = outer.top + node.clientTop;
  margins.push([node.id || node.className, box.top - top, top + node.clientHeight - box.bottom]);
}
return margins;
"""


def hidden_parts(driver: WebDriver, element: Any) -> list[Any]:
    """Where part of `element` is out of sight (a pixel of rounding allowed): [] when it is whole in view."""
    return [margin for margin in driver.execute_script(INSIDE, element) if min(margin[1], margin[2]) < -1]


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_the_newest_reply_is_whole_in_view_after_every_turn(
    browser: WebDriver, console_url: str, size: tuple[int, int]
) -> None:
    browser.set_window_size(*size)
    try:
        open_as(browser, console_url, f"view-{size[0]}-{uuid.uuid4().hex[:6]}")
        for message in ("Hi! My name is Ana", "beginner", "I run twice a week and cycle on weekends", "what now?"):
            send(browser, message)
            newest = browser.find_elements(By.CSS_SELECTOR, "#chat-log .bubble")[-1]
            assert "assistant" in (newest.get_attribute("class") or "")
            assert newest.text.strip()
            assert hidden_parts(browser, newest) == [], (message, hidden_parts(browser, newest))
    finally:
        browser.set_window_size(1600, 1000)


def test_a_user_switch_resets_every_panel_and_every_panel_names_one_user(browser: WebDriver, console_url: str) -> None:
    browser.set_window_size(1280, 720)
    try:
        first, second = f"first-{uuid.uuid4().hex[:6]}", f"second-{uuid.uuid4().hex[:6]}"
        open_as(browser, console_url, first)
        for message in ("Hi! My name is Ana", "beginner", "I run twice a week"):
            send(browser, message)
        browser.execute_script("for (const p of document.querySelectorAll('.panel')) p.scrollTop = p.scrollHeight;")
        scrolled = browser.execute_script("return [...document.querySelectorAll('.panel')].map(p => p.scrollTop)")
        assert max(scrolled) > 0, scrolled  # something to reset
        switch(browser, second)
        panels = browser.find_elements(By.CSS_SELECTOR, ".panel")
        assert browser.execute_script("return [...document.querySelectorAll('.panel')].map(p => p.scrollTop)") == [
            0
        ] * len(panels)
        for panel in panels:  # each panel's heading, as a person reads it, names the one user shown
            heading = panel.find_element(By.TAG_NAME, "h2")
            assert second in heading.text, heading.text
            assert first not in heading.text, heading.text
            assert hidden_parts(browser, heading) == []
        assert text_of(browser, "fig-tokens") == "–"  # the other user's last turn is not shown as this one's
        assert text_of(browser, "fig-turn") == "–"
        assert "no turn recorded" in text_of(browser, "plan-caption")
        assert "Beginner".lower() not in text_of(browser, "memory-panel").lower()
        assert text_of(browser, "notice") == ""
    finally:
        browser.set_window_size(1600, 1000)


def test_a_text_that_continues_another_user_leaves_every_panel_on_one_user_and_says_so(
    browser: WebDriver, console_url: str
) -> None:
    owner, viewer = f"owner-{uuid.uuid4().hex[:6]}", f"viewer-{uuid.uuid4().hex[:6]}"
    phone = f"+1555{uuid.uuid4().int % 10**7:07d}"
    open_as(browser, console_url, owner)
    browser.find_element(By.ID, "sms-from").clear()
    browser.find_element(By.ID, "sms-from").send_keys(phone)
    browser.find_element(By.ID, "link-phone").click()
    wait(browser, lambda d: phone in d.find_element(By.ID, "phones").text and idle(d))
    switch(browser, viewer)
    assert not Select(browser.find_element(By.ID, "turns")).options
    text_from(browser, phone, "Hi, it's me again")
    notice_text = text_of(browser, "notice")
    assert f"That text went to user {owner}, not {viewer}: this page still shows {viewer}" in notice_text
    for panel in browser.find_elements(By.CSS_SELECTOR, ".panel"):
        assert owner not in panel.text, panel.text[:500]  # no panel shows the other user's turn
        assert viewer in panel.find_element(By.TAG_NAME, "h2").text
    assert not Select(browser.find_element(By.ID, "turns")).options  # the other user's turn is not listed here
    assert phone not in text_of(browser, "phones")
    assert not browser.find_elements(By.CSS_SELECTOR, ".bubble.sms")


def test_no_empty_badge_and_counts_read_as_words(browser: WebDriver, console_url: str) -> None:
    open_as(browser, console_url, f"words-{uuid.uuid4().hex[:6]}")
    shown_badges = (
        "return [...document.querySelectorAll('.badge')].filter(b => b.offsetWidth > 0).map(b => b.innerText)"
    )
    assert all(text.strip() for text in browser.execute_script(shown_badges))  # before any turn
    send(browser, "Hi")
    assert all(text.strip() for text in browser.execute_script(shown_badges))
    assert re.fullmatch(r"\d+ / \d+ \(1 model call\)", text_of(browser, "fig-tokens")), text_of(browser, "fig-tokens")
    page = browser.find_element(By.TAG_NAME, "body").text
    assert not re.findall(r"(?<![\d.,])1 (?:model calls|tokens|messages|requests|items|oldest summary lines)\b", page)


# Per panel, the boxes that scroll now (content taller than the box, and the box lets it scroll):
# a person sees one scroll bar for each of them.
SCROLL_BARS = """
const scrolls = (node) =>
  /(auto|scroll)/.test(getComputedStyle(node).overflowY) && node.scrollHeight > node.clientHeight + 1;
return [...document.querySelectorAll('.panel')].map(panel =>
  [panel.id, [panel, ...panel.querySelectorAll('*')].filter(scrolls).map(node => node.id || node.className)]);
"""
# How much wider a box's text is than the room it has (placeholder or value, in the box's own font,
# a fifth wider: another machine's default font may be that much wider than this browser's).
TEXT_OVERFLOW = """
const box = arguments[0], style = getComputedStyle(box);
const context = document.createElement('canvas').getContext('2d');
context.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
const room = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
return 1.2 * context.measureText(box.value || box.placeholder).width - room;
"""


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_one_scroll_bar_per_panel_none_for_the_page_and_the_sms_boxes_read_whole(
    browser: WebDriver, console_url: str, size: tuple[int, int]
) -> None:
    browser.set_window_size(*size)
    try:
        open_as(browser, console_url, f"bars-{size[0]}-{uuid.uuid4().hex[:6]}")
        for box in ("sms-text", "sms-from"):  # "Text the coach" and "+15551230001", not cut off
            overflow = browser.execute_script(TEXT_OVERFLOW, browser.find_element(By.ID, box))
            assert overflow <= 0, (box, overflow)
        # Enough turns that the conversation is taller than its box at either size.
        for message in ("Hi! My name is Ana", "beginner", "I run twice a week", "no injuries", "what now?") * 2:
            send(browser, message)
        page = browser.execute_script(
            "return [document.documentElement.scrollHeight, document.documentElement.clientHeight]"
        )
        assert page[0] <= page[1], page  # the page itself does not scroll
        bars = dict(browser.execute_script(SCROLL_BARS))
        assert bars["chat-panel"] == ["chat-log"], bars  # only the conversation scrolls in the chat panel
        assert all(len(scrolling) <= 1 for scrolling in bars.values()), bars
    finally:
        browser.set_window_size(1600, 1000)


def test_the_page_has_an_icon(browser: WebDriver, console_url: str) -> None:
    open_as(browser, console_url, f"icon-{uuid.uuid4().hex[:6]}")
    fetched = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(document.querySelector('link[rel=icon]').href)"
        ".then(r => done([r.status, r.headers.get('content-type')]), e => done([0, String(e)]));"
    )
    assert fetched[0] == 200, fetched
    assert fetched[1].startswith("image/svg+xml"), fetched
