"""Recording turns as they happen: the app's `/chat` route (through the gateway) and texts (posted to
the local stack's `/sms` webhook exactly as Twilio would, signed form fields, and answered by the
queue worker through the local Twilio stand-in).

A turn is recorded around the real request, never instead of it: the console plans the turn from
the stored memory just before handing the request on (the same load and plan the turn makes; with
no other writer in between they are the turn's own), meters it while it runs, and reads the memory
again when the response has ended (after the summary fold). The model's requests, captured on the
wire, are compared with the plan: `planMatchesRequest` says whether the model got exactly it.
"""

import asyncio
import html
import json
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import boto3
import httpx

from infra.console.context import ConsoleContext
from infra.console.meter import Meter, metered, metered_elsewhere
from infra.console.schemas import MemoryView, SmsRequest, SmsResult, TokenFigures, TurnFigures, TurnRecord
from infra.console.views import changed_paths
from infra.local.deployment import LOCAL_REGION
from infra.local.gateway import read_body
from infra.local.prices import UnknownModelError, model_prices
from infra.local.stack import LocalStack
from infra.local.twilio_emulator import webhook_form

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

TURN_HEADER = "x-console-turn"
COST_NOTE = "the model's tokens at list prices; with Lambda, API Gateway and DynamoDB: uv run python -m infra.cost"
NO_MODEL_CALL = "no model call in this turn"


def model_cost(tokens: TokenFigures, model_id: str) -> tuple[float | None, str]:
    """(dollars, what they count) for a turn's model tokens, at infra.cost's dated list prices. The
    rest of a turn's cost (Lambda, API Gateway, DynamoDB) is per 1,000 turns in infra.cost's report:
    the console's local figures (moto's capacity, a laptop's duration) would not price it honestly."""
    if not tokens.model_calls:
        return None, NO_MODEL_CALL
    try:
        input_price, output_price = model_prices(model_id)
    except UnknownModelError:
        return None, f"infra/local/prices.py has no price for the model {model_id}"
    return round(tokens.input * input_price.each + tokens.output * output_price.each, 6), COST_NOTE


def _header(scope: Scope, name: str) -> str | None:
    for key, value in scope.get("headers", []):
        if key.decode("latin-1").lower() == name:
            return str(value.decode("latin-1"))
    return None


def bearer_user(scope: Scope) -> str | None:
    scheme, _, token = (_header(scope, "authorization") or "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def new_record(turn_id: str, user_id: str, channel: str, message: str) -> TurnRecord:
    return TurnRecord(
        turn_id=turn_id,
        user_id=user_id,
        channel=channel,
        started_at=datetime.now(UTC),
        finished=False,
        status="running",
        message=message,
        reply="",
        plan=None,
        plan_matches_request=None,
        model_requests=[],
        memory_before=None,
        memory_after=None,
        changed=[],
        note=None,
        figures=TurnFigures(
            first_token_ms=None,
            turn_ms=None,
            dynamodb=Meter().dynamodb(),
            tokens=Meter().tokens(),
            cost_usd=None,
            cost_note=NO_MODEL_CALL,
        ),
    )


def finish_record(
    record: TurnRecord,
    meter: Meter,
    after: MemoryView | None,
    status: str,
    reply: str,
    first_token_ms: float | None,
    turn_ms: float,
    model_id: str,
) -> TurnRecord:
    plan, requests = record.plan, list(meter.model_requests)
    tokens = meter.tokens()
    cost_usd, cost_note = model_cost(tokens, model_id)
    matches = None if plan is None or not requests else requests[0].system == plan.system
    return record.model_copy(
        update={
            "finished": True,
            "status": status,
            "reply": reply,
            "model_requests": requests,
            "plan_matches_request": matches,
            "memory_after": after,
            "changed": changed_paths(record.memory_before, after),
            "figures": record.figures.model_copy(
                update={
                    "first_token_ms": first_token_ms,
                    "turn_ms": round(turn_ms, 1),
                    "dynamodb": meter.dynamodb(),
                    "tokens": tokens,
                    "cost_usd": cost_usd,
                    "cost_note": cost_note,
                }
            ),
        }
    )


class _Response:
    """What went back to the client: status, the reply's chunks (SSE) or JSON body, and when."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.status = 0
        self.first_chunk_ms: float | None = None
        self.body = bytearray()

    def see(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
        elif message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            if self.first_chunk_ms is None and b"event: chunk" in chunk:
                self.first_chunk_ms = round((time.perf_counter() - self.started) * 1000, 1)
            self.body.extend(chunk)

    def outcome(self) -> tuple[str, str]:
        """(status, reply): `done` and the reply's text, or the error code the client got."""
        text = self.body.decode("utf-8", "replace")
        if not text.lstrip().startswith("{"):
            return _sse_outcome(text)
        try:
            body = json.loads(text)
        except ValueError:
            return f"http_{self.status}", ""
        if self.status == 200:
            return "done", str(body.get("reply", ""))
        return str(body.get("error", f"http_{self.status}")), ""


def _sse_outcome(text: str) -> tuple[str, str]:
    reply, status = [], "incomplete"
    for block in text.split("\r\n\r\n" if "\r\n\r\n" in text else "\n\n"):
        lines = block.splitlines()
        event = next((line[7:] for line in lines if line.startswith("event: ")), "")
        data = "\n".join(line[6:] for line in lines if line.startswith("data: "))
        try:
            payload = json.loads(data) if data else {}
        except ValueError:
            continue
        if event == "chunk":
            reply.append(str(payload.get("text", "")))
        elif event == "done":
            status = "done"
        elif event == "error":
            status = str(payload.get("error", "error"))
    return status, "".join(reply)


class ChatRecorder:
    """ASGI middleware in front of the local gateway: serves the console's own routes, and records
    every `POST /chat` that passes through (from the console's page or any other client)."""

    def __init__(self, gateway: App, console_app: App, context: ConsoleContext) -> None:
        self._gateway = gateway
        self._console = console_app
        self._context = context

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == "/console" or path.startswith("/console/")):
            await self._console(scope, receive, send)
        elif scope["type"] == "http" and path == "/chat" and scope["method"] == "POST":
            await self._recorded(scope, receive, send)
        else:
            await self._gateway(scope, receive, send)

    async def _recorded(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await read_body(receive)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        user_id = bearer_user(scope)
        try:
            message = json.loads(body).get("message")
        except (ValueError, AttributeError):
            message = None
        if user_id is None or not isinstance(message, str):
            await self._gateway(scope, replay, send)  # refused by the API itself: nothing to record
            return
        context = self._context
        record = new_record(_header(scope, TURN_HEADER) or str(uuid.uuid4()), user_id, "app", message)
        try:
            before, plan = await asyncio.gather(context.memory(user_id), context.plan(user_id, message))
            record = record.model_copy(update={"memory_before": before, "plan": plan})
        except Exception as error:  # the console's view must never stand between the app and its user
            record = record.model_copy(
                update={"note": f"the console could not plan this turn ({type(error).__name__})"}
            )
        context.book.put(record)
        meter, response = Meter(), _Response(time.perf_counter())

        async def watched(out: Message) -> None:
            response.see(out)
            await send(out)

        try:
            with metered(meter):
                await self._gateway(scope, replay, watched)
        finally:
            status, reply = response.outcome()
            turn_ms = (time.perf_counter() - response.started) * 1000
            try:
                after: MemoryView | None = await context.memory(user_id)
            except Exception as error:
                after = None
                note = f"the console could not read the memory after the turn ({type(error).__name__})"
                record = record.model_copy(update={"note": note})
            context.book.put(
                finish_record(
                    record, meter, after, status, reply, response.first_chunk_ms, turn_ms, context.settings.model_id
                )
            )


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
    return httpx.post(url, content=urlencode(form), headers=headers, timeout=IDLE_TIMEOUT_S)


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
