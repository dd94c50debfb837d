"""Concurrency over real HTTP on loopback: the local gateway, the local DynamoDB server (each request
atomic, as DynamoDB's are: infra/local/dynamodb_server.py), the Bedrock emulator and the Twilio stand-in.
Every wait is bounded."""

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlencode

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from infra.local.stack import LocalStack
from infra.local.template import table_create_request
from infra.local.twilio_emulator import webhook_form

pytestmark = pytest.mark.integration

# The racing-transactions test: rounds, simultaneous transactions a round, items in its table first.
ROUNDS, RACERS, PREFILL = 10, 20, 300
HTTP = httpx.Client(timeout=120, limits=httpx.Limits(max_connections=100))


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with pytest.MonkeyPatch.context() as env:
        # 100 messages at once are far over the per-user rate limit; that limit has its own tests.
        env.setenv("RATE_LIMIT_MESSAGES", "0")
        with LocalStack(api_port=0) as running:
            yield running


def at_once(count: int, call: Callable[[int], httpx.Response]) -> list[httpx.Response]:
    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(call, range(count), timeout=300))


def partition(stack: LocalStack, user_id: str) -> list[dict[str, Any]]:
    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=stack.dynamodb.url)
    pages = client.get_paginator("query").paginate(
        TableName=stack.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"USER#{user_id}"}},
        ConsistentRead=True,
    )
    return [item for page in pages for item in page["Items"]]


def chat(stack: LocalStack, user_id: str, body: dict[str, str]) -> httpx.Response:
    return HTTP.post(f"{stack.api_url}/chat", json=body, headers={"Authorization": f"Bearer {user_id}"})


@pytest.mark.parametrize(
    "turns", [30, pytest.param(100, marks=pytest.mark.slow, id="100")], ids=lambda n: f"{n}"
)  # 100 at once in the slow tier; 30 at once still races every write in the default run
def test_concurrent_turns_for_one_user_store_every_message_paired(stack: LocalStack, user_id: str, turns: int) -> None:
    started = time.monotonic()
    responses = at_once(turns, lambda i: chat(stack, user_id, {"message": f"message {i}", "clientMessageId": f"c-{i}"}))
    elapsed = time.monotonic() - started
    assert [r.status_code for r in responses] == [200] * turns
    items = partition(stack, user_id)
    messages = {i["sk"]["S"]: i for i in items if i["sk"]["S"].startswith("MSG#")}
    assert len(messages) == 2 * turns, "none lost, none overwritten"
    users = sorted(m["content"]["S"] for m in messages.values() if m["role"]["S"] == "user")
    assert users == sorted(f"message {i}" for i in range(turns))
    # Pairing, explicitly: each turn's record names its user message and its reply, and each
    # response carries the same two ids. (The scripted coach's quote of the message it answers is no
    # pairing here: turns at once all read a history without a reply, so every reply is the
    # greeting, which quotes nothing.)
    records = {i["sk"]["S"].removeprefix("CLIENT#"): i for i in items if i["sk"]["S"].startswith("CLIENT#")}
    assert len(records) == turns
    replies = set()
    for index, response in enumerate(responses):
        body, record = response.json(), records[f"c-{index}"]
        assert record["user_message_id"]["S"] == body["userMessageId"]
        assert record["reply_message_id"]["S"] == body["assistantMessageId"]
        user_item = messages["MSG#" + body["userMessageId"].replace("-", "#", 1)]
        reply_item = messages["MSG#" + body["assistantMessageId"].replace("-", "#", 1)]
        assert user_item["content"]["S"] == f"message {index}"
        assert (reply_item["role"]["S"], reply_item["content"]["S"]) == ("assistant", body["reply"])
        assert reply_item["sk"]["S"] > user_item["sk"]["S"], "a reply is stored after its message"
        replies.add(body["assistantMessageId"])
    assert len(replies) == turns
    print(f"{turns} concurrent turns: {elapsed:.1f} s, {2 * turns} messages stored")


def test_one_client_message_id_delivered_5_times_at_once_and_again_is_one_turn(stack: LocalStack, user_id: str) -> None:
    """At once: one delivery answers, the copies that arrive while it does are told to retry (409
    `in_progress`, decision 0009); every later one replays the same turn."""
    body = {"message": "I'm a beginner", "clientMessageId": "resent-1"}
    concurrent = at_once(5, lambda _: chat(stack, user_id, body))
    sequential = [chat(stack, user_id, body) for _ in range(5)]
    answered = [r for r in concurrent if r.status_code == 200]
    assert answered
    assert all(r.json()["error"] == "in_progress" for r in concurrent if r.status_code != 200)
    answers = {
        (r.status_code, r.json()["userMessageId"], r.json()["assistantMessageId"]) for r in answered + sequential
    }
    assert len(answers) == 1, answers
    assert {r.json()["reply"] for r in answered + sequential} == {answered[0].json()["reply"]}
    stored = [i for i in partition(stack, user_id) if i["sk"]["S"].startswith("MSG#")]
    # One turn: the message once, the reply once (and the answer's tool call and result, once).
    assert [i["role"]["S"] for i in stored].count("user") == 1
    assert [i.get("content", {}).get("S") for i in stored].count(answered[0].json()["reply"]) == 1
    assert len(stored) <= 4


def test_one_message_sid_delivered_5_times_at_once_is_one_turn_and_one_sms(stack: LocalStack) -> None:
    phone, sid = "+15557770123", "SMconcurrency0000000000000000001"
    form = webhook_form(sid, phone, "Hi coach, I'm new here")
    url = f"{stack.api_url}/sms"
    headers = {"X-Twilio-Signature": stack.twilio.sign(url, form), "Content-Type": "application/x-www-form-urlencoded"}
    responses = at_once(5, lambda _: HTTP.post(url, content=urlencode(form), headers=headers))
    # A copy that arrives while another is handled gets 503 (it could not tell the text is safe), and
    # Twilio sends it again: sent again now, each gets the answer of the one that did the work.
    done = [r for r in responses if r.status_code == 200]
    assert done, [r.status_code for r in responses]
    assert all(r.status_code in (200, 503) for r in responses), [r.status_code for r in responses]
    again = [HTTP.post(url, content=urlencode(form), headers=headers) for r in responses if r.status_code == 503]
    assert all((a.status_code, a.text) == (200, done[0].text) for a in again)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not [s for s in stack.twilio.sent if s.to == phone]:
        time.sleep(0.1)
    time.sleep(2)  # time for a duplicate to arrive, if one were coming
    assert len([s for s in stack.twilio.sent if s.to == phone]) == 1
    owner = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=stack.dynamodb.url).get_item(
        TableName=stack.table_name, Key={"pk": {"S": f"PHONE#{phone}"}, "sk": {"S": "~OWNER"}}
    )["Item"]
    stored = [i for i in partition(stack, owner["user_id"]["S"]) if i["sk"]["S"].startswith("MSG#")]
    assert sorted(i["role"]["S"] for i in stored) == ["assistant", "user"]


def test_racing_conditional_transactions_on_the_local_server_have_exactly_one_winner(stack: LocalStack) -> None:
    """The server itself, without retries: ROUNDS rounds of RACERS simultaneous `TransactWriteItems`,
    each claiming one key on condition and writing one item of its own. DynamoDB lets exactly one win
    a round and applies nothing of a cancelled one. moto alone does not: it copies a transaction's
    tables first and puts the copy back if the transaction is cancelled, so without the lock in
    infra/local/dynamodb_server.py two racers win a round, a copy put back undoes or revives other
    transactions' writes, or a copy taken while another request writes fails with a 500. PREFILL
    items make that copy slow enough for requests to overlap in the server (with an empty table,
    this passed without the lock too)."""
    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=stack.dynamodb.url,
        config=Config(retries={"mode": "standard", "max_attempts": 1}, max_pool_connections=RACERS),
    )
    table = f"race-{uuid.uuid4()}"
    client.create_table(**table_create_request("ConversationTable", table))
    for first in range(0, PREFILL, 25):
        puts: list[Any] = [
            {"PutRequest": {"Item": {"pk": {"S": "FILL"}, "sk": {"S": f"{n:05d}"}}}} for n in range(first, first + 25)
        ]
        assert not client.batch_write_item(RequestItems={table: puts}).get("UnprocessedItems")

    def claim(round_: int, racer: int, gate: threading.Barrier) -> str:
        gate.wait(timeout=30)
        try:
            client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": table,
                            "Item": {
                                "pk": {"S": "RACE"},
                                "sk": {"S": f"CLAIM#{round_:02d}"},
                                "racer": {"N": str(racer)},
                            },
                            "ConditionExpression": "attribute_not_exists(sk)",
                        }
                    },
                    {
                        "Put": {
                            "TableName": table,
                            "Item": {"pk": {"S": "RACE"}, "sk": {"S": f"OWN#{round_:02d}#{racer:02d}"}},
                        }
                    },
                ]
            )
        except ClientError as error:
            return str(error.response["Error"]["Code"])
        return "won"

    started = time.monotonic()
    outcomes: list[Counter[str]] = []
    with ThreadPoolExecutor(max_workers=RACERS) as pool:
        for round_ in range(ROUNDS):
            gate = threading.Barrier(RACERS)  # all of a round's transactions leave together
            futures = [pool.submit(claim, round_, racer, gate) for racer in range(RACERS)]
            outcomes.append(Counter(future.result(timeout=120) for future in futures))
    elapsed = time.monotonic() - started
    pages = client.get_paginator("query").paginate(
        TableName=table, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": "RACE"}}
    )
    stored = {item["sk"]["S"]: item for page in pages for item in page["Items"]}
    client.delete_table(TableName=table)
    expected = Counter({"won": 1, "TransactionCanceledException": RACERS - 1})
    broken = {round_: dict(outcome) for round_, outcome in enumerate(outcomes) if outcome != expected}
    assert not broken, f"rounds without exactly one winner among {RACERS}: {broken}"
    # Each round stores its claim and its winner's own item, and nothing of a cancelled transaction.
    winners = {sk: int(item["racer"]["N"]) for sk, item in stored.items() if sk.startswith("CLAIM#")}
    expected_keys = {f"CLAIM#{r:02d}" for r in range(ROUNDS)} | {
        f"OWN#{sk.removeprefix('CLAIM#')}#{racer:02d}" for sk, racer in winners.items()
    }
    missing, unexpected = sorted(expected_keys - set(stored)), sorted(set(stored) - expected_keys)
    assert not missing, f"lost: {missing}"
    assert not unexpected, f"written by cancelled transactions: {unexpected}"
    print(f"{ROUNDS} rounds of {RACERS} racing transactions over {PREFILL} items: {elapsed:.1f} s")
