"""Replays one conversation into our memory on the local stack and asks its questions (LoCoMo's
protocol, faithfully; docs/memory-benchmark.md):

1. The conversation goes in as it happened. With both speakers in the data (LoCoMo), each turn is
   stored as said, each session at its own date (ingest.py). With the client's lines only (ours),
   the client talks to the coach through the real turn path (the HTTP API and the Twilio webhook,
   the coach answering as the model does), sessions apart by more than the conversation gap.
2. The recall indexer catches up with the table's stream.
3. Each question is asked against the memory as it stands after the last session, without being
   written into it (asking.py), once with recall and once without; the baselines and the ceiling
   are built from the original transcript (baselines.py), and all are scored alike (scoring.py).
"""

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from infra.bench.memory_benchmark.asking import Recorded, ask
from infra.bench.memory_benchmark.baselines import BASELINES, CEILING, transcript, windows
from infra.bench.memory_benchmark.dataset import Conversation
from infra.bench.memory_benchmark.ingest import ingest
from infra.bench.memory_benchmark.scoring import Score, score_ours, score_window
from infra.local.stack import LocalStack
from infra.local.twilio_emulator import post_signed_text
from onboarding.composition import build_turn_service
from onboarding.config import Settings
from onboarding.llm.bedrock import build_chat_model
from onboarding.persistence import Repositories
from onboarding.summary import Summarizer
from onboarding.turn.service import TurnService

Judge = Callable[[Any, str], str]  # (question, the coach's answer) -> CORRECT / WRONG / unparseable


@dataclass
class QuestionResult:
    dataset: str
    sample_id: str
    question: str
    category: str
    channel: str
    answerable: bool
    update: bool
    ours: Score
    without_recall: Score
    baselines: dict[str, Score] = field(default_factory=dict)
    ceiling: Score | None = None
    full_tokens: int = 0
    recall_ms: float | None = None  # the embedding and the index query of the question's preview
    recalled: int = 0
    unparsed_evidence: tuple[str, ...] = ()
    answer: str = ""  # the coach's reply (judged only with --aws)
    verdict: str = ""  # --aws: the judge's CORRECT / WRONG, or "unparseable"; "" when not judged


class Replayer:
    """One conversation, as one user of the local stack (its app, and its phone once linked)."""

    def __init__(
        self,
        stack: LocalStack,
        conversation: Conversation,
        dataset: str,
        gap_s: float,
        number: int,
        model: Any = None,
        judge: Judge | None = None,
    ) -> None:
        self.stack, self.conversation, self.dataset, self.gap_s = stack, conversation, dataset, gap_s
        self.model = Recorded(model if model is not None else stack.bedrock)
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
        response = self.http.post("/chat", json={"message": text, "clientMessageId": uuid.uuid4().hex})
        response.raise_for_status()

    def _text(self, text: str) -> None:
        before = len(self.stack.twilio.sent)
        response = post_signed_text(f"{self.stack.api_url}/sms", self.phone, text)
        response.raise_for_status()
        if "<Message>" not in response.text:
            self.stack.twilio.wait_for(before + 1, timeout_s=60)
            time.sleep(0.3)  # a long reply arrives in several parts

    def _replay_turns(self, progress: Any) -> None:
        for session in self.conversation.sessions:
            time.sleep(self.gap_s)  # the sessions are days apart: each opens a new conversation
            for dialog in session.dialogs:
                if dialog.speaker == self.conversation.client:
                    self.say(dialog.text, session.channel)
                    if progress is not None:
                        progress.advance(note=f"{self.conversation.sample_id} session {session.number}")
        time.sleep(self.gap_s)

    def _ingest(self, settings: Settings, progress: Any) -> None:
        def store_over(clock: Callable[[], float]) -> Repositories:
            client = self.stack.operator_client()  # loading data, as a migration would
            return Repositories.over(client, self.stack.table_name, settings, clock)

        def advance() -> None:
            if progress is not None:
                progress.advance(note=f"{self.conversation.sample_id} ingest")

        summarizer = Summarizer(build_chat_model(settings), settings.summary_max_tokens)
        asyncio.run(ingest(self.conversation, self.user, settings, store_over, summarizer, advance))

    def run(self, budget: int, progress: Any = None) -> list[QuestionResult]:
        self.remember(progress)
        return self.ask_all(budget, progress)

    def remember(self, progress: Any = None) -> None:
        """Steps 1 and 2: the conversation into the memory, and the recall index caught up."""
        if self.conversation.has_other_party:
            self._ingest(Settings.from_env(), progress)
        else:
            self._replay_turns(progress)
        self.stack.drain_index()

    def ask_all(self, budget: int, progress: Any = None) -> list[QuestionResult]:
        """Step 3: every question, asked of the memory as it stands, and scored beside the baselines."""
        service = build_turn_service(Settings.from_env())
        history = transcript(self.conversation)
        results = []
        for question in self.conversation.questions:
            results.append(self._question(service, question, history, budget))
            if progress is not None:
                progress.advance(note=f"{self.conversation.sample_id} questions")
        return results

    def _question(self, service: TurnService, question: Any, history: list[Any], budget: int) -> QuestionResult:
        with_recall = asyncio.run(ask(service, self.model, self.user, question.question, recall=True))
        without = asyncio.run(ask(service, self.model, self.user, question.question, recall=False))
        kept = windows(history, question.question, budget)
        scored = {name: score_window(question, self.conversation, kept[name], question.question) for name in kept}
        return QuestionResult(
            dataset=self.dataset,
            sample_id=self.conversation.sample_id,
            question=question.question,
            category=question.category_name,
            channel=self.conversation.sessions[-1].channel,
            answerable=question.answer is not None,
            update=bool(question.superseded),
            ours=score_ours(question, self.conversation, with_recall.requests),
            without_recall=score_ours(question, self.conversation, without.requests),
            baselines={name: scored[name] for name in BASELINES},
            ceiling=scored[CEILING],
            full_tokens=scored[CEILING].tokens,
            recall_ms=with_recall.recall.elapsed_ms,
            recalled=len(with_recall.recall.messages),
            unparsed_evidence=question.unparsed,
            answer=with_recall.reply,
            verdict=self.judge(question, with_recall.reply) if self.judge is not None else "",
        )
