"""The memory console over real HTTP on the local stack: recorded turns, their plans (the very
numbers `infra.inspect_prompt` prints), their figures, texts, links, and the read-only mode."""

import asyncio
import io
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from infra.console.__main__ import LocalConsole, local_stack_with_console, openapi_document
from infra.console.app import create_console_app
from infra.console.context import ConsoleContext
from infra.inspect_prompt import inspect
from infra.local.stack import LocalStack
from onboarding.config import Settings

HTTP = httpx.Client(timeout=60)
DOCUMENT = Path(__file__).parents[2] / "docs" / "console-openapi.json"
BUDGET_LINE = re.compile(r"Budget: (\d+) of (\d+) tokens \(system (\d+), window (\d+), current message (\d+)\)")


@pytest.fixture(scope="module")
def running() -> Iterator[tuple[LocalStack, LocalConsole]]:
    stack, console = local_stack_with_console(None, 0.0, 0)
    with stack:
        yield stack, console


@pytest.fixture
def console(running: tuple[LocalStack, LocalConsole]) -> LocalStack:
    return running[0]


def chat(stack: LocalStack, user_id: str, message: str) -> dict[str, Any]:
    """One turn through the app's SSE route, as the page sends it; returns the console's record."""
    turn_id = str(uuid.uuid4())
    headers = {"Authorization": f"Bearer {user_id}", "Accept": "text/event-stream", "X-Console-Turn": turn_id}
    with HTTP.stream("POST", f"{stack.api_url}/chat", json={"message": message}, headers=headers) as response:
        assert response.status_code == 200
        response.read()
    record: dict[str, Any] = HTTP.get(f"{stack.api_url}/console/api/turns/{turn_id}").json()
    assert record["finished"] is True
    return record


def inspected(user_id: str, message: str) -> tuple[int, ...]:
    """The budget line `infra.inspect_prompt` prints for `message` now."""
    out = io.StringIO()
    asyncio.run(inspect(Settings.from_env(), user_id, message, personal_data=True, out=out))
    match = BUDGET_LINE.search(out.getvalue())
    assert match is not None
    return tuple(int(group) for group in match.groups())


def _counts(plan: dict[str, int]) -> tuple[int, ...]:
    keys = ("totalTokens", "budget", "systemTokens", "windowTokens", "currentTokens")
    return tuple(plan[key] for key in keys)


def test_a_turns_token_counts_are_the_ones_inspect_prompt_prints(console: LocalStack) -> None:
    user = f"it-{uuid.uuid4()}"
    for message in ["Hi! My name is Alexandra", "I am a total beginner", "I walk my dog daily"]:
        chat(console, user, message)
    # The plan recalls from the index, which the stream fills within moments of a turn: both plans
    # compared here must see the same index.
    console.drain_index()
    expected = inspected(user, "Any knee trouble? None")
    record = chat(console, user, "Any knee trouble? None")
    plan = record["plan"]
    assert isinstance(plan, dict)
    assert _counts(plan) == expected
    # ... and the model got exactly that system prompt, captured on the wire.
    assert record["planMatchesRequest"] is True
    requests = record["modelRequests"]
    assert isinstance(requests, list)
    assert requests[0]["system"] == plan["system"]
    assert requests[0]["messages"][-1]["content"][0]["text"] == "Any knee trouble? None"
    console.drain_index()
    preview = HTTP.get(f"{console.api_url}/console/api/users/{user}/prompt", params={"message": "Next one"}).json()
    assert _counts(preview) == inspected(user, "Next one")


def test_a_turn_counts_its_table_requests_capacity_and_tokens(console: LocalStack) -> None:
    user = f"it-{uuid.uuid4()}"
    chat(console, user, "Hi")
    figures = chat(console, user, "I am a beginner")["figures"]
    assert isinstance(figures, dict)
    dynamodb, tokens = figures["dynamodb"], figures["tokens"]
    # One Query loads the turn; one transaction stores the message, one the reply (README).
    assert dynamodb["byOperation"] == {"Query": 1, "TransactWriteItems": 2}
    assert dynamodb["requests"] == 3
    assert dynamodb["capacityUnits"] > 0  # the Query's, as the table reports it
    assert tokens["input"] > 0
    assert tokens["output"] > 0
    assert tokens["modelCalls"] >= 1
    assert figures["firstTokenMs"] is not None
    assert figures["turnMs"] >= figures["firstTokenMs"]
    # The model's tokens at infra.cost's list prices; the note says what the figure counts.
    assert 0 < figures["costUsd"] < 0.01
    assert "list prices" in figures["costNote"]
    assert "issue" not in figures["costNote"]


def test_what_a_turn_changed_is_named(console: LocalStack) -> None:
    user = f"it-{uuid.uuid4()}"
    chat(console, user, "Hi")
    record = chat(console, user, "Advanced")
    assert "answers.fitness_assessment.fitness_level" in record["changed"]
    after = record["memoryAfter"]
    assert isinstance(after, dict)
    level = next(a for a in after["answers"] if a["field"] == "fitness_level")
    assert level["provenance"]["userSaid"] == "Advanced"


def test_a_text_and_a_phone_link_go_through_the_sms_path(console: LocalStack) -> None:
    user, phone = f"it-{uuid.uuid4()}", f"+1555{uuid.uuid4().int % 10**7:07d}"
    text = HTTP.post(f"{console.api_url}/console/api/sms", json={"from": phone, "text": "Hello coach", "userId": user})
    assert text.status_code == 200
    turn = text.json()["turn"]
    assert turn["status"] == "done"
    assert turn["reply"]
    assert turn["channel"] == "sms"
    assert turn["userId"].startswith("sms-")  # an unknown number is a new user
    assert turn["figures"]["dynamodb"]["requests"] > 0
    assert turn["figures"]["tokens"]["output"] > 0
    code = HTTP.post(f"{console.api_url}/phone-links", headers={"Authorization": f"Bearer {user}"}).json()["code"]
    link = {"from": phone, "text": f"LINK {code}", "userId": user}
    asked = HTTP.post(f"{console.api_url}/console/api/sms", json=link).json()
    assert asked["immediateReply"].startswith("Reply YES")  # nothing is linked before the phone agrees
    linked = HTTP.post(f"{console.api_url}/console/api/sms", json=link | {"text": "YES"})
    body = linked.json()
    assert body["immediateReply"].startswith("Linked!")
    assert body["turn"]["status"] == "no_turn"
    assert body["turn"]["userId"] == user
    assert "phones" in body["turn"]["changed"]
    assert HTTP.get(f"{console.api_url}/console/api/users/{user}/memory").json()["phones"] == [phone]


def test_bad_input_gets_a_clear_error(console: LocalStack) -> None:
    refused = HTTP.post(f"{console.api_url}/console/api/sms", json={"from": "0123", "text": "hi"})
    assert refused.status_code == 422
    assert HTTP.get(f"{console.api_url}/console/api/turns/no-such-turn").status_code == 404
    # Each emoji counts as three tokens: alone over the prompt's budget.
    too_long = HTTP.get(f"{console.api_url}/console/api/users/u/prompt", params={"message": "\U0001f600" * 4000})
    assert too_long.status_code == 422


def test_against_a_real_table_it_only_reads_and_redacts_texts(console: LocalStack) -> None:
    """`--aws` mode, pointed at the local stack's table through the standard endpoint variable."""
    user = f"it-{uuid.uuid4()}"
    chat(console, user, "Hi! My name is Alexandra")
    chat(console, user, "I am a total beginner")
    for personal, shown in ((False, False), (True, True)):
        client = TestClient(create_console_app(ConsoleContext(Settings.from_env(), personal_data=personal)))
        memory = client.get(f"/console/api/users/{user}/memory").text
        prompt = client.get(f"/console/api/users/{user}/prompt", params={"message": "my secret plan"}).text
        for text in ("Alexandra", "total beginner", "my secret plan"):
            assert (text in memory + prompt) is shown
        assert client.get("/console/api/session").json()["readOnly"] is True
        assert client.post("/console/api/sms", json={"from": "+15551230001", "text": "hi"}).status_code == 409
        assert client.get("/console/api/users").json() == {"users": []}


def test_the_page_and_its_assets_are_served_locally(console: LocalStack) -> None:
    page = HTTP.get(f"{console.api_url}/console/")
    assert page.status_code == 200
    assert "http" not in re.sub(r'(href|src)="/console/[^"]*"', "", page.text).lower()  # nothing from a CDN
    for asset in ("console.js", "console.css"):
        assert HTTP.get(f"{console.api_url}/console/static/{asset}").status_code == 200


def test_the_committed_openapi_document_is_current() -> None:
    assert json.loads(DOCUMENT.read_text(encoding="utf-8")) == openapi_document(), (
        "regenerate: uv run python -m infra.console --openapi > docs/console-openapi.json"
    )


def test_a_console_that_cannot_plan_never_stands_in_the_way_of_the_turn(
    running: tuple[LocalStack, LocalConsole], monkeypatch: pytest.MonkeyPatch
) -> None:
    stack, console = running
    assert console.context is not None

    async def unreadable(*_: object) -> None:
        raise RuntimeError("the console's own read failed")

    monkeypatch.setattr(console.context, "plan", unreadable)
    record = chat(stack, f"it-{uuid.uuid4()}", "Hi")
    assert record["status"] == "done"
    assert record["reply"]
    assert record["plan"] is None
    assert "could not plan this turn (RuntimeError)" in record["note"]
