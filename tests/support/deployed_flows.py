"""Every way the deployed functions are used, walked over HTTP on a local stack: each route of the
API, each SMS command, a merge left pending and finished, the summary fold, a text that ends in the
dead-letter queue, and the SnapStart hooks. Each flow raises AssertionError when what a person
would see goes wrong.

tests/integration/test_template_policies.py runs them with the template's policies enforced (and
nothing may be refused), and removes one action of the template at a time to see a flow fail.
"""

import asyncio
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import boto3
import httpx

from infra.local.iam.identity import acting_as
from infra.local.lambda_runner import asgi_app, handler_module, invoke
from infra.local.stack import LocalStack, temporary_environment
from infra.local.twilio_emulator import webhook_form
from onboarding.checkins.timetable import schedule_name
from onboarding.config import Settings
from onboarding.model.answers import Answer
from onboarding.model.state import OnboardingAgentType, OnboardingState
from onboarding.persistence import Repositories
from onboarding.persistence.schema import RATE_PREFIX
from tests.support.seed import save_state
from tests.support.tcp_proxy import TcpProxy

HTTP = httpx.Client(timeout=60)
Flow = Callable[[LocalStack], None]


def bearer(user_id: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {user_id}"}


def new_user() -> str:
    return f"flow-{uuid.uuid4().hex[:12]}"


def new_phone() -> str:
    return "+1555" + str(uuid.uuid4().int)[:7]


def text(stack: LocalStack, phone: str, body: str, sid: str | None = None, **extra: str) -> httpx.Response:
    """Post a signed webhook as Twilio does (a new MessageSid unless `sid`); the immediate answer (TwiML)."""
    form = webhook_form(sid or f"SM{uuid.uuid4().hex}", phone, body, **extra)
    url = f"{stack.api_url}/sms"
    return HTTP.post(
        url,
        content=urlencode(form),
        headers={
            "X-Twilio-Signature": stack.twilio.sign(url, form),
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )


def replies_to(stack: LocalStack, phone: str, count: int, timeout_s: float = 20.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        replies = [sent.body for sent in stack.twilio.sent if sent.to == phone]
        if len(replies) >= count:
            return replies
        time.sleep(0.1)
    raise AssertionError(f"{count} replies to {phone} expected within {timeout_s} s, got {len(replies)}")


def operator_table(stack: LocalStack) -> Any:
    return boto3.client("dynamodb", region_name=stack.region, endpoint_url=stack.dynamodb.url)


def partition(stack: LocalStack, user_id: str) -> dict[str, dict[str, Any]]:
    """The user's items by sort key, read by the operator."""
    items = operator_table(stack).query(
        TableName=stack.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"USER#{user_id}"}},
        ConsistentRead=True,
    )["Items"]
    return {item["sk"]["S"]: item for item in items}


def link(stack: LocalStack, phone: str, code: str) -> httpx.Response:
    """LINK <code>, then the phone's YES (nothing is linked before it agrees): the YES's answer."""
    asked = text(stack, phone, f"LINK {code}")
    assert "Reply YES" in asked.text, asked.text
    return text(stack, phone, "YES")


def chat(stack: LocalStack, user_id: str, message: str) -> dict[str, Any]:
    answered = HTTP.post(f"{stack.api_url}/chat", json={"message": message}, headers=bearer(user_id))
    assert answered.status_code == 200, answered.text
    body: dict[str, Any] = answered.json()
    return body


# --- the API's routes -------------------------------------------------------------------------


def chat_as_json_and_as_a_stream(stack: LocalStack) -> None:
    user = new_user()
    assert chat(stack, user, "Hi")["reply"]
    events = []
    with HTTP.stream(
        "POST",
        f"{stack.api_url}/chat",
        json={"message": "I'm a beginner", "clientMessageId": str(uuid.uuid4())},
        headers=bearer(user) | {"Accept": "text/event-stream"},
    ) as response:
        assert response.status_code == 200
        events = [line.removeprefix("event: ") for line in response.iter_lines() if line.startswith("event: ")]
    assert events[-1] == "done", events


def history_phones_and_link_codes(stack: LocalStack) -> None:
    user = new_user()
    chat(stack, user, "Hi")
    history = HTTP.get(f"{stack.api_url}/history", params={"limit": 5}, headers=bearer(user))
    assert history.status_code == 200, history.text
    assert len(history.json()["messages"]) == 2, history.text
    code = HTTP.post(f"{stack.api_url}/phone-links", headers=bearer(user))
    assert code.status_code in (200, 201), code.text
    assert code.json()["code"], code.text
    phones = HTTP.get(f"{stack.api_url}/phones", headers=bearer(user))
    assert phones.status_code == 200, phones.text
    assert phones.json() == {"phones": []}, phones.text


def only_rate_counters_left(stack: LocalStack, user_id: str) -> None:
    left = sorted(partition(stack, user_id))
    assert all(sort_key.startswith(RATE_PREFIX) for sort_key in left), left


def a_resent_message_is_answered_once(stack: LocalStack) -> None:
    user, client_id = new_user(), str(uuid.uuid4())
    first, again = (
        HTTP.post(f"{stack.api_url}/chat", json={"message": "Hi", "clientMessageId": client_id}, headers=bearer(user))
        for _ in range(2)
    )
    assert first.status_code == again.status_code == 200, (first.text, again.text)
    assert first.json() == again.json()
    history = HTTP.get(f"{stack.api_url}/history", headers=bearer(user))
    assert history.status_code == 200, history.text
    assert len(history.json()["messages"]) == 2


def erase_me(stack: LocalStack) -> None:
    """DELETE /me erases the messages and the phone the user linked."""
    user, phone = new_user(), new_phone()
    chat(stack, user, "Hi")
    code = HTTP.post(f"{stack.api_url}/phone-links", headers=bearer(user)).json()["code"]
    assert "Linked!" in link(stack, phone, code).text
    erased = HTTP.delete(f"{stack.api_url}/me", headers=bearer(user))
    assert erased.status_code == 200, erased.text
    assert erased.json()["deleted"]["messages"] == 2, erased.text
    assert erased.json()["deleted"]["phoneNumbers"] == 1, erased.text
    only_rate_counters_left(stack, user)


def the_summary_fold(stack: LocalStack) -> None:
    """Enough turns that messages leave the window: the fold summarises them (a Converse call)."""
    user = new_user()
    for number in range(12):
        chat(stack, user, f"Message number {number}: I like to walk in the park")
    deadline = time.monotonic() + 10
    while "~SUMMARY" not in partition(stack, user):
        assert time.monotonic() < deadline, "no summary after 24 messages"
        time.sleep(0.1)


def the_recall_index_follows_the_table(stack: LocalStack) -> None:
    """The indexer (fed by the table's stream) embeds each message with the one it answers and writes
    it with its words; a later turn recalls it (an embedding and a filtered hybrid query); an erase
    deletes the vectors and their words, and the stream's removals reach the indexer too."""
    from infra.local.deployment import RECALL_BUCKET_NAME, RECALL_INDEX_NAME

    user = new_user()
    vectors = stack.s3vectors.buckets[RECALL_BUCKET_NAME][RECALL_INDEX_NAME].vectors
    chat(stack, user, "By the way, my dog is called Biscuit")
    stack.drain_index()
    assert any(key.startswith(f"{user}#") for key in list(vectors)), "nothing indexed"
    chat(stack, user, "What is my dog called?")
    index = stack.s3vectors.buckets[RECALL_BUCKET_NAME][RECALL_INDEX_NAME]
    said = [{"text": "dog Biscuit", "metadataKey": "said"}]
    assert index.query(None, said, 10, {"user": user}), "the words are not searchable"
    assert HTTP.delete(f"{stack.api_url}/me", headers=bearer(user)).status_code == 200
    stack.drain_index()
    assert not any(key.startswith(f"{user}#") for key in list(vectors)), "vectors outlived the erase"
    assert not index.query(None, said, 10, {"user": user}), "the words outlived the erase"


# --- SMS ----------------------------------------------------------------------------------------


def a_text_answered_by_sms(stack: LocalStack) -> None:
    phone = new_phone()
    acknowledged = text(stack, phone, "Hi coach")
    assert acknowledged.status_code == 200, acknowledged.text
    assert replies_to(stack, phone, 1)[0].startswith("Hi, I'm your coach!")


def link_brings_the_texts(stack: LocalStack) -> None:
    """A number that texted before is linked: its texts join the app user's memory at once."""
    user, phone = new_user(), new_phone()
    text(stack, phone, "Hi coach")
    replies_to(stack, phone, 1)
    code = HTTP.post(f"{stack.api_url}/phone-links", headers=bearer(user)).json()["code"]
    linked = link(stack, phone, code)
    assert "Linked!" in linked.text, linked.text
    history = HTTP.get(f"{stack.api_url}/history", params={"limit": 10}, headers=bearer(user)).json()["messages"]
    assert "Hi coach" in [message["content"] for message in history], history
    assert HTTP.get(f"{stack.api_url}/phones", headers=bearer(user)).json() == {"phones": [phone]}


def a_pending_merge_finished_by_the_next_text(stack: LocalStack) -> None:
    """A link whose merge did not run (it failed): the worker joins the texts before answering."""
    user, phone = new_user(), new_phone()
    text(stack, phone, "Hi coach")
    replies_to(stack, phone, 1)
    code = HTTP.post(f"{stack.api_url}/phone-links", headers=bearer(user)).json()["code"]
    store = Repositories.over(operator_table(stack), stack.table_name, Settings.from_env())
    owner = store.phones.link_by_code(phone, code)  # the link's own write, without its merge
    assert owner is not None
    assert owner.merge_from is not None
    text(stack, phone, "I'm a beginner")
    replies_to(stack, phone, 2)
    history = HTTP.get(f"{stack.api_url}/history", params={"limit": 10}, headers=bearer(user)).json()["messages"]
    contents = [message["content"] for message in history]
    assert {"Hi coach", "I'm a beginner"} <= set(contents), contents
    only_rate_counters_left(stack, owner.merge_from)


def a_long_sms_conversation_is_summarised(stack: LocalStack) -> None:
    phone = new_phone()
    for number in range(12):
        text(stack, phone, f"Text number {number}: I like to walk in the park")
        replies_to(stack, phone, number + 1)
    store = Repositories.over(operator_table(stack), stack.table_name, Settings.from_env())
    owner = store.phones.find_owner(phone)
    assert owner is not None
    deadline = time.monotonic() + 10
    while "~SUMMARY" not in partition(stack, owner.user_id):
        assert time.monotonic() < deadline, "no summary after 24 messages by text"
        time.sleep(0.1)


def a_text_whose_queueing_failed_is_taken_on_twilio_s_retry(stack: LocalStack) -> None:
    """The queue cannot be reached: the webhook answers 503 and releases the text's idempotency
    record, so Twilio's retry of the same MessageSid (its fallback URL) is taken and answered."""
    phone = new_phone()
    form = webhook_form(f"SM{uuid.uuid4().hex}", phone, "Hi coach")
    url = f"{stack.api_url}/sms"
    post = {
        "content": urlencode(form),
        "headers": {"X-Twilio-Signature": stack.twilio.sign(url, form),
                    "Content-Type": "application/x-www-form-urlencoded"},
    }  # fmt: skip
    with TcpProxy(stack.dynamodb.port) as proxy:
        proxy.cut_when(b"AmazonSQS.SendMessage", 100)  # every try of every send, botocore's retries included
        # The webhook starts cold with its queue behind the proxy, as after a deploy with a new endpoint.
        with temporary_environment({"AWS_ENDPOINT_URL_SQS": proxy.url}):
            refused = HTTP.post(url, **post)  # type: ignore[arg-type]
    assert refused.status_code == 503, refused.text
    taken = HTTP.post(url, **post)  # type: ignore[arg-type]
    assert taken.status_code == 200, taken.text
    assert replies_to(stack, phone, 1)[0].startswith("Hi, I'm your coach!")


def a_wrong_link_code_is_counted(stack: LocalStack) -> None:
    """A wrong code is refused and counted against the phone (locked out past a few)."""
    phone = new_phone()
    refused = text(stack, phone, "LINK ABCDEFGHJK")
    assert "not valid" in refused.text, refused.text


def erase_by_text(stack: LocalStack) -> None:
    phone = new_phone()
    text(stack, phone, "Hi coach")
    replies_to(stack, phone, 1)
    asked = text(stack, phone, "DELETE MY DATA")
    assert "YES DELETE" in asked.text, asked.text
    done = text(stack, phone, "YES DELETE")
    assert "your data is erased" in done.text, done.text


def stop_and_start(stack: LocalStack) -> None:
    phone = new_phone()
    assert text(stack, phone, "STOP", OptOutType="STOP").status_code == 200
    text(stack, phone, "are you there?")
    time.sleep(1.5)
    assert [sent for sent in stack.twilio.sent if sent.to == phone] == [], "a text to an opted-out number"
    assert text(stack, phone, "START", OptOutType="START").status_code == 200
    text(stack, phone, "Hi coach")
    assert replies_to(stack, phone, 1)[0].startswith("Hi, I'm your coach!")


def a_failing_text_ends_in_the_dead_letter_queue(stack: LocalStack) -> None:
    """Twilio keeps failing: the worker reports the text failed at each try (its idempotency record
    is released each time), and after the queue's maxReceiveCount it is in the dead-letter queue.
    The operator shortens the queue's visibility timeout meanwhile (the template's 720 s would make
    the three tries take 24 minutes), and puts it back after."""
    phone = new_phone()
    sqs = boto3.client("sqs", region_name=stack.region, endpoint_url=stack.dynamodb.url)
    dead_letters = str(stack.deployment.resolve({"Ref": "SmsDeadLetterQueue"}))
    operator_sqs = stack.operator_client("sqs")
    visibility = operator_sqs.get_queue_attributes(QueueUrl=stack.sms_queue_url, AttributeNames=["VisibilityTimeout"])
    operator_sqs.set_queue_attributes(QueueUrl=stack.sms_queue_url, Attributes={"VisibilityTimeout": "5"})
    stack.twilio.transient = [503] * 1000
    try:
        text(stack, phone, "Hi coach")
        deadline = time.monotonic() + 60
        store = Repositories.over(operator_table(stack), stack.table_name, Settings.from_env())
        owner = store.phones.find_owner(phone)
        assert owner is not None, "the text's number has no owner"
        while not _take_dead_letter(sqs, dead_letters, owner.user_id):
            assert time.monotonic() < deadline, "the failing text never reached the dead-letter queue"
            time.sleep(0.5)
    finally:
        stack.twilio.transient = []
        operator_sqs.set_queue_attributes(QueueUrl=stack.sms_queue_url, Attributes=visibility["Attributes"])


def _take_dead_letter(sqs: Any, queue_url: str, user_id: str) -> bool:
    """Receive the dead-lettered text queued for `user_id` (sealed: its group names the user, not
    the number), if it is there, and delete it."""
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["MessageGroupId"])
    for message in messages.get("Messages", []):
        if message["Attributes"]["MessageGroupId"] == user_id:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            return True
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    return False


# --- SnapStart ----------------------------------------------------------------------------------


def the_snapstart_hooks(stack: LocalStack) -> None:
    """The hooks each model-calling function runs around a snapshot, then a turn as usual."""

    async def api_hooks() -> None:
        transport = httpx.ASGITransport(app=asgi_app("ApiFunction"))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as client:
            for hook in ("/_snapstart/before-checkpoint", "/_snapstart/after-restore"):
                assert (await client.post(hook)).status_code == 204

    with acting_as("ApiFunction"):
        asyncio.run(api_hooks())
    with acting_as("SmsWorkerFunction"):
        primer = handler_module("SmsWorkerFunction")._parts.primer
        primer.prime_sync()
        primer.renew()
    chat(stack, new_user(), "Hi")
    a_text_answered_by_sms(stack)


# --- check-ins ----------------------------------------------------------------------------------


def at_midday_now() -> str:
    """A time zone where it is about midday now, so a check-in fired now is never in the quiet hours."""
    offset = 12 - datetime.now(UTC).hour
    return "Etc/UTC" if offset == 0 else f"Etc/GMT{-offset:+d}"


def at_the_scheduling_step(stack: LocalStack, user_id: str, **more: str) -> None:
    """The user's plan, and the scheduling step with all but the check-ins answered, and `more`
    (the operator's write)."""
    answers = {
        "workout_planning": {"exercise_preferences": "kettlebell swings"},
        "scheduling": {"training_days": "Mon, Wed, Fri", "training_time": "6pm", "timezone": at_midday_now(), **more},
    }
    context = {step: {key: Answer(value).stored() for key, value in items.items()} for step, items in answers.items()}
    state = OnboardingState(current_agent=OnboardingAgentType.SCHEDULING, agent_context=context)
    save_state(operator_table(stack), stack.table_name, user_id, state)


def _schedule_of(stack: LocalStack, user_id: str) -> dict[str, Any] | None:
    scheduler = stack.operator_client("scheduler")
    group = stack.deployment.resolve({"Ref": "CheckInScheduleGroup"})
    try:
        found: dict[str, Any] = scheduler.get_schedule(Name=schedule_name(user_id), GroupName=group)
    except scheduler.exceptions.ResourceNotFoundException:
        return None
    return found


def _fire(firing: dict[str, Any]) -> dict[str, Any]:
    """One firing of CheckInFunction, as Scheduler invokes it; a function error is a check-in the
    person never gets."""
    try:
        answer: dict[str, Any] = invoke("CheckInFunction", firing)
    except Exception as error:
        raise AssertionError(f"the check-in firing failed: {type(error).__name__}") from error
    return answer


def _check_ins_of(stack: LocalStack, user_id: str) -> dict[str, Any]:
    answered = HTTP.get(f"{stack.api_url}/check-ins", headers=bearer(user_id))
    assert answered.status_code == 200, answered.text
    found: dict[str, Any] = answered.json()
    return found


def check_ins_in_the_app(stack: LocalStack) -> None:
    """An app user agrees check-ins in the app: a turn makes the schedule (passing the scheduler's
    role), GET /check-ins gives it, DELETE /me deletes it and counts it."""
    user = new_user()
    at_the_scheduling_step(stack, user)
    chat(stack, user, "weekly by app, Monday evenings")
    found = _check_ins_of(stack, user)
    assert (found["scheduled"], found["channel"], found["days"], found["at"]) == (True, "app", ["MON"], "18:00"), found
    erased = HTTP.delete(f"{stack.api_url}/me", headers=bearer(user))
    assert erased.status_code == 200, erased.text
    assert erased.json()["deleted"]["checkInSchedules"] == 1, erased.text
    assert _schedule_of(stack, user) is None


def check_ins_by_sms(stack: LocalStack) -> None:
    """Check-ins agreed by text: the worker makes the schedule; a firing delivered twice sends one
    check-in that names the plan; STOP pauses the schedule, START resumes it; a link moves it to
    the app user."""
    phone, app_user = new_phone(), new_user()
    text(stack, phone, "Hi coach")
    replies_to(stack, phone, 1)
    store = Repositories.over(operator_table(stack), stack.table_name, Settings.from_env())
    owner = store.phones.find_owner(phone)
    assert owner is not None
    at_the_scheduling_step(stack, owner.user_id)
    text(stack, phone, "weekly by SMS, Monday mornings")
    replies_to(stack, phone, 2)
    assert _schedule_of(stack, owner.user_id) is not None, "the worker made the schedule"
    firing = {"user_id": owner.user_id, "channel": "sms", "fire_time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:00Z")}
    assert _fire(firing)["status"] == "sent"
    assert _fire(firing)["status"] == "already_sent"
    sent = replies_to(stack, phone, 3)
    assert len(sent) == 3, sent
    assert "kettlebell swings" in sent[-1], sent[-1]
    text(stack, phone, "STOP", OptOutType="STOP")
    assert (_schedule_of(stack, owner.user_id) or {}).get("State") == "DISABLED", "STOP pauses the schedule"
    text(stack, phone, "START", OptOutType="START")
    assert (_schedule_of(stack, owner.user_id) or {}).get("State") == "ENABLED", "START resumes it"
    code = HTTP.post(f"{stack.api_url}/phone-links", headers=bearer(app_user)).json()["code"]
    assert "Linked!" in link(stack, phone, code).text
    assert _schedule_of(stack, owner.user_id) is None
    found = _check_ins_of(stack, app_user)
    assert (found["scheduled"], found["channel"]) == (True, "sms"), found


FLOWS: dict[str, Flow] = {
    flow.__name__: flow
    for flow in (
        chat_as_json_and_as_a_stream,
        a_resent_message_is_answered_once,
        history_phones_and_link_codes,
        erase_me,
        the_summary_fold,
        the_recall_index_follows_the_table,
        a_text_answered_by_sms,
        link_brings_the_texts,
        a_pending_merge_finished_by_the_next_text,
        a_long_sms_conversation_is_summarised,
        a_text_whose_queueing_failed_is_taken_on_twilio_s_retry,
        a_wrong_link_code_is_counted,
        erase_by_text,
        stop_and_start,
        a_failing_text_ends_in_the_dead_letter_queue,
        the_snapstart_hooks,
        check_ins_in_the_app,
        check_ins_by_sms,
    )
}
