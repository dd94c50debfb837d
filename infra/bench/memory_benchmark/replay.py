"""Replays one conversation into our memory on the local stack and asks its questions (LoCoMo's
protocol, faithfully; docs/memory-benchmark.md):

1. The conversation goes in as it happened. With both speakers in the data (LoCoMo), each turn is
   stored as said (the client's, speaker_a, as the user's messages, the other party's as the
   coach's), each session at its own date (a turn every 30 seconds from its start), through the
   product's own writes, and after each exchange the summary folds as a turn's would. With the
   client's lines only (ours), the client talks to the coach through the real turn path (the HTTP
   API, or the Twilio webhook once the phone is linked), sessions apart by more than the gap.
2. The recall indexer catches up with the table's stream.
3. Each question is asked of the memory as it stands after the last session, without being written
   into it: the product's own preview of a turn (the same read, recall and agent;
   `TurnService.preview`) builds the prompt. Ours, recall hybrid, is then answered by the agent, its
   tools working on the turn's copy of the memory, and scored on everything the model read; the
   lexical and dense modes and recall off are scored on their prompts. Asked as the API function,
   so the local stack checks its policy as for a turn. Recall's added latency is a question's
   preview with recall less the same preview without it. The baselines come from the transcript.
"""

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from infra.bench.memory_benchmark.dataset import Conversation, DatasetError, Question
from infra.bench.memory_benchmark.scoring import (
    BASELINES,
    CEILING,
    Baselines,
    Score,
    prompt_parts,
    recorded_parts,
    score_ours,
    score_window,
    transcript,
)
from infra.local.iam.identity import acting_as
from infra.local.stack import LocalStack
from infra.local.twilio_emulator import post_signed_text
from onboarding.audit import Caller
from onboarding.breaker import CircuitBreaker
from onboarding.composition import build_turn_service
from onboarding.config import Settings
from onboarding.flags import DEFAULT_FLAGS, MemoryFlags
from onboarding.llm.bedrock import build_chat_model
from onboarding.llm.tools import tool_definitions
from onboarding.llm.wording import SUMMARY_SYSTEM_PROMPT
from onboarding.memory.tokens import count_tokens
from onboarding.memory.window import conversation_start
from onboarding.model.messages import Role
from onboarding.persistence import Repositories
from onboarding.summary import Summarizer
from onboarding.turn.fold import fold_if_due
from onboarding.turn.run import TurnDependencies
from onboarding.turn.service import TurnService
from onboarding.turn.store import TurnStore

Judge = Callable[[Any, str], str]  # (question, the coach's answer) -> CORRECT / WRONG / unparseable
MODES = ("lexical", "dense")  # asked beside ours (hybrid), prompt only
CALLER = Caller.command("infra.memory_benchmark", "benchmark:question")
TURN_SPACING = timedelta(seconds=30)


@dataclass
class QuestionResult:
    dataset: str
    sample_id: str
    question: str
    category: str
    answerable: bool
    update: bool
    scores: dict[str, Score] = field(default_factory=dict)  # ours, lexical, dense, recall-off, baselines
    full_tokens: int = 0
    recall_ms: float | None = None  # the recall of ours' preview
    added_ms: dict[str, float] = field(default_factory=dict)  # by mode: its preview less the one without recall
    unparsed_evidence: tuple[str, ...] = ()
    answer: str = ""  # the coach's reply (judged only with --aws)
    verdict: str = ""  # --aws: the judge's CORRECT / WRONG, or "unparseable"; "" when not judged
    tool_tokens: int = 0  # ours: the tool definitions sent beside the prompt (not in its budget)


class Clock:
    """The ingestion's time, moved by hand."""

    def __init__(self) -> None:
        self.now = datetime(2000, 1, 1, tzinfo=UTC)

    def seconds(self) -> float:
        return self.now.timestamp()


class Replayer:
    """One conversation, as one user of the local stack (its app, and its phone once linked)."""

    def __init__(
        self, stack: LocalStack, conversation: Conversation, dataset: str, gap_s: float, number: int,
        model: Any = None, judge: Judge | None = None,
    ) -> None:  # fmt: skip
        self.stack, self.conversation, self.dataset, self.gap_s = stack, conversation, dataset, gap_s
        self.model = model if model is not None else stack.bedrock  # what records the model's requests
        self.judge = judge
        self.user = f"bench-{conversation.sample_id}-{uuid.uuid4().hex[:6]}"
        self.phone = f"+1555{7000000 + number:07d}"
        self.http = httpx.Client(base_url=stack.api_url, headers={"Authorization": f"Bearer {self.user}"}, timeout=60)
        self.linked = False

    def say(self, text: str, channel: str) -> None:
        """One client turn through the real turn path (the app's API, or a text once linked)."""
        if channel == "sms":
            if not self.linked:
                code = self.http.post("/phone-links").json()["code"]
                self._text(f"LINK {code}")
                self._text("YES")  # the phone agrees to the link (nothing is linked before it does)
                self.linked = True
            self._text(text)
            return
        self.http.post("/chat", json={"message": text, "clientMessageId": uuid.uuid4().hex}).raise_for_status()

    def _text(self, text: str) -> None:
        before = len(self.stack.twilio.sent)
        response = post_signed_text(f"{self.stack.api_url}/sms", self.phone, text)
        response.raise_for_status()
        if "<Message>" not in response.text:
            self.stack.twilio.wait_for(before + 1, timeout_s=60)
            time.sleep(0.3)  # a long reply arrives in several parts

    def run(self, progress: Any = None) -> list[QuestionResult]:
        self.remember(progress)
        return self.ask_all(progress)

    def remember(self, progress: Any = None) -> None:
        """Steps 1 and 2: the conversation into the memory, and the recall index caught up."""
        if self.conversation.has_other_party:
            asyncio.run(self._ingest(Settings.from_env(), progress))
        else:
            for session in self.conversation.sessions:
                time.sleep(self.gap_s)  # the sessions are days apart: each opens a new conversation
                for dialog in session.dialogs:
                    if dialog.speaker == self.conversation.client:
                        self.say(dialog.text, session.channel)
                        _advance(progress, f"{self.conversation.sample_id} session {session.number}")
            time.sleep(self.gap_s)
        self.stack.drain_index()

    async def _ingest(self, settings: Settings, progress: Any) -> None:
        clock, conversation = Clock(), self.conversation
        store = Repositories.over(self.stack.operator_client(), self.stack.table_name, settings, clock.seconds)
        summarizer = Summarizer(build_chat_model(settings), settings.summary_max_tokens)
        deps = TurnDependencies(
            TurnStore(store), settings, CircuitBreaker(settings.breaker), summarizer, lambda: clock.now
        )
        rules = DEFAULT_FLAGS.conversation_rules(settings.conversations)
        for session in conversation.sessions:
            if session.when is None:
                raise DatasetError(f"{conversation.sample_id}: session {session.number} has no date ({session.date!r})")
            for number, dialog in enumerate(session.dialogs):
                clock.now = session.when.replace(tzinfo=UTC) + number * TURN_SPACING
                role: Role = "user" if dialog.speaker == conversation.client else "assistant"
                store.writes.append_message(self.user, role, dialog.content, None, int(clock.seconds() * 1000))
                # After each exchange (the other party's answer, before the client speaks again), as a turn folds.
                following = session.dialogs[number + 1] if number + 1 < len(session.dialogs) else None
                if following is None or (following.speaker == conversation.client and role == "assistant"):
                    loaded = store.conversations.load_turn(self.user, settings.history_load_limit)
                    since = int(clock.seconds() * 1000)
                    start = conversation_start(loaded.messages, clock.now, rules)
                    await fold_if_due(deps, self.user, loaded.messages, start, loaded.summary, DEFAULT_FLAGS, since)
                _advance(progress, f"{conversation.sample_id} ingest")

    def ask_all(self, progress: Any = None) -> list[QuestionResult]:
        """Step 3: every question, asked of the memory as it stands, and scored beside the baselines."""
        settings = Settings.from_env()
        services = {mode: build_turn_service(settings.model_copy(update={"recall_mode": mode})) for mode in MODES}
        services["ours"] = build_turn_service(settings)
        baselines = Baselines(transcript(self.conversation))
        results = []
        for question in self.conversation.questions:
            results.append(asyncio.run(self._question(services, question, baselines)))
            _advance(progress, f"{self.conversation.sample_id} questions")
        return results

    async def _preview(self, service: TurnService, question: str, recall: bool = True) -> tuple[Any, float]:
        started = time.monotonic()
        with acting_as("ApiFunction"):
            preview = await service.preview(self.user, question, CALLER, MemoryFlags(recall=recall))
        return preview, (time.monotonic() - started) * 1000

    async def _question(
        self, services: dict[str, TurnService], question: Question, baselines: Baselines
    ) -> QuestionResult:
        asked, c = question.question, self.conversation
        off, off_ms = await self._preview(services["ours"], asked, recall=False)
        ours, ours_ms = await self._preview(services["ours"], asked)
        since = len(self.model.requests)
        with acting_as("ApiFunction"):
            reply = "".join([chunk async for chunk in ours.prepared.agent.stream_response(asked)])
        summary = SUMMARY_SYSTEM_PROMPT[:30]
        requests = [r for r in self.model.requests[since:] if not r.system_text.startswith(summary)]
        parts = recorded_parts(requests)
        agent = ours.prepared.agent
        plan = agent.prompt_plan(asked)
        tokens = plan.system_tokens + plan.window_tokens + plan.current_tokens
        tools = tool_definitions(agent.agent_type, agent.context.completed_at is not None)
        scores = {"ours": score_ours(question, c, parts, tokens), "recall-off": _prompt_score(question, c, off)}
        added = {"ours": ours_ms - off_ms}
        for mode in MODES:
            preview, elapsed_ms = await self._preview(services[mode], asked)
            scores[mode], added[mode] = _prompt_score(question, c, preview), elapsed_ms - off_ms
        kept = baselines.windows(asked, tokens)
        scores |= {name: score_window(question, c, kept[name], asked) for name in (*BASELINES, CEILING)}
        return QuestionResult(
            self.dataset, c.sample_id, asked, question.category_name, question.answer is not None,
            bool(question.superseded), scores, scores[CEILING].tokens, ours.recall.elapsed_ms, added,
            question.unparsed, reply, self.judge(question, reply) if self.judge is not None else "",
            count_tokens(json.dumps(list(tools))),
        )  # fmt: skip


def _prompt_score(question: Question, conversation: Conversation, preview: Any) -> Score:
    """A preview's prompt scored as ours: its system prompt and window (the question not in it)."""
    plan = preview.prepared.agent.prompt_plan(question.question)
    window = [str(getattr(turn, "content", turn)) for turn in plan.window]
    tokens = plan.system_tokens + plan.window_tokens + plan.current_tokens
    return score_ours(question, conversation, prompt_parts(plan.system, window), tokens)


def _advance(progress: Any, note: str) -> None:
    if progress is not None:
        progress.advance(note=note)
