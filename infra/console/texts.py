"""A text to the coach from the console: posted to the local stack's `/sms` webhook exactly as Twilio
would (signed form fields), answered by the queue worker through the local Twilio stand-in."""

import asyncio
import html
import re
import time
import uuid
from typing import Any

import boto3
import httpx

from infra.console.context import ConsoleContext
from infra.console.meter import Meter, metered_elsewhere
from infra.console.recorder import finish_record, new_record
from infra.console.schemas import MemoryView, SmsRequest, SmsResult
from infra.local.deployment import LOCAL_REGION
from infra.local.stack import LocalStack
from infra.local.twilio_emulator import encode_form, webhook_form

_IMMEDIATE = re.compile(r"<Message>(.*?)</Message>", re.DOTALL)
IDLE_TIMEOUT_S = 60.0


def _queue_busy(sqs: Any, queue_url: str) -> bool:
    counts = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return any(int(value) for value in counts.values())


def _wait_until_answered(stack: LocalStack) -> None:
    """Until the queue holds no text, waiting or in flight: the worker has answered (and folded).
    The webhook queues a text before it answers, so an idle queue after its answer means done."""
    sqs = boto3.Session().client("sqs", region_name=LOCAL_REGION, endpoint_url=stack.dynamodb.url)
    deadline = time.monotonic() + IDLE_TIMEOUT_S
    while _queue_busy(sqs, stack.sms_queue_url) and time.monotonic() < deadline:
        time.sleep(0.05)


def _post(stack: LocalStack, phone: str, text: str) -> httpx.Response:
    url = f"{stack.api_url}/sms"
    form = webhook_form(f"SM{uuid.uuid4().hex}", phone, text)
    headers = {"X-Twilio-Signature": stack.twilio.sign(url, form), "Content-Type": "application/x-www-form-urlencoded"}
    return httpx.post(url, content=encode_form(form), headers=headers, timeout=IDLE_TIMEOUT_S)


async def send_text(context: ConsoleContext, request: SmsRequest) -> SmsResult:
    stack = context.stack
    if stack is None:
        raise RuntimeError("texts need the local stack")
    phones = context.store.phones
    owner = await asyncio.to_thread(phones.find_owner, request.from_phone)
    before: dict[str, MemoryView] = {}
    for user in {owner.user_id if owner else None, request.user_id} - {None}:
        before[str(user)] = await context.memory(str(user))
    # An unknown number gets a new user: its plan is a new user's (read from an empty partition).
    planned_for = owner.user_id if owner else f"console-new-{uuid.uuid4()}"
    plan = await context.plan(planned_for, request.text)
    sent_before = len(stack.twilio.sent)
    meter = Meter()
    started = time.perf_counter()
    with metered_elsewhere(meter):
        response = await asyncio.to_thread(_post, stack, request.from_phone, request.text)
        await asyncio.to_thread(_wait_until_answered, stack)
    turn_ms = (time.perf_counter() - started) * 1000
    owner_after = await asyncio.to_thread(phones.find_owner, request.from_phone)
    subject = owner_after.user_id if owner_after else (request.user_id or "")
    immediate = _IMMEDIATE.search(response.text)
    reply = "\n".join(sms.body for sms in stack.twilio.sent[sent_before:] if sms.to == request.from_phone)
    if response.status_code != 200:
        status = f"http_{response.status_code}"
    elif immediate is not None or not meter.model_requests:
        status = "no_turn"
    else:
        status = "done"
    record = new_record(str(uuid.uuid4()), subject, "sms", request.text).model_copy(
        update={"memory_before": before.get(subject), "plan": plan if meter.model_requests else None}
    )
    after = await context.memory(subject) if subject else None
    immediate_text = html.unescape(immediate.group(1)) if immediate else None
    record = finish_record(
        record, meter, after, status, reply or immediate_text or "", None, turn_ms, context.settings.model_id
    )
    context.book.put(record)
    return SmsResult(webhook_status=response.status_code, immediate_reply=immediate_text, turn=record)
