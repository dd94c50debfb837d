"""Recall of older messages, through the product's own composition root: the indexer (as the stream
hands it changes), a turn's one embedding and one query (the emulator's Titan and the S3 Vectors
stand-in), the "From earlier conversations" section within its own allowance, and every way recall
can fail leaving the turn to go on without it.

Every recall setting has an effect someone can see (test_every_setting.py holds the list; this
module registers its part of it). RECALL_MAX_TOKENS is observed there, in the largest message.
"""

import json
import time
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from langchain_core.language_models import BaseChatModel

from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.s3vectors import S3VectorsStandIn
from onboarding.audit import Caller
from onboarding.composition import build_account, build_indexer, build_recaller, build_turn_service, build_vector_index
from onboarding.config import Settings
from onboarding.flags import MemoryFlags
from onboarding.llm.sections import recall_lines
from onboarding.llm.wording import RECALL_HEADER
from onboarding.memory.tokens import count_tokens
from onboarding.model.history import ConversationSummary, TurnContext
from onboarding.model.messages import Message, Role
from onboarding.persistence import Repositories
from onboarding.persistence.changes import MessageChange, message_change
from onboarding.recall.embeddings import build_embeddings
from onboarding.recall.recaller import Recaller, newest_first
from onboarding.recall.vectors import VectorIndex, metadata, recalled_messages, said_text, vector_key
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator
from onboarding.turn.service import TurnService
from tests.support.setting_effects import observes
from tests.unit.conftest import TABLE

pytestmark = pytest.mark.unit


DAY = 24 * 3600


EARLIER = [
    ("user", "By the way, my dog is called Biscuit and he loves the river"),
    ("assistant", "Biscuit sounds like great company on walks!"),
    ("user", "I hurt my left knee skiing in March"),
    ("assistant", "Sorry to hear that; we'll keep the knee in mind."),
]


def stored_earlier(dynamodb: Any, settings: Settings, user: str, days_ago: float = 3) -> list[Message]:
    """The EARLIER exchange, said `days_ago`, and a summary that covers it (so nothing of it is in
    the next prompt unless recall brings it)."""
    then = time.time() - days_ago * DAY
    old = Repositories.over(dynamodb, TABLE, settings, clock=lambda: then)
    messages = [old.writes.append_message(user, role, text) for role, text in EARLIER]  # type: ignore[arg-type]
    old.writes.save_summary(user, ConversationSummary("- Client said: hello", messages[-1].message_id))
    return messages


def index_stored(settings: Settings, store: Repositories, user: str) -> None:
    """What the stream would hand the indexer: every stored message, added."""
    indexer = build_indexer(settings)
    for message in store.conversations.load_turn(user, 50).messages:
        indexer.apply(MessageChange(user, message.message_id, message))


def logged(caplog: pytest.LogCaptureFixture, message: str) -> list[dict[str, Any]]:
    """The fields of each log line with this message (what its JSON line carries)."""
    return [vars(r) for r in caplog.records if r.getMessage() == message]


def system_of(emulator: BedrockEmulator, since: int) -> str:
    return emulator.requests[since].system_text


async def turn(service: TurnService, user: str, text: str) -> str:
    return (await (await service.start_turn(user, text)).collect()).reply


@pytest.fixture
def recalling(recall_settings: Settings, store: Repositories, llm: BaseChatModel) -> TurnService:
    return build_turn_service(recall_settings, store, llm)


def test_a_message_is_stored_with_what_it_answers_and_recalled_with_it() -> None:
    said = Message(
        "assistant", "Twice a week,  at 7 am", "0001795000000000-0a1b2c3d4e5f", datetime(2026, 5, 1, tzinfo=UTC)
    )
    asked = Message("user", "How often do I train?", "0001794999999000-0a1b2c3d4e5f", datetime(2026, 5, 1, tzinfo=UTC))
    assert said_text(said, asked, 1000) == "How often do I train? Twice a week, at 7 am"
    assert said_text(said, asked, 22) == "Twice a week, at 7 am"  # its own text first
    key = vector_key("sms-1#x", said.message_id)
    stored = metadata("sms-1#x", said, asked, 1000)
    assert stored["said"] == "How often do I train? Twice a week, at 7 am"  # what BM25 searches
    assert recalled_messages(key, stored) == (said, asked)  # the user id may hold '#'
    assert recalled_messages(key, metadata("sms-1#x", said, None, 1000)) == (said,)
    assert recalled_messages(key, {"text": "x", "role": "tool", "at": ""}) == ()


def test_the_section_holds_what_fits_its_allowance_in_the_order_it_was_said_under_each_day() -> None:
    def message(n: int, text: str, day: int) -> Message:
        return Message("user", text, f"{n:013d}-000000000000", datetime(2026, 1, day, tzinfo=UTC))

    ranked = [message(3, "third " * 10, 3), message(1, "first", 1), message(2, "second " * 400, 1)]
    ranked.append(message(4, "fourth", 3))
    lines = recall_lines(ranked, 200)
    assert lines == ["2026-01-01:", "- Client: first", "2026-01-03:", "- Client: " + " ".join(["third"] * 10),
                     "- Client: fourth"]  # fmt: skip
    assert recall_lines(ranked, 10) == []  # not even the header fits
    assert recall_lines([ranked[1], ranked[1]], 200) == ["2026-01-01:", "- Client: first"]  # a hit and a neighbour


def test_a_line_said_again_and_again_is_shown_once_and_leaves_room_for_one_said_once() -> None:
    def message(n: int, text: str, role: Role = "user") -> Message:
        return Message(role, text, f"{n:013d}-000000000000", datetime(2026, 1, n, tzinfo=UTC))

    small_talk = "Sorry, the dog needed me. Where were we?"
    ranked = [message(n, small_talk if n % 2 else small_talk.upper()) for n in range(1, 9)]
    ranked += [message(9, small_talk, role="assistant"), message(10, "By the way, my dog is called Rocket.")]
    expected = [  # the most relevant copy (its day), the coach's words apart, then the aside
        "2026-01-01:",
        "- Client: Sorry, the dog needed me. Where were we?",
        "2026-01-09:",
        "- Coach: Sorry, the dog needed me. Where were we?",
        "2026-01-10:",
        "- Client: By the way, my dog is called Rocket.",
    ]
    allowance = count_tokens(RECALL_HEADER) + 1 + sum(count_tokens(line) + 1 for line in expected)
    assert recall_lines(ranked, allowance) == expected


async def test_a_turn_recalls_what_was_said_days_ago_into_its_own_section(
    dynamodb: Any, recall_settings: Settings, store: Repositories, recalling: TurnService,
    emulator: BedrockEmulator, vector_index: S3VectorsStandIn, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    stored_earlier(dynamodb, recall_settings, "u")
    index_stored(recall_settings, store, "u")
    before = len(emulator.requests)
    await turn(recalling, "u", "What is my dog called again?")
    system = system_of(emulator, before)
    section = system[system.index(RECALL_HEADER) :].split("\n\n")[0]
    assert "- Client: By the way, my dog is called Biscuit" in section
    assert section.index("Biscuit and he loves") < section.index("knee") if "knee" in section else True
    assert vector_index.queries == 1
    responded = logged(caplog, "turn_responded")[-1]
    assert responded["recalled"] >= 1
    assert responded["recall_failed"] is False
    assert 0 <= responded["recall_wait_ms"] <= responded["recall_ms"] + 5
    audit = [a for a in logged(caplog, "Context access") if "what_recalled" in a]
    assert [(a["who"], a["whose"], a["what_recalled"]) for a in audit] == [
        ("function:local", "u", responded["recalled"])
    ]


async def test_what_the_window_shows_already_is_not_recalled_again(
    recall_settings: Settings, store: Repositories, recalling: TurnService, emulator: BedrockEmulator
) -> None:
    await turn(recalling, "u", "My dog is called Biscuit")
    index_stored(recall_settings, store, "u")
    before = len(emulator.requests)
    await turn(recalling, "u", "What is my dog called?")
    assert RECALL_HEADER not in system_of(emulator, before)  # Biscuit is in the window


async def test_the_section_has_its_own_allowance_inside_the_budget(
    dynamodb: Any, recall_settings: Settings, store: Repositories, llm: BaseChatModel, emulator: BedrockEmulator
) -> None:
    stored_earlier(dynamodb, recall_settings, "u")
    index_stored(recall_settings, store, "u")
    asked, caller = "my dog and my knee", Caller.command("test")
    without = build_turn_service(recall_settings, store, llm)
    without._flags = lambda user: MemoryFlags(recall=False)
    bare = (await without.preview("u", asked, caller)).prepared.agent.prompt_plan(asked)
    assert "Client said: hello" in bare.system
    # The system prompt's allowance just holds it, summary included; the section comes on top.
    tight = recall_settings.model_copy(
        update={"recall_max_tokens": 80, "system_prompt_allowance": bare.system_tokens, "token_budget": 12_000}
    )
    agent = (await build_turn_service(tight, store, llm).preview("u", asked, caller)).prepared.agent
    plan = agent.prompt_plan(asked)
    assert len([line for line in agent.recall_lines if line.startswith("- ")]) == 1  # one fits 80 tokens
    assert RECALL_HEADER in plan.system
    assert "Client said: hello" in plan.system  # the summary is not cut to make room for it
    assert plan.total_tokens <= plan.budget


async def test_the_orchestrator_leaves_out_the_window_the_carried_lines_and_the_message(
    orchestrator: OnboardingAgentOrchestrator,
) -> None:
    def said(n: int, text: str, role: str = "user") -> Message:
        return Message(role, text, f"{1795000000000 + n:013d}-00000000000{n}", datetime.now(UTC))  # type: ignore[arg-type]

    window, current, older = said(1, "in the window"), said(2, "the message"), said(3, "long ago")
    prepared = orchestrator.prepare("u", TurnContext(messages=(window,)), current, recalled=(window, current, older))
    assert [m.content for m in prepared.agent.context.recalled] == ["long ago"]


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("index", "RecallUnavailableError:ServiceUnavailableException"),
        ("embedding", "ServiceUnavailableException"),
        ("slow index", "TimeoutError"),
        ("slow embedding and index", "TimeoutError"),  # each within its client's timeout, not together
    ],
)
async def test_a_failed_recall_leaves_the_turn_to_go_on_without_it(
    dynamodb: Any, recall_settings: Settings, store: Repositories, llm: BaseChatModel, emulator: BedrockEmulator,
    vector_index: S3VectorsStandIn, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str],
    fault: str, reason: str,
) -> None:  # fmt: skip
    # A slow fault is cut at 0.3 s; a failing call gets time to fail, or a busy machine makes it a timeout.
    timeout_s = 0.3 if fault.startswith("slow") else 10.0
    settings = recall_settings.model_copy(update={"recall_timeout_s": timeout_s})
    stored_earlier(dynamodb, recall_settings, "u")  # stored and indexed before the fault, at the usual timeouts
    index_stored(recall_settings, store, "u")
    if fault == "index":
        vector_index.fail_next(1)
    elif fault == "embedding":
        emulator.fail_embeddings(1)
    elif fault == "slow index":
        vector_index.delay_s = 1.0
    else:
        emulator.embedding_delay_s, vector_index.delay_s = 0.2, 0.2
    capsys.readouterr()
    before = len(emulator.requests)
    started = time.monotonic()
    reply = await turn(build_turn_service(settings, store, llm), "u", "What is my dog called?")
    assert reply
    assert RECALL_HEADER not in system_of(emulator, before)
    (warned,) = logged(caplog, "Recall failed; the turn goes on without it")
    assert str(warned["reason"]).endswith(reason.rpartition(":")[2])
    responded = logged(caplog, "turn_responded")[-1]
    assert (responded["recall_failed"], responded["outcome"]) == (True, "completed")
    assert '"RecallFailed"' in capsys.readouterr().out
    if fault.startswith("slow"):
        assert responded["recall_ms"] < 380  # cut at RECALL_TIMEOUT_S (0.3 s)
        assert time.monotonic() - started < 1.0 + 2.0


async def test_without_the_recall_flag_no_embedding_and_no_query(
    dynamodb: Any, recall_settings: Settings, store: Repositories, llm: BaseChatModel,
    emulator: BedrockEmulator, vector_index: S3VectorsStandIn,
) -> None:  # fmt: skip
    stored_earlier(dynamodb, recall_settings, "u")
    index_stored(recall_settings, store, "u")
    embedded = emulator.embeddings
    service = build_turn_service(recall_settings, store, llm)
    service._flags = lambda user: MemoryFlags(recall=False)  # the flag, as rollout.Rollout gives it
    await turn(service, "u", "What is my dog called?")
    assert (emulator.embeddings, vector_index.queries) == (embedded, 0)


async def test_a_turn_that_could_not_read_its_memory_shows_no_recalled_messages(
    dynamodb: Any, recall_settings: Settings, store: Repositories, recalling: TurnService, emulator: BedrockEmulator
) -> None:
    stored_earlier(dynamodb, recall_settings, "u")
    index_stored(recall_settings, store, "u")
    before = len(emulator.requests)
    dynamodb.meta.events.register("before-call.dynamodb.Query", _refuse)
    try:
        await turn(recalling, "u", "What is my dog called?")
    finally:
        dynamodb.meta.events.unregister("before-call.dynamodb.Query", _refuse)
    assert RECALL_HEADER not in system_of(emulator, before)


def _refuse(**_: Any) -> None:
    from botocore.exceptions import EndpointConnectionError

    raise EndpointConnectionError(endpoint_url="http://table")


def test_the_indexer_indexes_what_was_said_and_forgets_what_was_removed(
    recall_settings: Settings, store: Repositories, vector_index: S3VectorsStandIn
) -> None:
    question = store.writes.append_message("u", "user", "How often should I train?")
    answer = store.writes.append_message("u", "assistant", "Three times a week.")
    tool = store.writes.append_message("u", "tool", '{"saved": true}')
    indexer = build_indexer(recall_settings)
    assert [indexer.apply(MessageChange("u", m.message_id, m)) for m in (question, answer, tool)] == [
        "indexed", "indexed", "skipped",
    ]  # fmt: skip
    vectors = vector_index.buckets["recall-test"]["messages"].vectors
    assert set(vectors) == {vector_key("u", question.message_id), vector_key("u", answer.message_id)}
    assert vectors[vector_key("u", answer.message_id)][1]["text"] == "Three times a week."
    assert indexer.apply(MessageChange("u", answer.message_id)) == "removed"
    assert set(vectors) == {vector_key("u", question.message_id)}


def test_a_stream_record_is_a_message_change_or_nothing() -> None:
    keys = {"pk": {"S": "USER#u"}, "sk": {"S": "MSG#1795000000000#0a1b2c3d4e5f"}}
    image = {**keys, "role": {"S": "user"}, "content": {"S": "hi"}, "created_at": {"S": "2026-11-26T00:00:00+00:00"}}
    added = message_change({"eventName": "INSERT", "dynamodb": {"Keys": keys, "NewImage": image}}, time.time())
    assert added is not None and added.message is not None and added.message.content == "hi"  # noqa: PT018
    removed = message_change({"eventName": "REMOVE", "dynamodb": {"Keys": keys}}, time.time())
    assert removed == MessageChange("u", "1795000000000-0a1b2c3d4e5f")
    assert message_change({"eventName": "INSERT", "dynamodb": {"Keys": {**keys, "sk": {"S": "~STATE"}}}}, 0) is None
    assert message_change({"eventName": "REMOVE", "dynamodb": {"Keys": {**keys, "sk": {"S": "MSG#bad"}}}}, 0) is None


def test_the_indexer_function_reports_only_the_records_that_failed(
    recall_settings: Settings, store: Repositories, emulator: BedrockEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The module builds its indexer from the environment when imported, as in Lambda.
    monkeypatch.setenv("RECALL_INDEX_ARN", str(recall_settings.recall_index_arn))
    monkeypatch.setenv("EMBEDDING_DIMENSIONS", str(recall_settings.embedding_dimensions))
    from functions.recall_indexer.app import make_handler

    first = store.writes.append_message("u", "user", "first")
    second = store.writes.append_message("u", "user", "second")

    def record(message: Message, number: str) -> dict[str, Any]:
        keys = {"pk": {"S": "USER#u"}, "sk": {"S": "MSG#" + message.message_id.replace("-", "#")}}
        image = {**keys, "role": {"S": "user"}, "content": {"S": message.content},
                 "created_at": {"S": message.created_at.isoformat() if message.created_at else ""}}  # fmt: skip
        return {"eventName": "INSERT", "eventSource": "aws:dynamodb",
                "dynamodb": {"Keys": keys, "NewImage": image, "SequenceNumber": number}}  # fmt: skip

    emulator.fail_embeddings(3)  # the first record's embedding fails, all of its 3 tries
    handler = make_handler(build_indexer(recall_settings))
    answer = handler({"Records": [record(first, "1"), record(second, "2")]}, _Context())
    assert answer == {"batchItemFailures": [{"itemIdentifier": "1"}]}


class _Context:
    function_name, memory_limit_in_mb, aws_request_id = "RecallIndexerFunction", 512, "r"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:RecallIndexerFunction"


async def test_an_erase_takes_the_user_s_vectors_too(
    dynamodb: Any, recall_settings: Settings, store: Repositories, vector_index: S3VectorsStandIn,
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    stored_earlier(dynamodb, recall_settings, "u")
    stored_earlier(dynamodb, recall_settings, "other")
    index_stored(recall_settings, store, "u")
    index_stored(recall_settings, store, "other")
    vectors = vector_index.buckets["recall-test"]["messages"].vectors
    report = build_account(recall_settings, store).erase("u")
    assert report.messages == 4
    assert {key.rpartition("#")[0] for key in vectors} == {"other"}
    erased = [line for line in logged(caplog, "Context access") if line.get("access") == "erase"]
    assert [line["what_vectors"] for line in erased] == [4]
    vector_index.fail_next(3)  # no answer in all 3 tries: the erase stands, the stream deletes them later
    capsys.readouterr()
    assert build_account(recall_settings, store).erase("other").messages == 4
    assert '"RecallForgetFailed"' in capsys.readouterr().out


def test_no_index_configured_means_no_recall_and_nothing_to_forget(settings: Settings) -> None:
    assert build_vector_index(settings) is None
    with pytest.raises(ValueError, match="RECALL_INDEX_ARN"):
        build_indexer(settings)


def test_the_recall_lines_are_json_free_of_tool_calls() -> None:
    # The line format the prompt and the benchmark read: a day, who, the words on one line.
    line = recall_lines([Message("assistant", "Keep\nit  light", "1", datetime(2026, 2, 3, tzinfo=UTC))], 100)
    assert json.dumps(line) == json.dumps(["2026-02-03:", "- Coach: Keep it light"])


def test_the_recall_flag_rolls_out_like_the_others(tmp_path: Any) -> None:
    """`recall` in the flags document (AppConfig, or the local file) switches it per user; its arm says so."""
    from onboarding.composition import build_rollout
    from tests.support.views import default_flags_document

    path = tmp_path / "flags.json"
    document = default_flags_document() | {"recall": {"default": False}}
    path.write_text(json.dumps(document), encoding="utf-8")
    flags = build_rollout(Settings(table_name=TABLE, feature_flags_file=str(path))).for_user("u")
    assert (flags.recall, flags.arm) == (False, "no_recall")
    assert default_flags_document()["recall"] == {"default": True}


pytestmark = pytest.mark.unit


async def recall_of(settings: Settings, text: str = "What is my dog called?") -> Any:
    recaller = build_recaller(settings)
    assert recaller is not None
    return await recaller.recall("u", text, wait_s=10)


@observes("recall_top_k")
async def test_the_index_is_asked_for_recall_top_k_matches(
    dynamodb: Any, recall_settings: Settings, store: Repositories, vector_index: S3VectorsStandIn
) -> None:
    stored_earlier(dynamodb, recall_settings, "u")
    index_stored(recall_settings, store, "u")
    for top_k in (2, 40):
        found = await recall_of(recall_settings.model_copy(update={"recall_top_k": top_k}))
        assert vector_index.last_query["topK"] == top_k
        # Each hit is followed by the message it answers (the first message answers none): 4 hits, 7 messages.
        assert len(found.messages) <= 4 if top_k == 2 else len(found.messages) == 7


@observes("recall_timeout_s")
async def test_recall_waits_at_most_recall_timeout_s(recall_settings: Settings, vector_index: S3VectorsStandIn) -> None:
    vector_index.delay_s = 0.4
    assert not (await recall_of(recall_settings.model_copy(update={"recall_timeout_s": 2.0}))).failed
    started = time.monotonic()
    assert (await recall_of(recall_settings.model_copy(update={"recall_timeout_s": 0.1}))).failed
    assert time.monotonic() - started < 0.35


@observes("embedding_dimensions")
def test_embeddings_have_embedding_dimensions_values(recall_settings: Settings) -> None:
    for size in (256, 512):
        assert (
            len(build_embeddings(recall_settings.model_copy(update={"embedding_dimensions": size})).embed_query("hi"))
            == size
        )


@observes("embedding_max_chars")
def test_what_is_embedded_and_kept_is_cut_at_embedding_max_chars(
    recall_settings: Settings, store: Repositories, vector_index: S3VectorsStandIn
) -> None:
    message = store.writes.append_message("u", "user", "word " * 100)
    for cap in (120, 8000):
        build_indexer(recall_settings.model_copy(update={"embedding_max_chars": cap})).apply(
            MessageChange("u", message.message_id, message)
        )
        kept = vector_index.buckets["recall-test"]["messages"].vectors[vector_key("u", message.message_id)][1]
        assert len(kept["text"]) == min(cap, 500)


@observes("recall_index_arn")
async def test_without_a_recall_index_a_turn_recalls_nothing(
    settings: Settings, recall_settings: Settings, store: Repositories, llm: BaseChatModel,
    vector_index: S3VectorsStandIn, emulator: BedrockEmulator,
) -> None:  # fmt: skip
    await turn(build_turn_service(settings, store, llm), "u", "Hi")
    assert vector_index.queries == 0
    await turn(build_turn_service(recall_settings, store, llm), "u", "Hi again")
    assert vector_index.queries == 1


@observes("embedding_model_id")
async def test_recall_embeds_with_embedding_model_id(recall_settings: Settings, emulator: BedrockEmulator) -> None:
    assert not (await recall_of(recall_settings)).failed
    # The emulator serves Titan Text Embeddings V2 only: another model id reaches it, and is refused.
    assert (
        await recall_of(recall_settings.model_copy(update={"embedding_model_id": "cohere.embed-english-v3"}))
    ).failed


@observes("recall_mode")
async def test_recall_mode_chooses_what_the_index_ranks_by(
    dynamodb: Any, recall_settings: Settings, store: Repositories, vector_index: S3VectorsStandIn,
    emulator: BedrockEmulator,
) -> None:  # fmt: skip
    stored_earlier(dynamodb, recall_settings, "u")
    index_stored(recall_settings, store, "u")
    asked = {}
    for mode in ("hybrid", "lexical", "dense"):
        embedded = emulator.embeddings
        found = await recall_of(recall_settings.model_copy(update={"recall_mode": mode}), "Is my knee still hurting?")
        query = vector_index.last_query
        asked[mode] = ("queryVector" in query, [t["metadataKey"] for t in query.get("queryTexts", [])])
        assert emulator.embeddings - embedded == (0 if mode == "lexical" else 1)  # lexical makes no embedding
        assert "I hurt my left knee skiing in March" in [m.content for m in found.messages]
    assert asked == {"hybrid": (True, ["said"]), "lexical": (False, ["said"]), "dense": (True, [])}


async def test_an_erase_takes_the_words_with_the_vectors(
    dynamodb: Any, recall_settings: Settings, store: Repositories, vector_index: S3VectorsStandIn
) -> None:
    """The index searches the words beside the vectors: after an erase neither finds the user's messages."""
    lexical = recall_settings.model_copy(update={"recall_mode": "lexical"})
    for user in ("u", "other"):
        stored_earlier(dynamodb, recall_settings, user)
        index_stored(recall_settings, store, user)
    assert (await recall_of(lexical, "Biscuit the dog")).messages
    build_account(recall_settings, store).erase("u")
    for settings in (lexical, recall_settings):
        assert (await recall_of(settings, "Biscuit the dog")).messages == ()
    other = await build_recaller(lexical).recall("other", "Biscuit the dog", wait_s=10)  # type: ignore[union-attr]
    assert "Biscuit" in other.messages[0].content


def _said(n: int, text: str, role: Role = "user") -> Message:
    return Message(role, text, f"{n:013d}-000000000000", datetime(2026, 1, n, tzinfo=UTC))


ASKED = _said(1, "How much do you weigh?", "assistant")
FIRST, CORRECTED = _said(2, "Actually my weight is 74 kg now"), _said(5, "Update: my weight is 72 kg these days")
WATER = [_said(n, "How much water should I drink a day?") for n in (3, 4, 6)]
REPLIES = [_said(n + 10, f"Good question number {n}", "assistant") for n in (3, 4, 6)]


def test_of_two_hits_with_much_the_same_words_the_newer_comes_first() -> None:
    ranked = [(FIRST, ASKED), (WATER[0], REPLIES[0]), (CORRECTED,)]
    assert newest_first(ranked, 0.35) == (CORRECTED, FIRST, ASKED, WATER[0], REPLIES[0])
    assert newest_first(ranked, 0.5) == (FIRST, ASKED, WATER[0], REPLIES[0], CORRECTED)  # not alike enough
    coach = _said(7, "Actually my weight is 74 kg now", "assistant")  # another speaker's words stay where ranked
    assert newest_first([(FIRST,), (coach,)], 0.35) == (FIRST, coach)


def test_a_hit_said_again_in_the_same_words_is_kept_once_its_newest_at_the_best_rank() -> None:
    ranked = [(WATER[1], REPLIES[1]), (FIRST,), (WATER[2], REPLIES[2]), (WATER[0], REPLIES[0])]
    # The copies' neighbours would otherwise take the room of lines said once.
    assert newest_first(ranked, 1.0) == (WATER[2], REPLIES[2], FIRST)


RECAPS = [
    _said(n, f"Welcome back! Here's what I have: fitness level: intermediate; days per week: {days}; "
          f"limitations: {knee}; allergies: peanuts; training time: lunchtime; equipment: resistance bands "
          "at home; meals per day: three meals", "assistant")
    for n, days, knee in ((20, "2 days", "my knee clicks"), (21, "4 days", "my knee clicks"), (22, "4 days", "none"))
]  # fmt: skip


def test_a_hit_said_again_in_nearly_the_same_words_is_kept_once_at_the_repeat_share() -> None:
    """The coach's recap at each return differs by the answers changed since: at the repeat share it
    is one line (its newest), not three that fill the section."""
    ranked = [(RECAPS[0],), (FIRST,), (RECAPS[2],), (RECAPS[1],)]
    assert newest_first(ranked, 0.35, 0.8) == (RECAPS[2], FIRST)
    assert newest_first(ranked, 0.35, 1.0) == (RECAPS[2], RECAPS[1], RECAPS[0], FIRST)  # the very same words only
    assert newest_first([(FIRST,), (CORRECTED,)], 0.35, 0.8) == (CORRECTED, FIRST)  # a correction is no repeat


@observes("recall_repeat_share")
async def test_recall_repeat_share_says_how_alike_a_repeat_must_be(recall_settings: Settings) -> None:
    found = _Found([(RECAPS[0],), (RECAPS[1],)])
    for repeat, kept in ((0.8, 1), (1.0, 2)):
        policy = recall_settings.model_copy(update={"recall_repeat_share": repeat}).recall
        recalled = await Recaller(found, cast(VectorIndex, found), policy).recall("u", "Welcome back", 10)
        assert len(recalled.messages) == kept


class _Found:
    """An index that answers with these hits, and an embedder that embeds nothing."""

    client = None

    def __init__(self, pairs: list[tuple[Message, ...]]) -> None:
        self.pairs = tuple(pairs)

    def matches(self, *_: Any) -> tuple[tuple[Message, ...], ...]:
        return self.pairs

    def embed_query(self, text: str) -> list[float]:
        return [1.0]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0] for _ in texts]


@observes("recall_near_duplicate_share")
async def test_recall_near_duplicate_share_says_how_alike_a_correction_must_be(recall_settings: Settings) -> None:
    found = _Found([(FIRST, ASKED), (CORRECTED,)])
    for share, first in ((0.35, CORRECTED), (0.9, FIRST)):
        policy = recall_settings.model_copy(update={"recall_near_duplicate_share": share}).recall
        recalled = await Recaller(found, cast(VectorIndex, found), policy).recall("u", "How much do I weigh?", 10)
        assert recalled.messages[0] == first
