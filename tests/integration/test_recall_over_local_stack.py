"""Recall over the local stack, as deployed: turns over HTTP, the table's stream feeding the recall
indexer (Lambda's event source mapping, locally), the S3 Vectors stand-in and the emulator's
embeddings, every request checked against template.yaml's policies. Faults go through the TCP
proxy in front of the index, never an in-process fake."""

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from infra.local.deployment import RECALL_BUCKET_NAME, RECALL_INDEX_NAME
from infra.local.stack import LocalStack, temporary_environment
from onboarding.config import Settings
from onboarding.llm.wording import RECALL_HEADER
from onboarding.persistence import Repositories
from onboarding.recall.vectors import SEARCHED_KEY
from tests.support.deployed_flows import bearer, new_phone, new_user, operator_table, replies_to, text
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration
HTTP = httpx.Client(timeout=60)
FILLER = "Message number {}: I like to walk in the park"


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(api_port=0) as running:
        yield running


def chat(stack: LocalStack, user: str, message: str) -> str:
    answered = HTTP.post(f"{stack.api_url}/chat", json={"message": message}, headers=bearer(user))
    assert answered.status_code == 200, answered.text
    return str(answered.json()["reply"])


def vectors_of(stack: LocalStack, user: str) -> list[str]:
    keys = stack.s3vectors.buckets[RECALL_BUCKET_NAME][RECALL_INDEX_NAME].vectors
    return [key for key in list(keys) if key.rpartition("#")[0] == user]


def found_by_words(stack: LocalStack, user: str, words: str) -> list[str]:
    """The user's messages the index's full-text search finds for `words` (BM25 on `said`, as a turn's
    hybrid query asks it), by their text."""
    index = stack.s3vectors.buckets[RECALL_BUCKET_NAME][RECALL_INDEX_NAME]
    found = index.query(None, [{"text": words, "metadataKey": SEARCHED_KEY}], 100, {"user": user})
    return [index.vectors[key][1]["text"] for key, _ in found]


def recall_section(stack: LocalStack, since: int) -> str:
    """The section of the first coach request after `since` (the turn's prompt), or ''."""
    system = next(r.system_text for r in stack.bedrock.requests[since:] if "You are Coach" in r.system_text)
    return system[system.index(RECALL_HEADER) :].split("\n\n")[0] if RECALL_HEADER in system else ""


def test_what_was_said_many_turns_ago_comes_back_when_it_bears_on_the_message(stack: LocalStack) -> None:
    user = new_user()
    chat(stack, user, "By the way, my dog is called Biscuit")
    for number in range(10):  # the window moves on; the fold summarises what left it
        chat(stack, user, FILLER.format(number))
    stack.drain_index()
    assert len(vectors_of(stack, user)) >= 22  # every message the client and the coach said
    since = len(stack.bedrock.requests)
    chat(stack, user, "What is my dog called?")
    assert "Client: By the way, my dog is called Biscuit" in recall_section(stack, since)
    assert stack.decisions().refusals == []


def test_an_erase_takes_the_vectors_at_once(stack: LocalStack) -> None:
    user = new_user()
    chat(stack, user, "My sister's name is Ingrid")
    stack.drain_index()
    assert vectors_of(stack, user)
    assert "My sister's name is Ingrid" in found_by_words(stack, user, "sister Ingrid")
    erased = HTTP.delete(f"{stack.api_url}/me", headers=bearer(user))
    assert erased.status_code == 200, erased.text
    assert vectors_of(stack, user) == []  # before the stream's removals reach the indexer
    assert found_by_words(stack, user, "sister Ingrid") == []  # the words went with the vectors
    stack.drain_index()
    assert vectors_of(stack, user) == []


def test_a_linked_phone_s_texts_move_into_the_app_user_s_recall(stack: LocalStack) -> None:
    user, phone = new_user(), new_phone()
    text(stack, phone, "My cat is called Pixel")
    replies_to(stack, phone, 1)
    stack.drain_index()
    found = Repositories.over(operator_table(stack), stack.table_name, Settings.from_env()).phones.find_owner(phone)
    assert found is not None
    owner = found.user_id  # the number's SMS-only user, until the link
    texted = len(vectors_of(stack, owner))
    code = HTTP.post(f"{stack.api_url}/phone-links", headers=bearer(user)).json()["code"]
    assert "Reply YES" in text(stack, phone, f"LINK {code}").text  # the phone agrees first
    assert "Linked!" in text(stack, phone, "YES").text
    stack.drain_index()
    assert vectors_of(stack, owner) == []
    assert found_by_words(stack, owner, "cat Pixel") == []
    assert len(vectors_of(stack, user)) == texted  # the text and the coach's words, now the app user's
    assert "My cat is called Pixel" in found_by_words(stack, user, "cat Pixel")  # searchable as theirs
    for number in range(8):
        chat(stack, user, FILLER.format(number))
    stack.drain_index()
    since = len(stack.bedrock.requests)
    chat(stack, user, "What is my cat called?")
    assert "My cat is called Pixel" in recall_section(stack, since)


@pytest.mark.parametrize("fault", ["stall", "refuse"])
def test_an_index_that_does_not_answer_costs_a_turn_its_recall_not_its_reply(stack: LocalStack, fault: str) -> None:
    user = new_user()
    port = int(stack.s3vectors.url.rsplit(":", 1)[1])
    with TcpProxy(port) as proxy, temporary_environment({"AWS_ENDPOINT_URL_S3VECTORS": proxy.url}):
        # The API starts cold with its index behind the proxy, as after a deploy with a new endpoint.
        if fault == "stall":
            proxy.stall_when(b"QueryVectors", 100)
        else:
            proxy.mode = "refuse"
        chat(stack, user, "Hi")
        started = time.monotonic()
        reply = chat(stack, user, "What did I just say?")
        elapsed = time.monotonic() - started
    assert reply
    assert elapsed < 1.0 + 2.0  # RECALL_TIMEOUT_S (1 s) at most, and the turn's own work
    if fault == "stall":
        assert proxy.stalled_requests >= 1


def test_the_index_is_kept_beside_the_data_file_across_restarts(tmp_path: Path) -> None:
    data, user = tmp_path / "table.jsonl", f"keep-{uuid.uuid4().hex[:8]}"
    with LocalStack(data_file=data, api_port=0) as first:
        chat(first, user, "I keep bees on the roof")
        first.drain_index()
        kept = vectors_of(first, user)
    assert kept
    with LocalStack(data_file=data, api_port=0) as second:
        assert vectors_of(second, user) == kept


LONG_SCRIPTS = {"cyrillic": "бегаю", "cjk": "跑步", "emoji": "🏃"}


@pytest.mark.parametrize("script", LONG_SCRIPTS)
def test_a_long_message_in_any_script_answering_a_long_one_is_indexed_and_found_by_its_words(
    stack: LocalStack, script: str
) -> None:
    """8,000 characters answering 8,000 of the same script: the stream's indexer writes both
    through the S3 Vectors stand-in, which refuses metadata over 40 KB as the service does, and
    Titan's stand-in, which refuses past 8,192 tokens; each is then found by a word of its own."""
    user, word = new_user(), LONG_SCRIPTS[script]
    store = Repositories.over(operator_table(stack), stack.table_name, Settings.from_env())
    markers = [f"m{uuid.uuid4().hex[:10]}" for _ in range(2)]
    asked, answer = (" ".join([marker, *[word] * 8_000])[:8_000] for marker in markers)
    store.writes.append_message(user, "assistant", asked)
    store.writes.append_message(user, "user", answer)
    stack.drain_index()
    assert len(vectors_of(stack, user)) == 2  # neither refused
    for marker in markers:
        assert [text[: len(marker)] for text in found_by_words(stack, user, marker)][:1] == [marker]
    assert stack.decisions().refusals == []
