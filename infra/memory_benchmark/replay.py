"""Replays conversations through the real turn path (the local stack's HTTP API and Twilio webhook,
DynamoDB on moto's server, the Bedrock emulator) and scores, at each question, what the model got.

Per question: the turn's coach requests (the first is the prompt; later ones follow tool rounds)
are captured from the emulator. Scored:

- evidence recall: every evidence dialog's text, or the answer (each `;`-separated part) as a
  saved fact, is in what the model read; where it was found is its carrier (saved answers,
  profile, window, summary, or a tool result of a later round);
- current value: after a correction, the new value is there and no superseded value stands in the
  sections that present current values (`Already known`, `About the client`);
- prompt tokens of the first request;
- abstention (a question nothing in the conversation answers): no false evidence, i.e. the
  question's trap (LoCoMo's `adversarial_answer`, a value that would be a wrong answer) is nowhere
  in what the model read, saved sections, window and tool results alike. A prompt-level benchmark
  can say no more: whether the model then says "you never told me" is `--aws`'s judge's to score.

The baselines are built from the same replayed transcript (the client's words and the replies)
at the same point: the seed's last 15 messages; the full history, whole and cut to the token
budget; LangChain's `trim_messages` keeping the last 20 messages (a 10-exchange window).
"""

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, trim_messages

from infra.bedrock_emulator.server import RecordedRequest
from infra.fidelity import request_text, request_tokens
from infra.local_stack import LocalStack
from infra.memory_benchmark.dataset import Conversation, Question
from infra.twilio_emulator import post_signed_text
from onboarding.llm.prompts import SUMMARY_SYSTEM_PROMPT
from onboarding.memory.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens

SEED_WINDOW = 15
LANGCHAIN_WINDOW = 20
CURRENT_SECTIONS = ("Already known:", "About the client", "Address the client as")
BASELINES = ("window-15", "full-cut", "langchain-window")


def normal(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass
class Score:
    """One question scored for one memory (ours or a baseline)."""

    recalled: bool
    tokens: int
    carrier: str = ""  # ours only: where the evidence was found
    superseded_as_current: bool = False
    holds_old_value: bool = False
    false_evidence: bool = False  # abstention: the question's trap reached the model


@dataclass
class QuestionResult:
    sample_id: str
    question: str
    category: str
    channel: str
    answerable: bool
    update: bool
    ours: Score
    baselines: dict[str, Score] = field(default_factory=dict)
    full_tokens: int = 0
    answer: str = ""  # the coach's reply to the question (judged only with --aws)
    verdict: str = ""  # --aws: the judge's CORRECT / WRONG, or "unparseable"; "" when not judged


def _parts(question: Question) -> list[str]:
    return [normal(p) for p in (question.answer or "").split(";") if p.strip()]


def _found(question: Question, conversation: Conversation, text: str) -> bool:
    said = normal(text)
    parts = _parts(question)
    if parts and all(p in said for p in parts):
        return True
    dialogs = [conversation.dialog(e) for e in question.evidence]
    return bool(dialogs) and all(d is not None and normal(d.text) in said for d in dialogs)


def _trapped(question: Question, text: str) -> bool:
    return bool(question.trap) and normal(question.trap or "") in normal(text)


def _sections(system: str) -> dict[str, str]:
    """The system prompt by carrier: saved answers, profile, summary (the rest is instructions)."""
    found = {"saved answers": "", "profile": "", "summary": ""}
    for part in system.split("\n\n"):
        if part.startswith("Already known:"):
            found["saved answers"] += part
        elif part.startswith(("About the client", "Address the client as")):
            found["profile"] += part
        elif part.startswith("Summary of the earlier conversation:"):
            found["summary"] += part
    return found


def _current(system: str) -> str:
    return "\n".join(p for p in system.split("\n\n") if p.startswith(CURRENT_SECTIONS))


def score_ours(question: Question, conversation: Conversation, requests: Sequence[RecordedRequest]) -> Score:
    first = requests[0]
    sections = _sections(first.system_text)
    window = request_text(first).removeprefix(first.system_text)
    carriers = [*sections.items(), ("window", window), ("tool result", "\n".join(map(request_text, requests[1:])))]
    carrier = next((name for name, text in carriers if text and _found(question, conversation, text)), "")
    current = normal(_current(first.system_text))
    stale = any(normal(old) in current for old in question.superseded)
    trapped = _trapped(question, "\n".join(map(request_text, requests)))
    return Score(bool(carrier), request_tokens(first), carrier, stale, false_evidence=trapped)


def _tokens(messages: Sequence[BaseMessage]) -> int:
    return sum(count_tokens(str(m.content)) + MESSAGE_OVERHEAD_TOKENS for m in messages) + MESSAGE_OVERHEAD_TOKENS


def _cut(messages: Sequence[BaseMessage], budget: int) -> list[BaseMessage]:
    kept: list[BaseMessage] = []
    for message in reversed(messages):
        if _tokens([*kept, message]) > budget:
            break
        kept.insert(0, message)
    return kept


def score_baselines(
    question: Question, conversation: Conversation, transcript: Sequence[BaseMessage], budget: int
) -> tuple[dict[str, Score], int]:
    asked = HumanMessage(question.question)
    history = list(transcript)
    windows = {
        "window-15": history[-SEED_WINDOW:],
        "full-cut": _cut(history, budget - _tokens([asked])),
        "langchain-window": trim_messages(
            history, strategy="last", token_counter=len, max_tokens=LANGCHAIN_WINDOW, start_on="human"
        ),
    }
    scores = {}
    for name, kept in windows.items():
        text = "\n".join(str(m.content) for m in kept)
        old = any(normal(v) in normal(text) for v in question.superseded)
        scores[name] = Score(
            _found(question, conversation, text),
            _tokens([*kept, asked]),
            holds_old_value=old,
            false_evidence=_trapped(question, text),
        )
    return scores, _tokens([*history, asked])


class ModelRequests(Protocol):
    """Where the model's requests are read: the emulator, or (--aws) a recorder on boto3's session."""

    @property
    def requests(self) -> list[RecordedRequest]: ...


Judge = Callable[[Question, str], str]  # (question, the coach's answer) -> CORRECT / WRONG / unparseable


class Replayer:
    """Talks as one conversation's client to the local stack: its app, and its phone once linked."""

    def __init__(
        self,
        stack: LocalStack,
        conversation: Conversation,
        gap_s: float,
        number: int,
        model: ModelRequests | None = None,
        judge: Judge | None = None,
    ) -> None:
        self.stack, self.conversation, self.gap_s = stack, conversation, gap_s
        self.model: ModelRequests = model if model is not None else stack.bedrock
        self.judge = judge
        self.reply = ""
        self.user = f"bench-{conversation.sample_id}-{uuid.uuid4().hex[:6]}"
        self.phone = f"+1555{7000000 + number:07d}"
        self.http = httpx.Client(base_url=stack.api_url, headers={"Authorization": f"Bearer {self.user}"}, timeout=60)
        self.linked = False
        self.transcript: list[BaseMessage] = []

    def _coach_requests(self, since: int) -> list[RecordedRequest]:
        summary = SUMMARY_SYSTEM_PROMPT[:30]
        return [r for r in self.model.requests[since:] if not r.system_text.startswith(summary)]

    def say(self, text: str, channel: str) -> list[RecordedRequest]:
        since = len(self.model.requests)
        if channel == "sms":
            if not self.linked:
                code = self.http.post("/phone-links").json()["code"]
                self._text(f"LINK {code}")
                self._text("YES")  # the phone agrees to the link (nothing is linked before it does)
                self.linked = True
            reply = self._text(text)
        else:
            response = self.http.post("/chat", json={"message": text, "clientMessageId": uuid.uuid4().hex})
            response.raise_for_status()
            reply = str(response.json()["reply"])
        self.transcript += [HumanMessage(text), AIMessage(reply)]
        self.reply = reply
        return self._coach_requests(since)

    def _text(self, text: str) -> str:
        before = len(self.stack.twilio.sent)
        response = post_signed_text(f"{self.stack.api_url}/sms", self.phone, text)
        response.raise_for_status()
        if "<Message>" in response.text:
            return response.text
        self.stack.twilio.wait_for(before + 1, timeout_s=60)
        time.sleep(0.3)  # a long reply arrives in several parts
        return " ".join(s.body for s in self.stack.twilio.sent[before:])

    def run(self, budget: int, progress: Any = None) -> list[QuestionResult]:
        for session in self.conversation.sessions:
            time.sleep(self.gap_s)  # the sessions are days apart: each opens a new conversation
            for dialog in session.dialogs:
                if dialog.speaker == self.conversation.client:
                    self.say(dialog.text, session.channel)
                    if progress is not None:
                        progress.advance(note=f"{self.conversation.sample_id} session {session.number}")
        time.sleep(self.gap_s)
        results = []
        # The baselines see the conversation as it stood before the questions: what the coach
        # answered to earlier questions came from our memory, and would lend it to them.
        before = list(self.transcript)
        for question in self.conversation.questions:
            requests = self.say(question.question, "app")
            baselines, full = score_baselines(question, self.conversation, before, budget)
            ours = score_ours(question, self.conversation, requests) if requests else Score(False, 0)
            results.append(
                QuestionResult(
                    self.conversation.sample_id,
                    question.question,
                    question.category_name,
                    self.conversation.sessions[-1].channel,
                    question.answer is not None,
                    bool(question.superseded),
                    ours,
                    baselines,
                    full,
                    self.reply,
                    self.judge(question, self.reply) if self.judge is not None else "",
                )
            )
            if progress is not None:
                progress.advance(note=f"{self.conversation.sample_id} questions")
        return results
