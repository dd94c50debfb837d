"""Conversations and questions in LoCoMo's JSON layout, read and written.

LoCoMo's file is a list of samples; each has `sample_id`, `conversation` (`speaker_a`, `speaker_b`,
`session_<n>_date_time` and `session_<n>`: a list of `{"speaker", "dia_id", "text"}`) and `qa`
(`{"question", "answer", "evidence": [dia_id, ...], "category": int}`; an adversarial question has
`adversarial_answer` instead of `answer`: the trap, a value that would be a wrong answer). Anyone
with the dataset can point the benchmark at it.

Ours adds, where LoCoMo has nothing to say, optional keys a LoCoMo file simply lacks:
`session_<n>_channel` ("app" or "sms"; "app" when absent), and on a question `superseded` (values
the answer replaced: a knowledge update) and category 6 for those (LongMemEval's "knowledge update";
LoCoMo stops at 5).
"""

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# LoCoMo's category numbers, as its evaluation code names them; 6 is ours (knowledge update).
CATEGORIES: Mapping[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
    6: "knowledge-update",
}
_SESSION = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True)
class Dialog:
    dia_id: str
    speaker: str
    text: str


@dataclass(frozen=True)
class Session:
    number: int
    date: str
    channel: str
    dialogs: tuple[Dialog, ...]


@dataclass(frozen=True)
class Question:
    question: str
    answer: str | None  # None: nothing in the conversation answers it (abstention)
    evidence: tuple[str, ...]
    category: int
    superseded: tuple[str, ...] = ()
    # An abstention question's trap (LoCoMo's `adversarial_answer`): a value that would be a wrong
    # answer; it must not reach the model as evidence (see replay.py).
    trap: str | None = None

    @property
    def category_name(self) -> str:
        return CATEGORIES.get(self.category, f"category {self.category}")


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    client: str  # the speaker whose turns are replayed (speaker_a)
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...] = field(default=())

    def dialog(self, dia_id: str) -> Dialog | None:
        return next((d for s in self.sessions for d in s.dialogs if d.dia_id == dia_id), None)

    @property
    def client_turns(self) -> int:
        return sum(1 for s in self.sessions for d in s.dialogs if d.speaker == self.client)


class DatasetError(ValueError):
    """The file is not in LoCoMo's layout; the message says where."""


def _question(raw: Mapping[str, Any], where: str) -> Question:
    if not isinstance(raw.get("question"), str) or not isinstance(raw.get("category"), int):
        raise DatasetError(f"{where}: a question needs a 'question' string and an integer 'category'")
    answer = raw.get("answer", raw.get("adversarial_answer") if raw.get("category") != 5 else None)
    trap = raw.get("adversarial_answer")
    return Question(
        raw["question"],
        None if answer is None or raw["category"] == 5 else str(answer),
        tuple(str(e) for e in raw.get("evidence", []) or []),
        raw["category"],
        tuple(str(v) for v in raw.get("superseded", []) or []),
        str(trap) if trap not in (None, "") and (answer is None or raw["category"] == 5) else None,
    )


def _conversation(raw: Mapping[str, Any], index: int) -> Conversation:
    where = f"sample {raw.get('sample_id', index)}"
    body = raw.get("conversation")
    if not isinstance(body, Mapping) or not isinstance(body.get("speaker_a"), str):
        raise DatasetError(f"{where}: no 'conversation' with a 'speaker_a'")
    numbers = sorted(int(m[1]) for key in body if (m := _SESSION.match(key)))
    sessions = []
    for n in numbers:
        turns = body[f"session_{n}"]
        if not isinstance(turns, list):
            raise DatasetError(f"{where}: session_{n} is not a list of dialogs")
        dialogs = tuple(Dialog(str(t["dia_id"]), str(t["speaker"]), str(t["text"])) for t in turns)
        date = str(body.get(f"session_{n}_date_time", ""))
        sessions.append(Session(n, date, str(body.get(f"session_{n}_channel", "app")), dialogs))
    questions = tuple(_question(q, f"{where}, question {i + 1}") for i, q in enumerate(raw.get("qa", [])))
    return Conversation(str(raw.get("sample_id", index)), body["speaker_a"], tuple(sessions), questions)


def load(path: Path) -> list[Conversation]:
    """The conversations of a file in LoCoMo's layout (LoCoMo's own `locomo10.json` included)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise DatasetError(f"{path}: cannot read it as JSON ({error})") from error
    if not isinstance(raw, list):
        raise DatasetError(f"{path}: LoCoMo's layout is a list of samples")
    return [_conversation(sample, i) for i, sample in enumerate(raw)]


def to_locomo(conversations: Sequence[Conversation], coach: str = "Coach") -> list[dict[str, Any]]:
    """`conversations` in LoCoMo's layout (what `load` reads back)."""
    samples = []
    for c in conversations:
        body: dict[str, Any] = {"speaker_a": c.client, "speaker_b": coach}
        for s in c.sessions:
            body[f"session_{s.number}_date_time"] = s.date
            body[f"session_{s.number}_channel"] = s.channel
            body[f"session_{s.number}"] = [
                {"speaker": d.speaker, "dia_id": d.dia_id, "text": d.text} for d in s.dialogs
            ]
        qa = []
        for q in c.questions:
            entry: dict[str, Any] = {"question": q.question, "evidence": list(q.evidence), "category": q.category}
            entry |= (
                {"answer": q.answer}
                if q.answer is not None
                else {"adversarial_answer": q.trap}
                if q.trap
                else {"answer": None}
            )
            if q.superseded:
                entry["superseded"] = list(q.superseded)
            qa.append(entry)
        samples.append({"sample_id": c.sample_id, "conversation": body, "qa": qa})
    return samples
