"""The store's breaker over real sockets: the API served by the local gateway, the table behind a
TCP proxy that holds the turn's read (a Query) unanswered. After STORE_CIRCUIT_FAILURE_THRESHOLD
turns that waited out the read timeout, the next turns answer at once without their memory and
without sending the read; the messages are still stored; once the table answers again the breaker
half-opens after STORE_CIRCUIT_RESET_S and the memory is back (decision 0010)."""

import time
from collections.abc import Iterator

import httpx
import pytest

from infra.local.stack import LocalStack
from tests.integration.test_faults_over_http import HTTP_TIMEOUT, messages
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration

READ_TIMEOUT_S = 2.0
RESET_S = 3.0
NOTICE = "(I can't reach my notes"
QUERY = b"DynamoDB_20120810.Query"


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(api_port=0) as running:
        yield running


def turn(stack: LocalStack, user: str, message: str) -> tuple[str, float]:
    started = time.monotonic()
    response = httpx.post(
        f"{stack.api_url}/chat",
        json={"message": message},
        headers={"Authorization": f"Bearer {user}"},
        timeout=HTTP_TIMEOUT,
    )
    assert response.status_code == 200, response.text
    return response.json()["reply"], time.monotonic() - started


def test_after_failed_reads_turns_answer_degraded_at_once_without_reading_then_recover(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch, user_id: str
) -> None:
    settings = {
        "DYNAMODB_MAX_ATTEMPTS": "1",  # one try per read, so each failed turn is one held request
        "DYNAMODB_CONNECT_TIMEOUT_S": "1",
        "DYNAMODB_READ_TIMEOUT_S": str(READ_TIMEOUT_S),
        "STORE_CIRCUIT_FAILURE_THRESHOLD": "2",
        "STORE_CIRCUIT_RESET_S": str(RESET_S),
    }
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    with TcpProxy(stack.dynamodb.port) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", proxy.url)  # the gateway starts the API cold with it
        # Without recall's indexer, which reads the table too: this counts the turns' reads.
        monkeypatch.delenv("RECALL_INDEX_ARN", raising=False)
        reply, _ = turn(stack, user_id, "Hi, I'm a beginner")
        assert not reply.startswith(NOTICE)

        proxy.stall_when(QUERY, 1000)  # every read of the memory from now on is held unanswered
        failed = [turn(stack, user_id, f"failed read {n}") for n in (1, 2)]
        assert all(reply.startswith(NOTICE) for reply, _ in failed)
        assert all(elapsed >= READ_TIMEOUT_S for _, elapsed in failed)  # each waited out the read
        assert proxy.stalled_requests == 2

        skipped = [turn(stack, user_id, f"breaker open {n}") for n in (1, 2, 3)]
        assert all(reply.startswith(NOTICE) for reply, _ in skipped)
        assert proxy.stalled_requests == 2, "an open breaker must not send the read"
        assert all(elapsed < READ_TIMEOUT_S for _, elapsed in skipped)
        print(
            "\nstore breaker: failed reads took "
            + ", ".join(f"{elapsed:.2f}" for _, elapsed in failed)
            + " s; with the breaker open: "
            + ", ".join(f"{elapsed:.2f}" for _, elapsed in skipped)
            + " s"
        )

        proxy.stall_when(QUERY, 0)  # the table answers again
        time.sleep(RESET_S)  # half-open: the next turn tries the read, it succeeds, the breaker closes
        reply, _ = turn(stack, user_id, "are you back?")
        assert not reply.startswith(NOTICE)
        reply, _ = turn(stack, user_id, "good")
        assert not reply.startswith(NOTICE)
        assert proxy.stalled_requests == 2

    said = [m["content"]["S"] for m in messages(stack, user_id) if m["role"]["S"] == "user"]
    assert said == [
        "Hi, I'm a beginner",
        "failed read 1",
        "failed read 2",
        "breaker open 1",
        "breaker open 2",
        "breaker open 3",
        "are you back?",
        "good",
    ]
