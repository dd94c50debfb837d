"""What a phone brings and takes away: linking joins what the number texted to the app user
(nothing re-asked, nothing left behind), and DELETE MY DATA erases an SMS-only user by text."""

import json
import logging
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from botocore.exceptions import ClientError

from functions.sms_webhook.app import make_handler
from infra.local.twilio_emulator import TwilioEmulator, webhook_form
from onboarding.composition import sms_intake, sms_responder
from onboarding.config import Settings
from onboarding.model.answers import answer_value, read_answer
from onboarding.model.history import ConversationSummary
from onboarding.model.messages import Message, ToolCall
from onboarding.model.profile import UserProfile
from onboarding.model.state import OnboardingAgentType, OnboardingState
from onboarding.persistence import Repositories
from onboarding.replies import ERASE_NOT_ASKED, LINKED
from onboarding.sms.queue import TurnQueue
from onboarding.turn.service import TurnService
from tests.support.clock import FakeClock
from tests.support.seed import commit
from tests.unit.conftest import TABLE
from tests.unit.test_audit_trail import audit_lines
from tests.unit.test_sms_webhook import TOKEN, URL, Handler, call, event
from tests.unit.test_sms_worker import request, sender_for

PHONE = "+15551230001"
FITNESS = OnboardingAgentType.FITNESS_ASSESSMENT.value


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_800_000_000.0)


@pytest.fixture
def handler(
    store: Repositories, sms_queue: str, idempotency_table: str, settings: Settings, clock: FakeClock
) -> Handler:
    queue = TurnQueue(boto3.client("sqs", region_name="us-east-1"), sms_queue)
    intake = sms_intake(store, queue, settings, clock=clock)
    return make_handler(intake, lambda: TOKEN, lambda: URL, DynamoDBPersistenceLayer(table_name=idempotency_table))


def _text(handler: Handler, sid: str, body: str) -> str:
    response = call(handler, event(webhook_form(sid, PHONE, body)))
    assert response["statusCode"] == 200
    return str(response["body"])


def _link(handler: Handler, code: str) -> str:
    """LINK <code>, then the phone's YES (nothing links before it: decision 0015): the YES's answer."""
    assert "Reply YES" in _text(handler, "SM-link", f"LINK {code}")
    return _text(handler, "SM-yes", "YES")


def _sms_user(store: Repositories) -> str:
    owner = store.phones.find_owner(PHONE)
    assert owner is not None
    return owner.user_id


def _texted_before_linking(store: Repositories, handler: Handler) -> str:
    """The number texts first (an SMS-only user), answers two items and gives its name."""
    _text(handler, "SM-first", "Hi coach")
    sms_user = _sms_user(store)
    store.writes.append_message(sms_user, "user", "I'm a beginner, I run twice a week")
    save = ToolCall("tooluse-sms", "save_fitness_assessment", {"fitness_level": "beginner"})
    state = OnboardingState(agent_context={FITNESS: {"fitness_level": "beginner", "current_activity": "runs twice"}})
    commit(
        store,
        sms_user,
        [
            Message("assistant", "", tool_calls=(save,)),
            Message("tool", '{"saved": ["fitness_level"]}', tool_call_id="tooluse-sms"),
            Message("assistant", "Noted! Any injuries?"),
        ],
        state=state,
        profile=UserProfile(name="Sam", limitations="a sore knee"),
    )
    return sms_user


def test_linking_joins_what_the_number_texted_to_the_app_user(store: Repositories, handler: Handler) -> None:
    sms_user = _texted_before_linking(store, handler)
    app_state = OnboardingState(agent_context={FITNESS: {"fitness_level": "intermediate", "limitations": "none"}})
    store.writes.append_message("app-user", "user", "Hello from the app")
    commit(store, "app-user", [Message("assistant", "Welcome!")], state=app_state, profile=UserProfile(goals="5k"))
    code = store.phones.create_link_code("app-user").code

    assert LINKED.split("!")[0] in _link(handler, code)

    joined = store.conversations.load_turn("app-user", 20)
    answers = joined.state.agent_context[FITNESS]
    assert answer_value(answers["fitness_level"]) == "intermediate"  # the app user's answer wins...
    # ... the texted one is kept as an earlier value of it ...
    assert [p.value for p in read_answer(answers["fitness_level"]).previous] == ["beginner"]  # type: ignore[union-attr]
    assert answer_value(answers["current_activity"]) == "runs twice"  # ... and fills the gap
    assert answer_value(answers["limitations"]) == "none"
    assert (joined.profile.name, joined.profile.goals, joined.profile.limitations) == ("Sam", "5k", "a sore knee")
    contents = [m.content for m in joined.messages]
    assert "I'm a beginner, I run twice a week" in contents
    assert "Hello from the app" in contents
    assert [m.message_id for m in joined.messages] == sorted(m.message_id for m in joined.messages)
    # Nothing is left behind: the SMS-only user is erased, the merge is recorded as done.
    assert store.conversations.load_turn(sms_user, 20).messages == ()
    owner = store.phones.find_owner(PHONE)
    assert owner is not None
    assert (owner.user_id, owner.merge_from) == ("app-user", None)


async def test_a_merge_that_fails_is_finished_before_the_next_text_is_answered(
    store: Repositories, handler: Handler, dynamodb: Any, service: TurnService, twilio: TwilioEmulator
) -> None:
    sms_user = _texted_before_linking(store, handler)
    code = store.phones.create_link_code("app-user").code
    real = dynamodb.transact_write_items

    def down_for_copies(**request: Any) -> Any:  # the table fails the merge's copies, not the link
        if any(item.get("Put", {}).get("Item", {}).get("sk", {}).get("S", "").startswith("MSG#")
               for item in request["TransactItems"]):  # fmt: skip
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "down"}}, "TransactWriteItems")
        return real(**request)

    dynamodb.transact_write_items = down_for_copies
    assert LINKED.split("!")[0] in _link(handler, code)  # the link itself stands
    dynamodb.transact_write_items = real
    owner = store.phones.find_owner(PHONE)
    assert owner is not None
    assert owner.merge_from == sms_user

    # The number's next text, queued for the SMS user before the link finished, is answered as
    # the app user, after the texted memory has joined it.
    await sms_responder(service, store, sender_for(twilio)).respond(request("SM-next", "hi", user_id=sms_user))
    joined = store.conversations.load_turn("app-user", 20)
    assert answer_value(joined.state.agent_context[FITNESS]["current_activity"]) == "runs twice"
    assert "hi" in [m.content for m in joined.messages]
    assert store.conversations.load_turn(sms_user, 20).messages == ()
    owner = store.phones.find_owner(PHONE)
    assert owner is not None
    assert owner.merge_from is None


def test_an_sms_user_erases_by_text_after_confirming(
    store: Repositories, handler: Handler, clock: FakeClock, dynamodb: Any
) -> None:
    sms_user = _texted_before_linking(store, handler)
    assert ERASE_NOT_ASKED in _text(handler, "SM-early", "YES DELETE")  # nothing was asked yet
    assert store.conversations.load_turn(sms_user, 20).messages != ()
    asked = _text(handler, "SM-ask", "delete my data")
    assert "YES DELETE" in asked
    assert store.conversations.load_turn(sms_user, 20).messages != ()  # nothing erased before the confirmation
    done = _text(handler, "SM-confirm", "Yes  delete")
    assert "erased" in done
    assert "4 messages" in done  # the first text was only queued (no worker here)
    assert [i for i in dynamodb.scan(TableName=TABLE)["Items"] if i["pk"]["S"] == f"USER#{sms_user}"] == [
        i for i in dynamodb.scan(TableName=TABLE)["Items"] if i["sk"]["S"].startswith("LIMIT#")
    ]
    assert store.phones.find_owner(PHONE) is None  # the number is forgotten too


def test_a_late_confirmation_erases_nothing(store: Repositories, handler: Handler, clock: FakeClock) -> None:
    sms_user = _texted_before_linking(store, handler)
    _text(handler, "SM-ask", "DELETE MY DATA")
    clock.advance(601)
    assert "DELETE MY DATA" in _text(handler, "SM-late", "YES DELETE")
    assert store.conversations.load_turn(sms_user, 20).messages != ()


def test_the_summary_joins_too(store: Repositories, handler: Handler) -> None:
    sms_user = _texted_before_linking(store, handler)
    texted = store.conversations.load_turn(sms_user, 20).messages
    assert store.writes.save_summary(sms_user, ConversationSummary("- runs twice a week", texted[1].message_id))
    code = store.phones.create_link_code("app-user").code
    _link(handler, code)
    summary = store.conversations.load_summary("app-user")
    assert summary is not None
    assert "runs twice a week" in summary.text
    # Every message up to the summary's end is in its text; the later ones are in the timeline.
    later = [
        m for m in store.conversations.load_turn("app-user", 20).messages if m.message_id > summary.through_message_id
    ]
    assert [m.content for m in later][-1] == "Noted! Any injuries?"


def test_linking_audits_the_read_and_the_erase_of_the_numbers_memory(
    store: Repositories, handler: Handler, caplog: pytest.LogCaptureFixture
) -> None:
    # a merge reads one user's memory and erases it; both are in the audit trail.
    sms_user = _texted_before_linking(store, handler)
    code = store.phones.create_link_code("app-user").code
    caplog.clear()
    with caplog.at_level(logging.INFO):
        _link(handler, code)
    lines = audit_lines(caplog)
    assert [(line["access"], line["whose"], line["why"]) for line in lines] == [
        ("read", sms_user, "phone-link"),
        ("erase", sms_user, "phone-link"),
    ]
    assert lines[0]["what_messages"] >= 4
    assert lines[1]["what_messages"] >= 4
    assert "beginner" not in json.dumps(lines, default=str)
