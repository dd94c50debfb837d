"""Conversations and questions in LoCoMo's JSON layout, read.

LoCoMo's `locomo10.json` is a list of samples; each has `sample_id`, `conversation` (`speaker_a`,
`speaker_b`, `session_<n>_date_time` and `session_<n>`: a list of `{"speaker", "dia_id", "text"}`,
an image turn adding `blip_caption`) and `qa` (`{"question", "answer", "evidence": [dia_id, ...],
"category": int}`; an adversarial question has `adversarial_answer` instead of `answer`: the trap,
a value that would be a wrong answer). The repository's `data/locomo10.zip` holds the same
conversations one to a file, with the conversation's keys at the top level (`speaker_a`,
`session_<n>`, `qa`, ...). `load` reads either, from a `.json` file, a `.zip` or a folder of them.

Read faithfully: both speakers' turns, an image turn's caption as part of its text (as LoCoMo's own
evaluation shows it, `[shares <caption>]`), each session's date, and evidence ids parsed
tolerantly: `D8:6; D9:17` is two ids, `D:11:26` is `D11:26`, `D30:05` is `D30:5`; whatever still
names no dialog is kept apart (`Question.unparsed`) and reported, never silently dropped.

Ours adds, where LoCoMo has nothing to say, optional keys a LoCoMo file simply lacks:
`session_<n>_channel` ("app" or "sms"; "app" when absent), and on a question `superseded` (values
the answer replaced: a knowledge update) and category 6 for those (LongMemEval's "knowledge update";
LoCoMo stops at 5).
"""

import json
import re
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

# LoCoMo's category numbers, named as its evaluation code treats them (task_eval/evaluation.py:
# category 1 is scored as multi-answer, 3 splits the answer at ';', 5 is adversarial; its stats
# print them as 4, 1, 2, 3, 5, the paper's single-hop, multi-hop, temporal, open-domain, adversarial).
# 6 is ours (knowledge update).
CATEGORIES: Mapping[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
    6: "knowledge-update",
}
# Mem0's evaluation labels the same numbers otherwise (Mem0's numbering: 1 single-hop,
# 2 temporal, 3 multi-hop, 4 open-domain; 5 left out), so its "single-hop" is LoCoMo's multi-hop.
MEM0_LABELS: Mapping[int, str] = {1: "single-hop", 2: "temporal", 3: "multi-hop", 4: "open-domain"}
_SESSION = re.compile(r"^session_(\d+)$")
_DIALOG_ID = re.compile(r"^D\s*:?\s*(\d+)\s*:\s*(\d+)$", re.IGNORECASE)
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%Y-%m-%dT%H:%M:%S")


@dataclass(frozen=True)
class Dialog:
    dia_id: str
    speaker: str
    text: str
    caption: str | None = None  # an image turn's `blip_caption`

    @property
    def content(self) -> str:
        """The turn as it was said and shown: its text, and what its image shows."""
        return f"{self.text} [shares {self.caption}]" if self.caption else self.text


@dataclass(frozen=True)
class Session:
    number: int
    date: str
    channel: str
    dialogs: tuple[Dialog, ...]

    @property
    def when(self) -> datetime | None:
        """The session's date and time, when `date` reads as one."""
        return parse_date(self.date)


@dataclass(frozen=True)
class Question:
    question: str
    answer: str | None  # None: nothing in the conversation answers it (abstention)
    evidence: tuple[str, ...]
    category: int
    superseded: tuple[str, ...] = ()
    # An abstention question's trap (LoCoMo's `adversarial_answer`): a value that would be a wrong
    # answer; it must not reach the model as evidence (see scoring.py).
    trap: str | None = None
    unparsed: tuple[str, ...] = ()  # evidence entries that name no dialog of the conversation

    @property
    def category_name(self) -> str:
        return CATEGORIES.get(self.category, f"category {self.category}")


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    client: str  # speaker_a: the client, whose turns are the user's
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...] = field(default=())
    other: str = ""  # speaker_b: the other party (the coach's side of the conversation)

    def dialog(self, dia_id: str) -> Dialog | None:
        return self._dialogs.get(dia_id)

    @cached_property
    def _dialogs(self) -> dict[str, Dialog]:
        return {d.dia_id: d for s in self.sessions for d in s.dialogs}

    @property
    def client_turns(self) -> int:
        return sum(1 for s in self.sessions for d in s.dialogs if d.speaker == self.client)

    @property
    def dialogs(self) -> int:
        return sum(len(s.dialogs) for s in self.sessions)

    @property
    def has_other_party(self) -> bool:
        """Whether the other party's turns are in the data (LoCoMo) or are the coach's to make (ours)."""
        return any(d.speaker != self.client for s in self.sessions for d in s.dialogs)


class DatasetError(ValueError):
    """The file is not in LoCoMo's layout; the message says where."""


def parse_date(text: str) -> datetime | None:
    for layout in _DATE_FORMATS:
        try:
            return datetime.strptime(text.strip(), layout)
        except ValueError:
            continue
    return None


def parse_evidence(raw: Sequence[Any], known: set[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(dialog ids, entries that name none): each entry may hold several ids (`D8:6; D9:17`), an
    id may be written loosely (`D:11:26`, `D30:05`); an id no dialog has is unparsed too."""
    found: list[str] = []
    unparsed: list[str] = []
    for entry in raw:
        for piece in (p for p in re.split(r"[;,]|\s(?=D)", str(entry)) if p.strip()):
            match = _DIALOG_ID.match(piece.strip().strip("()"))
            dia_id = f"D{int(match[1])}:{int(match[2])}" if match else None
            if dia_id is not None and dia_id in known:
                found.append(dia_id)
            else:
                unparsed.append(piece.strip())
    return tuple(dict.fromkeys(found)), tuple(unparsed)


def _question(raw: Mapping[str, Any], where: str, known: set[str]) -> Question:
    if not isinstance(raw.get("question"), str) or not isinstance(raw.get("category"), int):
        raise DatasetError(f"{where}: a question needs a 'question' string and an integer 'category'")
    answer = raw.get("answer", raw.get("adversarial_answer") if raw.get("category") != 5 else None)
    trap = raw.get("adversarial_answer")
    evidence, unparsed = parse_evidence(raw.get("evidence", []) or [], known)
    return Question(
        raw["question"],
        None if answer is None or raw["category"] == 5 else str(answer),
        evidence,
        raw["category"],
        tuple(str(v) for v in raw.get("superseded", []) or []),
        str(trap) if trap not in (None, "") and (answer is None or raw["category"] == 5) else None,
        unparsed,
    )


def _dialog(turn: Any, where: str) -> Dialog:
    if not isinstance(turn, Mapping) or not all(isinstance(turn.get(k), str) for k in ("speaker", "dia_id", "text")):
        raise DatasetError(f"{where}: a dialog needs 'speaker', 'dia_id' and 'text' strings")
    caption = turn.get("blip_caption")
    return Dialog(turn["dia_id"], turn["speaker"], turn["text"], str(caption) if caption else None)


def conversation_of(raw: Mapping[str, Any], name: str) -> Conversation:
    """A sample of `locomo10.json` (the conversation under `conversation`), or one file of
    `data/locomo10.zip` (its keys at the top level); `name` when it has no `sample_id`."""
    where = f"sample {raw.get('sample_id', name)}"
    body = raw.get("conversation", raw)
    if not isinstance(body, Mapping) or not isinstance(body.get("speaker_a"), str):
        raise DatasetError(f"{where}: no conversation with a 'speaker_a'")
    numbers = sorted(int(m[1]) for key in body if (m := _SESSION.match(key)))
    sessions = []
    for n in numbers:
        turns = body[f"session_{n}"]
        if not isinstance(turns, list):
            raise DatasetError(f"{where}: session_{n} is not a list of dialogs")
        dialogs = tuple(_dialog(t, f"{where}, session_{n}") for t in turns)
        date = str(body.get(f"session_{n}_date_time", ""))
        sessions.append(Session(n, date, str(body.get(f"session_{n}_channel", "app")), dialogs))
    known = {d.dia_id for s in sessions for d in s.dialogs}
    questions = tuple(_question(q, f"{where}, question {i + 1}", known) for i, q in enumerate(raw.get("qa", [])))
    return Conversation(
        str(raw.get("sample_id", name)), body["speaker_a"], tuple(sessions), questions, str(body.get("speaker_b", ""))
    )


def _documents(path: Path) -> Iterator[tuple[str, Any]]:
    """(name, parsed JSON) of each document at `path`: a file, a zip's .json members, a folder's files."""
    try:
        if path.is_dir():
            for file in sorted(path.glob("*.json")):
                yield file.stem, json.loads(file.read_text(encoding="utf-8"))
        elif zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                for member in sorted(n for n in archive.namelist() if n.endswith(".json")):
                    yield Path(member).stem, json.loads(archive.read(member))
        else:
            yield path.stem, json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise DatasetError(f"{path}: cannot read it as LoCoMo's JSON ({error})") from error


def load(path: Path) -> list[Conversation]:
    """The conversations at `path`, in LoCoMo's layout: `locomo10.json` (a list of samples), the
    repository's `data/locomo10.zip` (a conversation a file) or a folder of either."""
    found: list[Conversation] = []
    for name, document in _documents(path):
        samples = document if isinstance(document, list) else [document]
        for index, sample in enumerate(samples):
            if not isinstance(sample, Mapping):
                raise DatasetError(f"{path}: LoCoMo's layout holds conversations as JSON objects")
            label = f"conv-{name}" if len(samples) == 1 and name.isdigit() else f"{name}-{index}"
            found.append(conversation_of(sample, label))
    if not found:
        raise DatasetError(f"{path}: no conversation in LoCoMo's layout")
    return sorted(found, key=lambda c: c.sample_id) if path.is_dir() or zipfile.is_zipfile(path) else found
