"""A randomized fault soak over the local stack, as Jepsen-style tests treat a database: app users
and SMS users talk to the coach at once while TCP proxies in front of DynamoDB, Bedrock and S3
Vectors reset about 13 % of requests before they reach the server, lose the answer of others after
the server applied them, or stall them 0.5 to 3 s. Clients behave as documented: the app resends
the same `clientMessageId` on an error or a 409 until it gets its reply; a text is sent again with
the same `MessageSid` when the webhook does not answer 200 (Twilio's Fallback URL, once).

What must hold: every app message answered, stored once with one reply after it, the text the
client got equal to the stored reply (JSON and SSE alike); every text the webhook acknowledged
stored once and answered by one SMS; the dead-letter queue empty. The figures go to
docs/reliability.md ("lost write responses"); `-s` prints them."""

import json
import random
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from infra.local.stack import LocalStack
from infra.local.template import function_timeout_s
from onboarding.persistence.schema import phone_key
from tests.support.deployed_flows import HTTP, bearer, new_phone, new_user, operator_table, text
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow

FAULT_RATE = 0.13
APP_USERS, SMS_USERS, MESSAGES = 8, 4, 12
TWILIO_TRIES = 2  # the webhook URL, then the Fallback URL (decision 0008)
APP_TRIES = 30
# The operator's, for a soak of minutes (the template's is 720 s), but never below the worker's
# timeout, the least AWS lets a queue mapped to a function have: with less, a text whose answer
# stalls past it is handed to a second invocation while the first still answers it, each such
# receive counts towards maxReceiveCount, and an answered text ends in the dead-letter queue.
QUEUE_VISIBILITY_S = function_timeout_s("SmsWorkerFunction")
SAYINGS = [
    "I'm a beginner",
    "I walk about {n} km most days",
    "I want to run a 5k in {n} weeks",
    "my knee hurts after {n} km",
    "I can train {n} days a week",
    "mornings suit me, around {n} am",
    "I eat mostly vegetarian, {n} meals a day",
    "weekly check-ins by text please",
    "I'm in Berlin, so central european time",
    "I sleep about {n} hours",
    "thanks, that helps {n} times over",
    "ok let's keep going",
]


@dataclass
class Tally:
    app_sent: int = 0
    app_answered: int = 0
    app_tries: int = 0
    texts_sent: int = 0
    texts_acknowledged: int = 0
    texts_answered: int = 0
    worst_text_delay_s: float = 0.0
    problems: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def problem(self, what: str) -> None:
        with self.lock:
            self.problems.append(what)


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    # Every resend after a fault is counted by the rate limit, so whether a user's dozen messages and
    # their resends fill one fixed minute depends on where the minute starts: this test is not about it.
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RATE_LIMIT_MESSAGES", "0")
        with LocalStack(api_port=0) as running:
            sqs = running.operator_client("sqs")
            sqs.set_queue_attributes(
                QueueUrl=running.sms_queue_url, Attributes={"VisibilityTimeout": str(QUEUE_VISIBILITY_S)}
            )
            yield running


def _saying(index: int, rng: random.Random) -> str:
    return SAYINGS[index % len(SAYINGS)].format(n=rng.randint(2, 9))


def _stored(stack: LocalStack, user: str) -> list[tuple[str, str]]:
    answer = HTTP.get(f"{stack.api_url}/history", params={"limit": 100}, headers=bearer(user))
    assert answer.status_code == 200, answer.text
    return [(m["role"], m["content"]) for m in reversed(answer.json()["messages"])]


def _app_turn(stack: LocalStack, user: str, message: str, stream: bool, tally: Tally) -> str | None:
    """The reply the client got, resending the same id until it has one (None: never)."""
    client_id = str(uuid.uuid4())
    body = {"message": message, "clientMessageId": client_id}
    for _ in range(APP_TRIES):
        with tally.lock:
            tally.app_tries += 1
        try:
            if stream:
                got = _streamed(stack, user, body)
            else:
                answer = httpx.post(f"{stack.api_url}/chat", json=body, headers=bearer(user), timeout=120)
                got = answer.json().get("reply") if answer.status_code == 200 else None
                if answer.status_code >= 500 and answer.status_code not in (502, 503):
                    tally.problem(f"app {answer.status_code}: {answer.text[:200]}")
        except httpx.HTTPError:
            got = None
        if got is not None:
            return got
        time.sleep(0.5)
    return None


def _streamed(stack: LocalStack, user: str, body: dict[str, str]) -> str | None:
    chunks: list[str] = []
    headers = bearer(user) | {"Accept": "text/event-stream"}
    with httpx.stream("POST", f"{stack.api_url}/chat", json=body, headers=headers, timeout=120) as response:
        if response.status_code != 200:
            return None
        event = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: ") and event == "chunk":
                chunks.append(json.loads(line.removeprefix("data: "))["text"])
            elif line.startswith("data: ") and event == "done":
                return "".join(chunks)
    return None


def _app_user(stack: LocalStack, seed: int, tally: Tally) -> None:
    rng, user = random.Random(seed), new_user()
    sent: list[tuple[str, str]] = []
    for index in range(MESSAGES):
        message = _saying(index, rng)
        with tally.lock:
            tally.app_sent += 1
        reply = _app_turn(stack, user, message, stream=index % 2 == 1, tally=tally)
        if reply is None:
            tally.problem(f"app message never answered: {message!r}")
            return
        with tally.lock:
            tally.app_answered += 1
        sent.append(("user", message))
        sent.append(("assistant", reply))
    stored = _stored(stack, user)
    if stored != sent:
        tally.problem(f"app user's history differs from what the client got: {stored[-6:]} vs {sent[-6:]}")


def _replies(stack: LocalStack, phone: str) -> list[str]:
    return [sent.body for sent in stack.twilio.sent if sent.to == phone]


def _sms_user(stack: LocalStack, seed: int, tally: Tally) -> None:
    rng, phone = random.Random(seed), new_phone()
    acknowledged: list[str] = []
    for index in range(MESSAGES):
        message, sid = _saying(index, rng), f"SM{uuid.uuid4().hex}"
        with tally.lock:
            tally.texts_sent += 1
        if not any(text(stack, phone, message, sid=sid).status_code == 200 for _ in range(TWILIO_TRIES)):
            continue  # Twilio gave up: never acknowledged, so not ours to answer
        acknowledged.append(message)
        with tally.lock:
            tally.texts_acknowledged += 1
        started, deadline = time.monotonic(), time.monotonic() + 4 * QUEUE_VISIBILITY_S + 60
        while len(_replies(stack, phone)) < len(acknowledged) and time.monotonic() < deadline:
            time.sleep(0.2)
        delay = time.monotonic() - started
        with tally.lock:
            tally.worst_text_delay_s = max(tally.worst_text_delay_s, delay)
        if len(_replies(stack, phone)) < len(acknowledged):
            tally.problem(f"acknowledged text never answered: {message!r}")
            return
    time.sleep(2)  # a second answer to any of them would have come by now
    replies = _replies(stack, phone)
    with tally.lock:
        tally.texts_answered += len(replies)
    if len(replies) != len(acknowledged):
        tally.problem(f"{len(acknowledged)} texts acknowledged, {len(replies)} answered")
    if not acknowledged:
        return
    owner = operator_table(stack).get_item(TableName=stack.table_name, Key=phone_key(phone), ConsistentRead=True)
    said = [content for role, content in _stored(stack, str(owner["Item"]["user_id"]["S"])) if role == "user"]
    if said != acknowledged:
        tally.problem(f"texts stored {said} != acknowledged {acknowledged}")


def _dead_letters(stack: LocalStack) -> int:
    sqs = stack.operator_client("sqs")
    queue = str(stack.deployment.resolve({"Ref": "SmsDeadLetterQueue"}))
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


@pytest.mark.parametrize("seed", [1, 2])
def test_under_lost_answers_resets_and_stalls_nothing_acknowledged_is_lost(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    proxies: dict[str, TcpProxy] = {}
    servers = {
        "AWS_ENDPOINT_URL_DYNAMODB": stack.dynamodb.port,
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": stack.bedrock.port,
        "AWS_ENDPOINT_URL_S3VECTORS": stack.s3vectors.port,
    }
    started = time.monotonic()
    try:
        for variable, port in servers.items():
            proxies[variable] = proxy = TcpProxy(port).__enter__()
            proxy.chaos(random.Random(rng.random()), FAULT_RATE)
            monkeypatch.setenv(variable, proxy.url)  # the functions start cold on the proxies
        tally = Tally()
        users = [
            threading.Thread(target=_app_user, args=(stack, rng.randrange(10**9), tally)) for _ in range(APP_USERS)
        ] + [threading.Thread(target=_sms_user, args=(stack, rng.randrange(10**9), tally)) for _ in range(SMS_USERS)]
        for user in users:
            user.start()
        for user in users:
            user.join()
    finally:
        for proxy in proxies.values():
            proxy.__exit__()
    faults = {variable.removeprefix("AWS_ENDPOINT_URL_"): proxy.faults for variable, proxy in proxies.items()}
    requests = {variable.removeprefix("AWS_ENDPOINT_URL_"): proxy.connections for variable, proxy in proxies.items()}
    dead = _dead_letters(stack)
    print(  # the figures for docs/reliability.md
        f"\nseed {seed}: {time.monotonic() - started:.0f} s; app {tally.app_answered}/{tally.app_sent} answered "
        f"in {tally.app_tries} tries; texts {tally.texts_sent} sent, {tally.texts_acknowledged} acknowledged, "
        f"{tally.texts_answered} answered; dead letters {dead}; worst text delay {tally.worst_text_delay_s:.1f} s; "
        f"faults {faults}; connections {requests}"
    )
    assert tally.problems == []
    assert tally.app_answered == tally.app_sent == APP_USERS * MESSAGES
    assert tally.texts_answered == tally.texts_acknowledged
    assert tally.texts_acknowledged > 0
    assert dead == 0
    assert sum(sum(kinds.values()) for kinds in faults.values()) > 0, "no fault was injected"
