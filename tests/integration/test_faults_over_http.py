"""Faults as production meets them, over real sockets: the API served by the local gateway, the
table behind a small TCP proxy (refused connections, lost answers), the model behind one that
stalls. The app reaches each server only through AWS's standard endpoint variables, so pointing a
variable at a proxy is all a test changes (the gateway starts the function cold with it).

Each test names the protection it shows; docs/reliability.md has the figures."""

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import httpx
import pytest

from infra.local.lambda_runner import invoke
from infra.local.stack import LocalStack
from onboarding.config import Settings
from onboarding.persistence import Repositories
from onboarding.persistence.schema import phone_key
from tests.support.deployed_flows import (
    HTTP,
    at_the_scheduling_step,
    bearer,
    new_phone,
    operator_table,
    replies_to,
    text,
)
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration

HTTP_TIMEOUT = 60


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(api_port=0) as running:
        yield running


@pytest.fixture
def table_proxy(stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> Iterator[TcpProxy]:
    """The app's table, behind a proxy (the test reads the table directly, not through it). A lost
    answer costs a try its read timeout: 3 s here, not the stack's 10 s for a busy machine's moto
    (a table this small answers well within it), so a call whose every try is lost ends in 9 s."""
    with TcpProxy(stack.dynamodb.port) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", proxy.url)
        monkeypatch.setenv("DYNAMODB_READ_TIMEOUT_S", "3")
        yield proxy


def _headers(user: str, stream: bool = False) -> dict[str, str]:
    return {"Authorization": f"Bearer {user}"} | ({"Accept": "text/event-stream"} if stream else {})


def chat(stack: LocalStack, user: str, message: str, stream: bool = False) -> httpx.Response:
    return httpx.post(
        f"{stack.api_url}/chat", json={"message": message}, headers=_headers(user, stream), timeout=HTTP_TIMEOUT
    )


def events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for block in response.text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            found.append((fields["event"], json.loads(fields["data"])))
    return found


def partition(stack: LocalStack, user: str) -> list[dict[str, Any]]:
    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=stack.dynamodb.url)
    return client.query(
        TableName=stack.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"USER#{user}"}},
        ConsistentRead=True,
    )["Items"]


def messages(stack: LocalStack, user: str) -> list[dict[str, Any]]:
    return [item for item in partition(stack, user) if item["sk"]["S"].startswith("MSG#")]


def memory_items(stack: LocalStack, user: str) -> dict[str, dict[str, Any]]:
    return {item["sk"]["S"]: item for item in partition(stack, user) if item["sk"]["S"] in ("~STATE", "~PROFILE")}


def test_a_lost_answer_to_the_reply_write_stores_the_reply_once(
    stack: LocalStack, table_proxy: TcpProxy, user_id: str
) -> None:
    """Item 3: the reply's transaction lands, its answer is lost; botocore sends it again, the
    local server (which ignores the ClientRequestToken) says the keys are taken, and the store sees
    its own write there instead of writing the reply again under new keys."""
    assert chat(stack, user_id, "Hi").status_code == 200
    table_proxy.drop_when(b'"assistant"')  # the next request carrying a reply: the turn's commit
    answered = chat(stack, user_id, "I'm a beginner")  # the coach saves it with a tool call
    assert answered.status_code == 200, answered.text
    assert table_proxy.dropped_responses == 1
    stored = messages(stack, user_id)
    call_ids = [call["id"] for m in stored if "tool_calls" in m for call in json.loads(m["tool_calls"]["S"])]
    results = [m["tool_call_id"]["S"] for m in stored if "tool_call_id" in m]
    assert call_ids
    assert len(call_ids) == len(set(call_ids)) == len(results) == len(set(results))
    assert [m["role"]["S"] for m in stored].count("user") == 2
    # ... so the next turn's history is one Bedrock accepts.
    assert chat(stack, user_id, "I run twice a week").status_code == 200


def test_every_route_answers_503_with_retry_after_when_the_table_refuses_connections(
    stack: LocalStack, table_proxy: TcpProxy, user_id: str
) -> None:
    """Item 4: a refused connection is a store failure, not a 500, on every route."""
    table_proxy.mode = "refuse"
    routes = [
        ("POST", "/chat", {"message": "Hi"}),
        ("GET", "/history", None),
        ("POST", "/phone-links", None),
        ("GET", "/phones", None),
        ("DELETE", "/me", None),
    ]
    for method, path, body in routes:
        response = httpx.request(
            method, f"{stack.api_url}{path}", json=body, headers=_headers(user_id), timeout=HTTP_TIMEOUT
        )
        assert response.status_code == 503, (path, response.text)
        assert response.json()["error"] == "store_unavailable", path
        assert response.json()["message"], path
        assert int(response.headers["retry-after"]) >= 1, path


def test_a_turn_whose_memory_cannot_be_read_says_so_and_changes_none_of_it(
    stack: LocalStack, table_proxy: TcpProxy, user_id: str
) -> None:
    """Item 2: the history read fails (every try's answer lost); the turn goes on without tools,
    says plainly that the coach cannot reach its notes, and writes no state or profile."""
    for message in ("Hi", "I'm a beginner", "I run twice a week"):
        assert chat(stack, user_id, message).status_code == 200
    before = memory_items(stack, user_id)
    assert before["~STATE"]["agent_context"]["S"] != "{}"
    table_proxy.drop_when(b"DynamoDB_20120810.Query", 10)  # the turn's one read, every try
    requests_before = len(stack.bedrock.requests)
    response = chat(stack, user_id, "Actually I'm advanced, call me Al", stream=True)
    streamed = events(response)
    assert streamed[-1][0] == "done", streamed[-1]
    said = "".join(data["text"] for name, data in streamed if name == "chunk")
    assert said.startswith("(I can't reach my notes about you right now")
    assert memory_items(stack, user_id) == before  # not one answer, step or name overwritten
    assert all("toolConfig" not in request.body for request in stack.bedrock.requests[requests_before:])
    assert [m["role"]["S"] for m in messages(stack, user_id)][-3:] == ["user", "assistant", "assistant"]


def test_a_reply_that_cannot_be_stored_ends_the_stream_with_an_error_event(
    stack: LocalStack, table_proxy: TcpProxy, user_id: str
) -> None:
    """Item 4: the table's connection is cut under the reply's write, every try, before it lands:
    the stream still ends, with `error`, and the user's message is kept."""
    table_proxy.cut_when(b'"assistant"', 10)
    streamed = events(chat(stack, user_id, "Hello coach", stream=True))
    assert [name for name, _ in streamed][:1] == ["chunk"]
    name, error = streamed[-1]
    assert (name, error["error"]) == ("error", "store_unavailable")
    assert table_proxy.cut_requests >= 2  # botocore tried again before giving up
    assert [m["role"]["S"] for m in messages(stack, user_id)] == ["user"]


def test_a_reply_whose_every_answer_is_lost_is_found_stored_and_the_stream_ends_done(
    stack: LocalStack, table_proxy: TcpProxy, user_id: str
) -> None:
    """Item 3: the reply's write lands but no try gets an answer; the store looks before it
    reports a failure, finds its own reply stored once, and the stream ends with `done`."""
    table_proxy.drop_when(b'"assistant"', 10)
    streamed = events(chat(stack, user_id, "Hello coach", stream=True))
    assert streamed[-1][0] == "done", streamed[-1]
    assert table_proxy.dropped_responses >= 2
    assert [m["role"]["S"] for m in messages(stack, user_id)] == ["user", "assistant"]


def test_a_hung_model_ends_the_turn_by_its_deadline_and_counts_for_the_breaker(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch, user_id: str
) -> None:
    """Item 5: a model endpoint that accepts and never answers. The turn ends by TURN_DEADLINE_S
    with an `error` event, the message kept; the failure opens the breaker (threshold 1 here)."""
    tight = {
        "TURN_DEADLINE_S": "4",
        "TURN_STORE_RESERVE_S": "1",
        "BEDROCK_MAX_ATTEMPTS": "1",
        "BEDROCK_CONNECT_TIMEOUT_S": "0.5",
        "BEDROCK_READ_TIMEOUT_S": "1",
        "BEDROCK_RETRY_BUDGET_S": "0.5",
        "DYNAMODB_MAX_ATTEMPTS": "1",
        "DYNAMODB_CONNECT_TIMEOUT_S": "0.3",
        "DYNAMODB_READ_TIMEOUT_S": "0.6",
        "CIRCUIT_FAILURE_THRESHOLD": "1",
    }
    for name, value in tight.items():
        monkeypatch.setenv(name, value)
    # Without recall: its embedding call shares the endpoint, and this counts the model's calls.
    monkeypatch.delenv("RECALL_INDEX_ARN", raising=False)
    with TcpProxy(int(stack.bedrock.url.rsplit(":", 1)[1])) as stalled:
        stalled.mode = "stall"
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", stalled.url)
        started = time.monotonic()
        streamed = events(chat(stack, user_id, "Hello coach", stream=True))
        elapsed = time.monotonic() - started
        refused = chat(stack, user_id, "Are you there?")
    name, error = streamed[-1]
    print(f"\nhung model: the turn ended after {elapsed:.2f} s (deadline 4 s), {stalled.connections} connection(s)")
    assert (name, error["error"]) == ("error", "model_unavailable")
    assert elapsed < 4 + 5  # by the deadline (and a busy machine's cold start), not botocore's 3 x 60 s
    assert stalled.connections <= 2  # one try, and at most one retry inside the budget
    assert [m["role"]["S"] for m in messages(stack, user_id)][:1] == ["user"]
    assert (refused.status_code, refused.json()["error"]) == (503, "coach_unavailable")


def test_an_erase_during_a_turn_leaves_nothing_of_the_turn(stack: LocalStack, user_id: str) -> None:
    """Item 6: the reply streams, the user erases meanwhile; the turn's writes are refused, so it
    cannot re-create the user, and its stream ends with `error` user_erased."""
    stack.bedrock.chunk_delay_s = 0.05
    first_chunk = threading.Event()
    result: dict[str, Any] = {}

    def stream() -> None:
        with httpx.stream(
            "POST",
            f"{stack.api_url}/chat",
            json={"message": "Hello coach"},
            headers=_headers(user_id, stream=True),
            timeout=HTTP_TIMEOUT,
        ) as response:
            body = b""
            for part in response.iter_bytes():
                body += part
                first_chunk.set()
            result["text"] = body.decode()

    try:
        streaming = threading.Thread(target=stream)
        streaming.start()
        assert first_chunk.wait(HTTP_TIMEOUT)
        erased = httpx.delete(f"{stack.api_url}/me", headers=_headers(user_id), timeout=HTTP_TIMEOUT)
        streaming.join(HTTP_TIMEOUT)
    finally:
        stack.bedrock.chunk_delay_s = 0.0
    assert erased.status_code == 200
    assert '"user_erased"' in result["text"]
    assert result["text"].rstrip().splitlines()[-2] == "event: error"
    assert [item["sk"]["S"] for item in partition(stack, user_id) if not item["sk"]["S"].startswith("LIMIT#")] == []


def test_the_json_reply_folds_its_summary_before_the_response_ends(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch, user_id: str
) -> None:
    """Item 9: behind Lambda Web Adapter the invocation ends with the response, so the fold (a model
    call) must be done by then: the summary is stored when the JSON body arrives, even though the
    summary's model call takes half a second."""
    monkeypatch.setenv("WINDOW_MAX_MESSAGES", "2")  # a fold is due after the second turn
    stack.bedrock.converse_delay_s = 0.5
    try:
        for message in ("Hi", "I'm a beginner"):
            assert chat(stack, user_id, message).status_code == 200
            summary = [item for item in partition(stack, user_id) if item["sk"]["S"] == "~SUMMARY"]
    finally:
        stack.bedrock.converse_delay_s = 0.0
    assert summary, "the response ended before the fold stored the summary"


# --- a text whose idempotency write lands while its answer is lost --------------------------------
# The write lands, the function never hears so, botocore sends it again. Taking its own retried
# write for another delivery in progress, the webhook would acknowledge the text unqueued (lost),
# and the worker would lock itself out of the text until the queue's visibility timeout (the
# template's 720 s, which the local queue keeps): persistence/idempotency.py recognises the retry
# as its own.

# The first request carrying each marker: the in-progress record's PutItem of each function (its
# idempotency key names the function it guards, Powertools' module.qualname#hash), and the
# transaction that makes the key a new number's texts are sealed with.
LOST_WRITES = {"webhook": b"accept_once#", "worker": b"answer_once#", "text key": b'"key_id"'}


def _history(stack: LocalStack, phone: str) -> list[tuple[str, str]]:
    """The phone's user's messages, newest first, as the app's history shows them."""
    owner = operator_table(stack).get_item(TableName=stack.table_name, Key=phone_key(phone), ConsistentRead=True)
    user = str(owner["Item"]["user_id"]["S"])
    answer = HTTP.get(f"{stack.api_url}/history", params={"limit": 50}, headers=bearer(user))
    return [(message["role"], message["content"]) for message in answer.json()["messages"]]


@pytest.mark.parametrize("write", LOST_WRITES)
def test_a_text_whose_write_answer_is_lost_is_answered_once(
    stack: LocalStack, table_proxy: TcpProxy, write: str
) -> None:
    phone = new_phone()
    table_proxy.drop_when(LOST_WRITES[write], 1)
    started = time.monotonic()
    acknowledged = text(stack, phone, "Hi coach, I'm a beginner")
    assert acknowledged.status_code == 200, acknowledged.text
    [reply] = replies_to(stack, phone, 1, timeout_s=60)
    answered_s = time.monotonic() - started
    assert table_proxy.dropped_responses == 1, "the write's answer was lost"
    time.sleep(1)  # a second answer would come from the same worker within this
    assert [sent.body for sent in stack.twilio.sent if sent.to == phone] == [reply]
    assert _history(stack, phone) == [("assistant", reply), ("user", "Hi coach, I'm a beginner")]
    assert answered_s < 30, answered_s  # not after a visibility timeout or an in-progress hold


def test_a_check_in_whose_write_answer_is_lost_is_stored_and_sent_once(
    stack: LocalStack, table_proxy: TcpProxy
) -> None:
    """The check-in's conditional write lands and its answer is lost: botocore sends it again, the
    local server (which ignores the request token) says the keys are taken, and the store finds
    its own write there: one check-in stored, one text sent; Scheduler's second delivery of the
    firing sends nothing."""
    phone = new_phone()
    text(stack, phone, "Hi coach")
    replies_to(stack, phone, 1)
    owner = Repositories.over(operator_table(stack), stack.table_name, Settings.from_env()).phones.find_owner(phone)
    assert owner is not None
    at_the_scheduling_step(stack, owner.user_id, check_ins="weekly by SMS, Monday mornings")
    # Due now: the user's time zone is one where it is midday now, so the firing is out of the quiet hours.
    firing = {"user_id": owner.user_id, "fire_time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:00Z")}
    table_proxy.drop_when(b'"TransactItems"', 1)  # the firing's one transaction: the check-in's
    assert invoke("CheckInFunction", firing)["status"] == "sent"
    assert table_proxy.dropped_responses == 1, "the write's answer was lost"
    assert invoke("CheckInFunction", firing)["status"] == "already_sent"
    sent = [s.body for s in stack.twilio.sent if s.to == phone]
    assert len(sent) == 2, sent  # the reply to "Hi coach", and one check-in
    assert _history(stack, phone)[0] == ("assistant", sent[-1])
    assert [role for role, _ in _history(stack, phone)].count("assistant") == 2
