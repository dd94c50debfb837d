"""`--aws`: the same benchmark with the real model, and the LLM judge of its answers: a second
Bedrock call that labels the coach's answer CORRECT or WRONG.

The model is whatever the standard environment names: real Bedrock with the process's own
credentials and region, or any endpoint `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` points at (the tests
point it at the emulator, whose judge is a test double). DynamoDB and the index stay local: the
benchmark measures the memory the turn path builds, and leaves nothing behind in an account.
Offline, the emulator records each request it answers; here a handler on boto3's default session
(every client of ours is made on it, the functions run in this process) records each Converse and
ConverseStream call's parameters, the same JSON body the emulator records.

The prompt follows the one LoCoMo results are usually judged with (Mem0's evaluation: question,
gold answer, generated answer; generous on wording, strict on the fact; the label as JSON). An
abstention question (nothing in the conversation answers it) is CORRECT only when the coach says
it does not know or was never told. The model comes from the project's one builder
(onboarding.llm.bedrock), with the judge's model id and temperature 0.

A verdict that names neither label, or both, is "unparseable": it counts as wrong and is reported.
A judge call that fails (after the builder's retries) is "failed": also wrong, also reported, and
the run goes on (a long paid run is not lost to one throttled call).
"""

import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from infra.bench.memory_benchmark.dataset import Question
from infra.local.bedrock_emulator.judge_prompt import JUDGE_SYSTEM_PROMPT, NO_ANSWER
from infra.local.bedrock_emulator.recorded import RecordedRequest
from onboarding.config import Settings

CORRECT, WRONG, UNPARSEABLE, FAILED = "CORRECT", "WRONG", "unparseable", "failed"
# The judge's default model: the coach's own default unless --judge-model or JUDGE_MODEL_ID names another.
JUDGE_MODEL_ENV = "JUDGE_MODEL_ID"
_JSON_LABEL = re.compile(r'"label"\s*:\s*"(CORRECT|WRONG)"', re.IGNORECASE)
# Upper case only: "correct" in a sentence is no verdict; INCORRECT is read as WRONG.
_BARE_LABEL = re.compile(r"\b(CORRECT|WRONG|INCORRECT)\b")


def judge_request(question: Question, answer: str) -> str:
    gold = question.answer if question.answer is not None else NO_ANSWER
    return f"Question: {question.question}\nGold answer: {gold}\nCoach's answer: {answer}"


def parse_verdict(text: str) -> str:
    """CORRECT or WRONG from the judge's reply: its JSON label, else the one bare upper-case label
    it names; UNPARSEABLE when it names neither, or both without a JSON label."""
    labels = {m.upper() for m in _JSON_LABEL.findall(text)}
    if not labels:
        labels = {WRONG if m == "INCORRECT" else m for m in _BARE_LABEL.findall(text)}
    return labels.pop() if len(labels) == 1 else UNPARSEABLE


def judge_settings(settings: Settings, model_id: str) -> Settings:
    """The coach's settings with the judge's model and temperature 0 (a grader should not sample)."""
    return settings.model_copy(update={"model_id": model_id, "model_temperature": 0.0})


class LlmJudge:
    """Judges one answer per call with `model` (built by onboarding.llm.bedrock.build_chat_model)."""

    def __init__(self, model: BaseChatModel) -> None:
        self.model = model

    def __call__(self, question: Question, answer: str) -> str:
        try:
            reply = self.model.invoke(
                [SystemMessage(JUDGE_SYSTEM_PROMPT), HumanMessage(judge_request(question, answer))]
            )
        except (BotoCoreError, ClientError):
            return FAILED  # counted and reported as such: the run's figures say how many
        return parse_verdict(reply.text)


def accuracy(results: Iterable[Any]) -> dict[str, Any]:
    """Answer accuracy by category over the judged results (`.category`, `.verdict`)."""
    judged = [r for r in results if r.verdict]
    table: dict[str, dict[str, int]] = {}
    for r in judged:
        row = table.setdefault(r.category, {"questions": 0, "correct": 0, "unparseable": 0, "failed": 0})
        row["questions"] += 1
        row["correct"] += r.verdict == CORRECT
        row["unparseable"] += r.verdict == UNPARSEABLE
        row["failed"] += r.verdict == FAILED
    return {
        "judged": len(judged),
        "correct": sum(r.verdict == CORRECT for r in judged),
        "unparseable": sum(r.verdict == UNPARSEABLE for r in judged),
        "failed": sum(r.verdict == FAILED for r in judged),
        "by_category": dict(sorted(table.items())),
    }


def accuracy_rows(found: Mapping[str, Any]) -> list[str]:
    """The report's answer-accuracy table, or the line that says none is claimed."""
    acc = found.get("answer_accuracy")
    if not acc or not acc["judged"]:
        return ["Answer accuracy: not measured (offline, no answer accuracy is claimed; `--aws` measures it)."]
    judge = found.get("judge_model", "")
    rows = [
        f"Answer accuracy, LLM judge ({judge}; an unparseable verdict or a failed call counts as wrong): "
        f"{100 * acc['correct'] / acc['judged']:.1f} % ({acc['correct']}/{acc['judged']}), "
        f"{acc['unparseable']} unparseable, {acc.get('failed', 0)} failed.",
        "",
        "| by category | questions | correct | unparseable | judge call failed | accuracy |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in acc["by_category"].items():
        share = f"{100 * row['correct'] / row['questions']:.1f} %"
        rows.append(
            f"| {name} | {row['questions']} | {row['correct']} | {row['unparseable']} | {row.get('failed', 0)} "
            f"| {share} |"
        )
    return rows


OPERATIONS = {"ConverseStream": "converse-stream", "Converse": "converse"}


class BedrockRecorder:
    """Records the Bedrock Converse requests of every client made on boto3's default session after
    it is created (clients copy their session's handlers when they are made)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        session = boto3.DEFAULT_SESSION or boto3.Session()
        boto3.DEFAULT_SESSION = session  # the session every client of ours is made on
        for operation in OPERATIONS:
            session.events.register(f"provide-client-params.bedrock-runtime.{operation}", self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        body = {key: value for key, value in params.items() if key != "modelId"}
        request = RecordedRequest(str(params.get("modelId", "")), OPERATIONS[model.name], body)
        with self._lock:
            self._requests.append(request)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)


def has_credentials() -> bool:
    return boto3.Session().get_credentials() is not None


def model_endpoint(region: str) -> str:
    """Where the model's requests go, as the report states it."""
    return os.environ.get("AWS_ENDPOINT_URL_BEDROCK_RUNTIME") or f"Amazon Bedrock ({region})"
