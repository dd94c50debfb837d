"""Issue 28 item 7 on one process (the texts at once, over HTTP: tests/integration/
test_linking_and_erasure.py): LINK <code> links nothing until the phone's YES, within
LINK_CONFIRMATION_WINDOW_S; a YES too late, or without a LINK, is an ordinary text for the coach;
wrong codes are counted per phone, LINK_FAILURE_LIMIT of them per LINK_FAILURE_WINDOW_S, and the
phone is locked out for the rest of the window, even for a right code; a right code costs nothing."""

from collections.abc import Callable
from typing import Any

import boto3
import pytest

from onboarding.composition import sms_intake
from onboarding.config import Settings
from onboarding.persistence import Repositories
from onboarding.sms.inbound import InboundSms, SmsTurnRequest
from onboarding.sms.intake import LINK_LOCKED, LINK_REFUSED, LINKED, SmsIntake
from onboarding.sms.queue import TurnQueue
from tests.support.clock import FakeClock
from tests.support.setting_effects import observes
from tests.unit.conftest import TABLE
from tests.unit.test_sms_webhook import queued  # noqa: F401  (the queue's fixture)

pytestmark = pytest.mark.unit

PHONE = "+15551230077"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_800_000_000.0)


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
