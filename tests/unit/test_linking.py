"""Linking a phone, on moto in process (the texts at once, over HTTP: tests/integration/
test_linking_and_erasure.py): LINK <code> links nothing until the phone's YES, within
LINK_CONFIRMATION_WINDOW_S; a YES too late, or without a LINK, is an ordinary text for the coach.
Wrong codes are counted per phone, LINK_FAILURE_LIMIT of them per LINK_FAILURE_WINDOW_S, and the
phone is locked out for the rest of the window, even for a right code; a right code costs nothing.
Texts with a right code sent at once never lock the phone out, even more of them than the limit;
codes still being checked hold the room only until they settle; an erase, by text or by DELETE
/me, does not reset a lockout: the count is an item of its own, keyed by a hash of the number,
expiring with its window.
"""

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import boto3
import pytest

from onboarding.account import AccountService
from onboarding.audit import Caller
from onboarding.composition import sms_intake
from onboarding.config import RateLimit, Settings
from onboarding.persistence import Repositories
from onboarding.persistence.link_requests import BUSY_RETRY_S, PENDING_WAITS_S, LinkAttempt, LinkLockout, LinkRequests
from onboarding.persistence.schema import LINK_TRIES_PREFIX, link_tries_key
from onboarding.replies import LINK_BUSY, LINK_LOCKED, LINK_REFUSED, LINKED
from onboarding.sms.inbound import InboundSms, SmsTurnRequest
from onboarding.sms.intake import SmsIntake
from onboarding.sms.queue import TurnQueue
from tests.support.clock import FakeClock
from tests.support.setting_effects import observes
from tests.unit.conftest import TABLE
from tests.unit.test_sms_webhook import queued  # noqa: F401  (the queue's fixture)

pytestmark = pytest.mark.unit


PHONE = "+15551230077"


def intake_with(dynamodb: Any, sms_queue: str, clock: FakeClock, **changes: Any) -> tuple[SmsIntake, Repositories]:
    settings = Settings(table_name=TABLE, **changes)
    store = Repositories.over(dynamodb, TABLE, settings, clock=clock)
    queue = TurnQueue(boto3.client("sqs", region_name="us-east-1"), sms_queue)
    return sms_intake(store, queue, settings, clock=clock), store


def texted(intake: SmsIntake, body: str, sid: list[int] = [0]) -> str | None:  # noqa: B006  (a counter)
    sid[0] += 1
    return intake.accept(InboundSms(message_id=f"SM{sid[0]}", from_phone=PHONE, to_phone="+15550000000", body=body))


@observes("link_confirmation_window_s")
def test_a_yes_links_only_within_the_confirmation_window(
    dynamodb: Any,
    sms_queue: str,
    clock: FakeClock,
    queued: Callable[[], list[SmsTurnRequest]],  # noqa: F811
) -> None:
    intake, store = intake_with(dynamodb, sms_queue, clock, link_confirmation_window_s=120)
    assert texted(intake, "YES") is None  # no LINK before: an answer for the coach
    assert [r.text for r in queued()] == ["YES"]
    code = store.phones.create_link_code("app-user").code
    asked = texted(intake, f"LINK {code}")
    assert asked is not None
    assert "within 2 minutes" in asked
    assert store.phones.phones_of("app-user") == ()  # nothing linked before the phone agrees
    clock.now += 121
    assert texted(intake, "YES") is None  # too late: an ordinary text again
    assert store.phones.phones_of("app-user") == ()
    texted(intake, f"LINK {code}")
    clock.now += 119
    assert texted(intake, "yes") == LINKED
    assert store.phones.phones_of("app-user") == (PHONE,)


@observes("link_failures_per_window", "link_failure_window_s")
def test_wrong_codes_lock_the_phone_out_until_the_window_ends_and_a_right_code_costs_nothing(
    dynamodb: Any, sms_queue: str, clock: FakeClock
) -> None:
    intake, store = intake_with(dynamodb, sms_queue, clock, link_failures_per_window=2, link_failure_window_s=600)
    clock.now = 1_800_000_000 // 600 * 600 + 1.0  # the start of a window
    right = store.phones.create_link_code("app-user").code
    for _ in range(3):  # right codes, asked to confirm each time: none counts
        assert "Reply YES" in (texted(intake, f"LINK {right}") or "")
    assert texted(intake, "LINK ABCDEFGHJK") == LINK_REFUSED
    assert texted(intake, "LINK ABCDEFGHJM") == LINK_REFUSED
    locked = texted(intake, f"LINK {right}")  # the third code of the window is not even read
    assert locked == LINK_LOCKED.format(minutes=10)
    clock.now += 600  # the next window (the code expired meanwhile: a new one)
    assert "Reply YES" in (texted(intake, f"LINK {store.phones.create_link_code('app-user').code}") or "")


pytestmark = pytest.mark.unit


WINDOW_S = 600


LIMIT = RateLimit(2, WINDOW_S)


SETTINGS = Settings(table_name=TABLE, link_failures_per_window=LIMIT.messages, link_failure_window_s=WINDOW_S)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_800_000_000 // WINDOW_S * WINDOW_S + 1.0)  # the start of a window


def limited_intake(dynamodb: Any, sms_queue: str, clock: FakeClock) -> tuple[SmsIntake, Repositories]:
    return intake_with(
        dynamodb, sms_queue, clock, link_failures_per_window=LIMIT.messages, link_failure_window_s=WINDOW_S
    )


class _FirstUpdatesMeet:
    """A DynamoDB client whose first `update_item` of each of `parties` threads waits for the
    others' first one: the texts' first counting writes reach the table together, as two texts sent
    at the same moment do (the interleaving in which the false lockout happened)."""

    def __init__(self, client: Any, parties: int) -> None:
        self._client = client
        self._gate = threading.Barrier(parties)
        self._met: set[int] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def update_item(self, **request: Any) -> Any:
        if threading.get_ident() not in self._met:
            self._met.add(threading.get_ident())
            self._gate.wait(10)
        return self._client.update_item(**request)


def test_two_right_codes_texted_at_once_from_a_fresh_phone_are_both_asked_to_confirm(
    dynamodb: Any, sms_queue: str, clock: FakeClock
) -> None:
    """Both texts' counting writes meet. Before, both failed the same-window update, one won the
    new-window update and the other was told "Too many wrong link codes" with no wrong code sent."""
    intake, store = limited_intake(dynamodb, sms_queue, clock)
    code = store.phones.create_link_code("app-user").code
    texted(intake, "Hi coach")  # the phone is known; it has texted no code yet
    store = Repositories.over(_FirstUpdatesMeet(dynamodb, 2), TABLE, SETTINGS, clock=clock)  # type: ignore[arg-type]
    intake = sms_intake(
        store, TurnQueue(boto3.client("sqs", region_name="us-east-1"), sms_queue), SETTINGS, clock=clock
    )
    answers: list[str | None] = [None, None]

    def link(index: int) -> None:
        answers[index] = texted(intake, f"LINK {code}")

    threads = [threading.Thread(target=link, args=(index,)) for index in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert all("Reply YES" in (answer or "") for answer in answers), answers


def test_codes_still_being_checked_hold_the_room_until_they_settle(dynamodb: Any, clock: FakeClock) -> None:
    """LIMIT.messages codes are being checked; one more waits for them instead of being locked out,
    and takes the room a right code gives back."""
    store = Repositories.over(dynamodb, TABLE, Settings(table_name=TABLE), clock=clock)
    requests = store.link_requests
    checking = [requests.take_link_attempt(PHONE, LIMIT) for _ in range(LIMIT.messages)]
    assert all(isinstance(attempt, LinkAttempt) for attempt in checking)
    taken: list[LinkAttempt | LinkLockout] = []
    waiting = threading.Thread(target=lambda: taken.append(requests.take_link_attempt(PHONE, LIMIT)))
    waiting.start()
    waiting.join(0.3)
    assert taken == [], "a text was answered before the codes it waited for settled"
    first = checking[0]
    assert isinstance(first, LinkAttempt)
    requests.settle_link_attempt(first, right=True)
    waiting.join(10)
    assert taken == [LinkAttempt(PHONE, first.window)]


def test_wrong_codes_lock_the_phone_out_at_once(dynamodb: Any, clock: FakeClock) -> None:
    store = Repositories.over(dynamodb, TABLE, Settings(table_name=TABLE), clock=clock)
    requests = store.link_requests
    for _ in range(LIMIT.messages):
        attempt = requests.take_link_attempt(PHONE, LIMIT)
        assert isinstance(attempt, LinkAttempt)
        requests.settle_link_attempt(attempt, right=False)
    slept: list[float] = []
    requests = LinkRequests(dynamodb, TABLE, clock, sleep=slept.append)
    clock.advance(100)
    assert requests.take_link_attempt(PHONE, LIMIT) == LinkLockout(WINDOW_S - 101)
    assert slept == [], "a window full of wrong codes is final: nothing to wait for"
    clock.advance(WINDOW_S)  # the next window
    assert isinstance(requests.take_link_attempt(PHONE, LIMIT), LinkAttempt)


def test_a_code_whose_check_never_settled_keeps_its_room_till_the_window_ends(dynamodb: Any, clock: FakeClock) -> None:
    """A function that stopped between counting a code and settling it: the code may have been read,
    so its room is not given back; the next code waits a bounded time, then is told to try again
    shortly, not that the phone is locked out (no wrong code was seen)."""
    store = Repositories.over(dynamodb, TABLE, Settings(table_name=TABLE), clock=clock)
    requests = store.link_requests
    for _ in range(LIMIT.messages):
        requests.take_link_attempt(PHONE, LIMIT)
    slept: list[float] = []
    requests = LinkRequests(dynamodb, TABLE, clock, sleep=slept.append)
    assert requests.take_link_attempt(PHONE, LIMIT) == LinkLockout(BUSY_RETRY_S, busy=True)
    assert slept == list(PENDING_WAITS_S)


def test_a_text_that_waited_in_vain_is_asked_to_send_its_code_again_not_told_it_is_locked_out(
    dynamodb: Any, sms_queue: str, clock: FakeClock
) -> None:
    intake, store = limited_intake(dynamodb, sms_queue, clock)
    texted(intake, "Hi coach")
    for _ in range(LIMIT.messages):  # counted, never settled
        store.link_requests.take_link_attempt(PHONE, LIMIT)
    impatient = replace(store, link_requests=LinkRequests(dynamodb, TABLE, clock, sleep=lambda _: None))
    intake = sms_intake(
        impatient, TurnQueue(boto3.client("sqs", region_name="us-east-1"), sms_queue), SETTINGS, clock=clock
    )
    assert texted(intake, "LINK ABCDEFGHJK") == LINK_BUSY


def test_the_count_is_keyed_by_a_hash_of_the_number_and_expires_with_its_window(
    dynamodb: Any, clock: FakeClock
) -> None:
    store = Repositories.over(dynamodb, TABLE, Settings(table_name=TABLE), clock=clock)
    attempt = store.link_requests.take_link_attempt(PHONE, LIMIT)
    assert isinstance(attempt, LinkAttempt)
    [item] = dynamodb.scan(TableName=TABLE)["Items"]
    assert item["pk"]["S"].startswith(LINK_TRIES_PREFIX)
    assert PHONE.removeprefix("+") not in repr(item), "the number is spelled out in the count"
    window_ends = (attempt.window + 1) * WINDOW_S
    assert item["expires_at"] == {"N": str(window_ends)}
    assert item == dynamodb.get_item(TableName=TABLE, Key=link_tries_key(PHONE, attempt.window))["Item"]


def _erase_by_text(intake: SmsIntake, _: Repositories) -> None:
    assert "YES DELETE" in (texted(intake, "DELETE MY DATA") or "")
    assert "your data is erased" in (texted(intake, "YES DELETE") or "")


def _erase_the_app_user(_: SmsIntake, store: Repositories) -> None:
    """DELETE /me of the app account the phone is linked to (its erase, as the route calls it)."""
    AccountService(store, SETTINGS).erase("app-user", Caller.verified_user("app-user", "DELETE:/me"))


@pytest.mark.parametrize("erase", [_erase_by_text, _erase_the_app_user], ids=["by text", "DELETE /me"])
def test_a_lockout_survives_an_erase(
    dynamodb: Any, sms_queue: str, clock: FakeClock, erase: Callable[[SmsIntake, Repositories], None]
) -> None:
    """Before, the count was on the phone's owner item, which the erase deletes: the next wrong code
    was read and answered "not valid" instead of "locked"."""
    intake, store = limited_intake(dynamodb, sms_queue, clock)
    assert store.phones.link_by_code(PHONE, store.phones.create_link_code("app-user").code) is not None
    for _ in range(LIMIT.messages):
        assert texted(intake, "LINK ABCDEFGHJK") == LINK_REFUSED
    erase(intake, store)
    assert store.phones.find_owner(PHONE) is None, "the erase left the phone's owner item"
    assert texted(intake, "LINK ABCDEFGHJM") == LINK_LOCKED.format(minutes=10)
