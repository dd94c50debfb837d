"""A check-in from the memory: written from what is stored, stored once per firing, delivered on
the chosen channel, never in the quiet hours nor to a number that said STOP; its schedule kept in
EventBridge Scheduler (moto's) as the answers change, paused, erased and moved by a link."""

import io
import json
import time
from datetime import UTC, datetime
from datetime import time as clock_time
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders
from langchain_core.language_models import BaseChatModel
from urllib3.response import HTTPResponse

from functions.api.mobile_api.routes import create_app
from infra.local.lambda_runner import LocalLambdaContext
from onboarding.account import AccountService
from onboarding.agents.check_in import CheckInAgent
from onboarding.breaker import CircuitBreaker
from onboarding.checkins.cadence import Cadence
from onboarding.checkins.outreach import CheckInService
from onboarding.checkins.timetable import CheckInTimetable, schedule_name
from onboarding.composition import build_check_ins, build_timetable
from onboarding.config import Settings
from onboarding.linking import PhoneLinking
from onboarding.model.answers import Answer
from onboarding.model.errors import TurnInProgressError
from onboarding.model.messages import Message
from onboarding.model.profile import UserProfile
from onboarding.model.state import OnboardingAgentType, OnboardingState
from onboarding.model.users import PhoneOwner
from onboarding.persistence import Repositories
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator
from onboarding.turn.service import TurnService
from tests.support.seed import commit, save_profile, save_state
from tests.support.setting_effects import observes
from tests.unit.conftest import TABLE
from tests.unit.test_api import identity

USER, PHONE, OURS = "app-user-1", "+15550001111", "+15559990000"
GROUP = "check-ins"
TARGET = "arn:aws:lambda:us-east-1:123456789012:function:CheckInFunction"
ROLE = "arn:aws:iam::123456789012:role/CheckInSchedulerRole"
# A Monday, 09:00 in Berlin (summer time), the check-in's fire time.
FIRED = datetime(2026, 10, 19, 7, 0, tzinfo=UTC)


class Texts:
    """An SMS sender that keeps what it was asked to send."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str]] = []

    def send(self, to_phone: str, from_phone: str, body: str) -> None:
        self.sent.append((to_phone, from_phone, body))


def _answers(**values: str) -> dict[str, Any]:
    return {key: Answer(value).stored() for key, value in values.items()}


def seed_user(dynamodb: Any, store: Repositories, check_ins: str = "weekly by SMS, Monday mornings") -> None:
    context = {
        "workout_planning": _answers(days_per_week="3", exercise_preferences="kettlebell swings"),
        "scheduling": _answers(
            training_days="Mon, Wed, Fri", training_time="6pm", timezone="Europe/Berlin", check_ins=check_ins
        ),
    }
    save_state(
        dynamodb, TABLE, USER, OnboardingState(current_agent=OnboardingAgentType.SCHEDULING, agent_context=context)
    )
    save_profile(dynamodb, TABLE, USER, UserProfile(preferred_name="Sam", limitations="a sore left knee"))
    commit(store, USER, [Message("user", "I did my first session")])
    commit(store, USER, [Message("assistant", "Well done!")])
    store.phones.find_or_create_owner(PHONE, lambda: USER)


@pytest.fixture
def timetable(dynamodb: object) -> CheckInTimetable:
    client = boto3.client("scheduler", region_name="us-east-1")
    client.create_schedule_group(Name=GROUP)
    return CheckInTimetable(lambda: client, GROUP, TARGET, ROLE, 5)


@pytest.fixture
def texts() -> Texts:
    return Texts()


@pytest.fixture
def check_ins(
    store: Repositories, llm: BaseChatModel, settings: Settings, timetable: CheckInTimetable, texts: Texts
) -> CheckInService:
    agent = CheckInAgent(llm, settings.check_in_max_chars)
    return CheckInService(store, agent, settings, timetable, texts, OURS, clock=lambda: FIRED)


async def test_a_check_in_is_written_from_the_memory_stored_and_texted(
    dynamodb: Any, store: Repositories, check_ins: CheckInService, texts: Texts
) -> None:
    seed_user(dynamodb, store)
    outcome = await check_ins.fire(USER, "2026-10-19T07:00:00Z")
    assert outcome.status == "sent"
    assert outcome.parts == 1
    [(to, sender, body)] = texts.sent
    assert (to, sender) == (PHONE, OURS)
    assert "Sam" in body
    assert "kettlebell swings" in body
    assert "sore left knee" in body
    newest = store.conversations.load_turn(USER, 5).messages[-1]
    assert (newest.role, newest.content) == ("assistant", body)  # the user's reply continues from it


async def test_a_repeated_firing_sends_one_message(
    dynamodb: Any, store: Repositories, check_ins: CheckInService, texts: Texts
) -> None:
    seed_user(dynamodb, store)
    first = await check_ins.fire(USER, "2026-10-19T07:00:00Z")
    again = await check_ins.fire(USER, "2026-10-19T07:00:00Z")
    assert (first.status, again.status) == ("sent", "already_sent")
    assert len(texts.sent) == 1
    stored = [m for m in store.conversations.load_turn(USER, 10).messages if m.role == "assistant"]
    assert len(stored) == 2  # "Well done!" and one check-in


async def test_the_app_channel_stores_it_for_the_history(
    dynamodb: Any, store: Repositories, check_ins: CheckInService, texts: Texts
) -> None:
    seed_user(dynamodb, store, check_ins="weekly in the app, Monday mornings")
    assert (await check_ins.fire(USER, "2026-10-19T07:00:00Z")).status == "stored"
    assert texts.sent == []
    assert (await check_ins.fire(USER, "2026-10-19T07:00:00Z")).status == "already_sent"


async def test_nothing_is_sent_in_the_quiet_hours(
    dynamodb: Any, store: Repositories, settings: Settings, llm: BaseChatModel, texts: Texts
) -> None:
    seed_user(dynamodb, store)
    late = datetime(2026, 10, 19, 20, 30, tzinfo=UTC)  # 22:30 in Berlin
    service = CheckInService(store, CheckInAgent(llm, 320), settings, None, texts, OURS, clock=lambda: late)
    assert (await service.fire(USER, "2026-10-19T20:30:00Z")).status == "quiet_hours"
    assert texts.sent == []


async def test_stop_pauses_the_schedule_and_nothing_is_sent(
    dynamodb: Any, store: Repositories, check_ins: CheckInService, timetable: CheckInTimetable, texts: Texts
) -> None:
    seed_user(dynamodb, store)
    check_ins.replan_stored(USER)
    store.phones.set_opted_out(PHONE, True)  # STOP
    assert check_ins.pause(USER) is True
    found = timetable.find(USER)
    assert found is not None
    assert found.paused
    assert (await check_ins.fire(USER, "2026-10-19T07:00:00Z")).status == "opted_out"
    assert texts.sent == []


def test_the_answers_make_the_schedule(
    dynamodb: Any, store: Repositories, check_ins: CheckInService, timetable: CheckInTimetable
) -> None:
    seed_user(dynamodb, store)
    assert check_ins.replan_stored(USER) == Cadence((0,), clock_time(9, 0), "Europe/Berlin", "sms")
    stored = boto3.client("scheduler", region_name="us-east-1").get_schedule(Name=schedule_name(USER), GroupName=GROUP)
    assert stored["ScheduleExpression"] == "cron(0 9 ? * MON *)"
    assert stored["ScheduleExpressionTimezone"] == "Europe/Berlin"
    assert stored["FlexibleTimeWindow"] == {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 5}
    assert stored["Target"]["Arn"] == TARGET
    assert stored["Target"]["RoleArn"] == ROLE
    given = json.loads(stored["Target"]["Input"])
    assert given == {"user_id": USER, "channel": "sms", "fire_time": "<aws.scheduler.scheduled-time>"}
    scheduled = check_ins.scheduled(USER)
    assert scheduled is not None
    assert check_ins.next_time(scheduled) == datetime(
        2026, 10, 26, 9, 0, tzinfo=scheduled.cadence.next_after(FIRED).tzinfo
    )


def test_erase_and_link_take_the_schedule_along(
    dynamodb: Any, store: Repositories, check_ins: CheckInService, timetable: CheckInTimetable
) -> None:
    seed_user(dynamodb, store)
    check_ins.replan_stored(USER)
    assert check_ins.move(USER, "app-user-2") is True
    assert timetable.find(USER) is None
    assert timetable.find("app-user-2") is not None
    assert check_ins.erase("app-user-2") == 1
    assert timetable.find("app-user-2") is None
    assert check_ins.erase("app-user-2") == 0


def _lost_answer() -> AWSResponse:
    """DynamoDB's 500 after the write landed: the answer is lost, the item is stored."""
    body = b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"lost"}'
    raw = HTTPResponse(body=io.BytesIO(body), status=500, preload_content=False)
    return AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", 500, HTTPHeaders(), raw)


def check_ins_stored(store: Repositories) -> list[Message]:
    return [m for m in store.conversations.load_turn(USER, 20).messages if m.content.startswith("Hi Sam")]


async def test_a_lost_answer_to_the_check_ins_write_neither_loses_nor_doubles_it(
    dynamodb: Any, store: Repositories, check_ins: CheckInService, texts: Texts
) -> None:
    """The conditional write lands and its answer is lost: botocore sends it again, the keys are
    taken (moto ignores the request token), and the store finds its own write there."""
    seed_user(dynamodb, store)
    lost: list[int] = []

    def lose_first(**_: Any) -> AWSResponse | None:
        if lost:
            return None
        lost.append(1)
        return _lost_answer()

    dynamodb.meta.events.register_first("before-send.dynamodb.TransactWriteItems", lose_first)
    outcome = await check_ins.fire(USER, "2026-10-19T07:00:00Z")
    assert lost
    assert outcome.status == "sent"
    assert len(check_ins_stored(store)) == 1
    assert len(texts.sent) == 1
    assert (await check_ins.fire(USER, "2026-10-19T07:00:00Z")).status == "already_sent"
    assert len(check_ins_stored(store)) == 1
    assert len(texts.sent) == 1


async def test_a_firing_that_failed_after_storing_is_sent_by_the_retry_once(
    dynamodb: Any, store: Repositories, settings: Settings, llm: BaseChatModel, texts: Texts
) -> None:
    """The first delivery stores the check-in and dies before sending: the retry (after its hold
    ran out) sends the stored text, with no second model call and no second message."""
    seed_user(dynamodb, store)
    clock = [FIRED]
    agent = CheckInAgent(llm, 320)

    class Down:
        def send(self, to_phone: str, from_phone: str, body: str) -> None:
            raise ConnectionError("Twilio unreachable")

    first = CheckInService(store, agent, settings, None, Down(), OURS, clock=lambda: clock[0])
    with pytest.raises(ConnectionError):
        await first.fire(USER, "2026-10-19T07:00:00Z")
    retry = CheckInService(store, agent, settings, None, texts, OURS, clock=lambda: clock[0])
    with pytest.raises(TurnInProgressError):  # the first one still holds it
        await retry.fire(USER, "2026-10-19T07:00:00Z")
    later = Repositories.over(dynamodb, TABLE, settings, clock=lambda: time.time() + settings.turn_lease_s + 1)
    retry = CheckInService(later, agent, settings, None, texts, OURS, clock=lambda: clock[0])
    assert (await retry.fire(USER, "2026-10-19T07:00:00Z")).status == "sent"
    assert len(check_ins_stored(store)) == 1
    assert len(texts.sent) == 1
    assert (await retry.fire(USER, "2026-10-19T07:00:00Z")).status == "already_sent"


@observes("check_in_schedule_group", "check_in_function_arn", "check_in_role_arn", "check_in_window_minutes")
def test_the_schedules_are_made_where_the_settings_say(dynamodb: Any, store: Repositories, settings: Settings) -> None:
    boto3.client("scheduler", region_name="us-east-1").create_schedule_group(Name="other-group")
    configured = settings.model_copy(
        update={
            "check_in_schedule_group": "other-group",
            "check_in_function_arn": TARGET + "-2",
            "check_in_role_arn": ROLE + "-2",
            "check_in_window_minutes": 9,
        }
    )
    seed_user(dynamodb, store)
    build_check_ins(configured, store).replan_stored(USER)
    stored = boto3.client("scheduler", region_name="us-east-1").get_schedule(
        Name=schedule_name(USER), GroupName="other-group"
    )
    assert stored["Target"]["Arn"] == TARGET + "-2"
    assert stored["Target"]["RoleArn"] == ROLE + "-2"
    assert stored["FlexibleTimeWindow"]["MaximumWindowInMinutes"] == 9
    assert build_timetable(settings) is None  # no group: no schedules


@observes("check_in_quiet_start", "check_in_quiet_end", "check_in_max_chars")
async def test_the_quiet_hours_and_the_length_are_the_settings(
    dynamodb: Any, store: Repositories, settings: Settings, llm: BaseChatModel, texts: Texts
) -> None:
    seed_user(dynamodb, store)
    late = datetime(2026, 10, 19, 20, 30, tzinfo=UTC)  # 22:30 in Berlin: quiet by default, not here
    configured = settings.model_copy(
        update={"check_in_quiet_start": "23:00", "check_in_quiet_end": "06:00", "check_in_max_chars": 60}
    )
    service = CheckInService(
        store, CheckInAgent(llm, configured.check_in_max_chars), configured, None, texts, OURS, clock=lambda: late
    )
    assert (await service.fire(USER, "2026-10-19T20:30:00Z")).status == "sent"
    [(_, _, body)] = texts.sent
    assert len(body) <= 60


@pytest.fixture
def account_keeping_schedules(store: Repositories, settings: Settings, check_ins: CheckInService) -> AccountService:
    return AccountService(store, settings, None, check_ins)


@pytest.fixture
def scheduled(dynamodb: Any, store: Repositories, check_ins: CheckInService) -> None:
    """The user with their check-in schedule made from their answers."""
    seed_user(dynamodb, store)
    check_ins.replan_stored(USER)


@pytest.mark.usefixtures("scheduled")
def test_stop_pauses_the_schedule_and_start_resumes_it(
    store: Repositories, settings: Settings, timetable: CheckInTimetable, account_keeping_schedules: AccountService
) -> None:
    linking = PhoneLinking(store, settings, account_keeping_schedules)
    linking.set_opted_out(PHONE, True)  # what the intake does with STOP
    found = timetable.find(USER)
    assert found is not None
    assert found.paused
    linking.set_opted_out(PHONE, False)  # START
    found = timetable.find(USER)
    assert found is not None
    assert not found.paused


@pytest.mark.usefixtures("scheduled")
def test_an_erase_deletes_the_schedule_and_its_answer_counts_it(
    timetable: CheckInTimetable, account_keeping_schedules: AccountService
) -> None:
    report = account_keeping_schedules.erase(USER)
    assert report.check_in_schedules == 1
    assert timetable.find(USER) is None
    assert account_keeping_schedules.erase(USER).check_in_schedules == 0


@pytest.mark.usefixtures("scheduled")
def test_a_link_moves_the_schedule_to_the_app_user(
    store: Repositories,
    settings: Settings,
    check_ins: CheckInService,
    timetable: CheckInTimetable,
    account_keeping_schedules: AccountService,
) -> None:
    """The phone's SMS-only user had the schedule; once the phone's memory joins the app user's
    (a link's merge), the app user has it, paused as it was, and the phone user none."""
    check_ins.pause(USER)
    linking = PhoneLinking(store, settings, account_keeping_schedules)
    linking.finish_merge(PhoneOwner(PHONE, "app-user-2", opted_out=False, merge_from=USER))
    assert timetable.find(USER) is None
    moved = timetable.find("app-user-2")
    assert moved is not None
    assert moved.paused
    assert moved.cadence == Cadence((0,), clock_time(9, 0), "Europe/Berlin", "sms")


async def test_a_turn_that_saves_the_check_ins_answer_makes_the_schedule(
    dynamodb: Any,
    store: Repositories,
    orchestrator: OnboardingAgentOrchestrator,
    settings: Settings,
    check_ins: CheckInService,
    timetable: CheckInTimetable,
) -> None:
    context = {
        "scheduling": _answers(training_days="Mon, Wed, Fri", training_time="6pm", timezone="Europe/Berlin"),
    }
    state = OnboardingState(current_agent=OnboardingAgentType.SCHEDULING, agent_context=context)
    save_state(dynamodb, TABLE, USER, state)
    service = TurnService(
        orchestrator,
        store,
        CircuitBreaker(settings.breaker),
        store_breaker=CircuitBreaker(settings.store_breaker, name="store"),
        check_ins=check_ins,
    )
    turn = await service.start_turn(USER, "weekly by SMS, Monday mornings")
    await turn.collect()
    found = timetable.find(USER)
    assert found is not None
    assert found.cadence == Cadence((0,), clock_time(9, 0), "Europe/Berlin", "sms")


@pytest.mark.usefixtures("scheduled")
async def test_get_check_ins_gives_the_schedule_and_the_next_time(
    service: TurnService, account_keeping_schedules: AccountService, check_ins: CheckInService
) -> None:
    transport = httpx.ASGITransport(app=create_app(service, account_keeping_schedules))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.local") as http:
        response = await http.get("/check-ins", headers=identity(USER))
        nobody = await http.get("/check-ins", headers=identity("someone-else"))
    assert response.status_code == 200, response.text
    assert response.json() == {
        "scheduled": True,
        "days": ["MON"],
        "at": "09:00",
        "timeZone": "Europe/Berlin",
        "channel": "sms",
        "paused": False,
        "nextAt": "2026-10-26T09:00:00+01:00",  # after FIRED, in winter time
    }
    assert nobody.json()["scheduled"] is False


def test_the_function_fires_the_check_in_its_event_names(
    dynamodb: Any, store: Repositories, check_ins: CheckInService, texts: Texts
) -> None:
    seed_user(dynamodb, store)
    from functions.check_in.app import make_handler  # its import builds the function's own service

    made = make_handler(check_ins)

    def handler(event: dict[str, Any], context: LocalLambdaContext) -> dict[str, Any]:
        return made(event, context)  # type: ignore[arg-type]  # the local stand-in of Lambda's context

    event = json.loads((Path(__file__).parents[2] / "events" / "check_in.json").read_text())
    answer = handler(
        event | {"user_id": USER}, LocalLambdaContext(function_name="CheckInFunction", aws_request_id="req-check-in-1")
    )
    assert answer == {"status": "sent", "parts": 1}
    assert handler(
        event | {"user_id": USER}, LocalLambdaContext(function_name="CheckInFunction", aws_request_id="req-check-in-1")
    ) == {"status": "already_sent", "parts": 0}
    with pytest.raises(ValueError, match="fire_time"):
        handler({"user_id": USER}, LocalLambdaContext(function_name="CheckInFunction", aws_request_id="req-check-in-1"))


@pytest.mark.usefixtures("scheduled")
def test_the_console_shows_the_schedule_and_the_next_check_in(store: Repositories, check_ins: CheckInService) -> None:
    from infra.console.views import memory_view

    shown = memory_view(store, USER, personal=True, check_ins=check_ins).check_in
    assert shown is not None
    assert shown.schedule == "Mon at 09:00 (Europe/Berlin), by SMS"
    assert not shown.paused
    assert shown.next_at == datetime(2026, 10, 26, 8, 0, tzinfo=UTC)
    check_ins.pause(USER)
    paused = memory_view(store, USER, personal=True, check_ins=check_ins).check_in
    assert paused is not None
    assert (paused.paused, paused.next_at) == (True, None)
    assert memory_view(store, "nobody", personal=True, check_ins=check_ins).check_in is None
