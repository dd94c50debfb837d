"""Owns scoring one question for one memory, and the baselines our memory is set beside.

Evidence recall counts the evidence lines in what the model read, never the question itself (a
question that quotes its answer would credit every memory). An evidence line is there when its
whole text (spacing and case aside) is:
- `strict`: every evidence line of the question is there (the headline);
- `some`: at least one is; `share`: the share of them there (LoCoMo's own retrieval recall);
- `loose`: strict, or failing that the answer's words (each `;`-part, whole words in a row after
  LoCoMo's normalisation: lower case, no punctuation, no articles or "and", so "2" is not "2026").
Ours also says where the evidence was (the prompt's parts, or the tool results of later rounds;
found only with the summary's help is kept apart: offline the emulator wrote that summary), whether
a superseded value stands where current values are presented, and for a question nothing answers
whether its trap (a wrong answer) reached the model.

The baselines come from the ORIGINAL transcript (the conversation's own lines, never a reply our
coach made: those quote our saved answers and would lend them our memory), each within the same
budget as our prompt for the same question (its tokens, question included): `window-15` (the
seed's last 15 messages), `full-cut` (the newest messages that fit), `bm25` (the messages ranked
by BM25 of the question, scored as the S3 Vectors stand-in scores its full-text search,
`s3vectors.Bm25`, the best that fit, in the order said), and `all-history`, uncut: the ceiling no
memory can pass.
"""

import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from infra.bench.memory_benchmark.dataset import Conversation, Question
from infra.local.bedrock_emulator.recorded import RecordedRequest
from infra.local.s3vectors import Bm25
from onboarding.llm.wording import RECALL_HEADER
from onboarding.memory.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens

SEED_WINDOW = 15
BASELINES = ("full-cut", "bm25", "window-15")
CEILING = "all-history"
CURRENT_SECTIONS = ("Already known:", "About the client", "Address the client as")
SECTION_STARTS = {
    "saved answers": ("Already known:",),
    "profile": ("About the client", "Address the client as"),
    "recall": (RECALL_HEADER,),
    "summary": ("Summary of the earlier conversation:",),
}
CLAIMED = ("saved answers", "profile", "recall", "window", "carried lines", "tool result")
# The messages of an earlier conversation not folded yet ride next to the summary as they were said
# (onboarding.memory.transcript's lines): stored words, not a summary.
_CARRIED = re.compile(r"^- (Client|Coach): ", re.MULTILINE)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation + "\u2018\u2019\u201c\u201d")


def normal(text: str) -> str:
    """Spacing and case aside: how a dialog's text is looked for."""
    return " ".join(text.split()).casefold()


def words(text: str) -> list[str]:
    """LoCoMo's answer normalisation, as words."""
    return _ARTICLES.sub(" ", text.replace(",", "").casefold().translate(_PUNCTUATION)).split()


def has_words(text: Sequence[str], phrase: str) -> bool:
    """Whether `phrase`'s words appear in `text` (already `words`) in a row; an empty phrase never does."""
    wanted = words(phrase)
    return bool(wanted) and any(text[i : i + len(wanted)] == wanted for i in range(len(text)))


@dataclass
class Score:
    """One question scored for one memory (ours in a retrieval mode, or a baseline)."""

    strict: bool
    tokens: int
    some: bool = False
    share: float = 0.0
    loose: bool = False
    carrier: str = ""  # ours: where the evidence was ("summary": only with its help)
    superseded_as_current: bool = False
    holds_old_value: bool = False
    false_evidence: bool = False  # abstention: the question's trap reached the model


def evidence(question: Question, conversation: Conversation, text: str) -> tuple[bool, bool, float, bool]:
    """(strict, some, share, loose) for `text` (the question left out of it)."""
    said = normal(text)
    present = [d is not None and normal(d.content) in said for d in map(conversation.dialog, question.evidence)]
    strict = bool(present) and all(present)
    parts = [p for p in (question.answer or "").split(";") if p.strip()]
    answered = bool(parts) and all(has_words(words(text), part) for part in parts)
    return strict, any(present), sum(present) / len(present) if present else 0.0, strict or answered


def trapped(question: Question, text: str) -> bool:
    return bool(question.trap) and has_words(words(text), question.trap or "")


def prompt_parts(system: str, window: Sequence[str], tool_results: Sequence[str] = ()) -> dict[str, str]:
    """What our model read, by part: the system prompt's sections, the window (the question not in
    it), and what its tools returned in later rounds."""
    parts = dict.fromkeys((*SECTION_STARTS, "carried lines"), "")
    for block in system.split("\n\n"):
        for name, starts in SECTION_STARTS.items():
            if block.startswith(starts):
                parts[name] += block + "\n"
    summary = parts["summary"].splitlines()
    parts["carried lines"] = "\n".join(line for line in summary if _CARRIED.match(line))
    parts["summary"] = "\n".join(line for line in summary if not _CARRIED.match(line))
    current = "\n".join(b for b in system.split("\n\n") if b.startswith(CURRENT_SECTIONS))
    return parts | {"window": "\n".join(window), "tool result": "\n".join(tool_results), "current": current}


def recorded_parts(requests: Sequence[RecordedRequest]) -> dict[str, str]:
    """`prompt_parts` of a recorded answer: the first request's system prompt and window (its last
    message, the question, left out), and the blocks each later round added (tool calls, results)."""
    first, rounds = requests[0], requests[1:]
    messages = first.body.get("messages", [])
    texts = [[b["text"] if "text" in b else str(b) for b in m.get("content", [])] for m in messages[:-1]]
    added = [str(block) for r in rounds for m in r.body.get("messages", [])[len(messages) :] for block in m["content"]]
    return prompt_parts(first.system_text, [t for blocks in texts for t in blocks], added)


def score_ours(question: Question, conversation: Conversation, parts: Mapping[str, str], tokens: int) -> Score:
    claimed = "\n".join(parts[name] for name in CLAIMED)
    strict, some, share, loose = evidence(question, conversation, claimed)
    carrier = next((name for name in CLAIMED if strict and evidence(question, conversation, parts[name])[0]), "")
    if strict and not carrier:
        carrier = "several"
    elif not strict and evidence(question, conversation, claimed + "\n" + parts["summary"])[0]:
        carrier = "summary"
    current = normal(parts["current"])
    return Score(
        strict, tokens, some, share, loose, carrier,
        superseded_as_current=any(normal(old) in current for old in question.superseded),
        false_evidence=trapped(question, claimed + "\n" + parts["summary"]),
    )  # fmt: skip


def message_cost(text: str) -> int:
    return count_tokens(text) + MESSAGE_OVERHEAD_TOKENS


def score_window(question: Question, conversation: Conversation, kept: Sequence[str], asked: str) -> Score:
    """A baseline's messages (the question after them, counted in its tokens, never searched)."""
    text = "\n".join(kept)
    strict, some, share, loose = evidence(question, conversation, text)
    tokens = sum(map(message_cost, kept)) + message_cost(asked) + MESSAGE_OVERHEAD_TOKENS
    return Score(
        strict, tokens, some, share, loose,
        holds_old_value=any(normal(v) in normal(text) for v in question.superseded),
        false_evidence=trapped(question, text),
    )  # fmt: skip


def transcript(conversation: Conversation) -> list[str]:
    """The conversation as said, both speakers, in order."""
    return [d.content for s in conversation.sessions for d in s.dialogs]


class Baselines:
    """What each baseline puts before a question of one conversation."""

    def __init__(self, history: Sequence[str]) -> None:
        self.history = list(history)
        self._bm25 = Bm25("en")
        for i, text in enumerate(self.history):
            self._bm25.add(str(i), text)

    def windows(self, question: str, budget: int) -> dict[str, list[str]]:
        room = budget - message_cost(question) - MESSAGE_OVERHEAD_TOKENS
        newest_first = list(reversed(range(len(self.history))))
        scores = self._bm25.scores(question, [str(i) for i in newest_first])
        ranked = sorted((i for i in newest_first if str(i) in scores), key=lambda i: -scores[str(i)])
        return {
            "window-15": self._fit(newest_first[:SEED_WINDOW], room),
            "full-cut": self._fit(newest_first, room, stop=True),
            "bm25": self._fit(ranked, room),
            CEILING: self.history,
        }

    def _fit(self, order: Sequence[int], room: int, stop: bool = False) -> list[str]:
        """The messages of `order` that fit `room` tokens, in the order said (`stop`: at the first
        that does not fit, as a cut of the newest does)."""
        kept: list[int] = []
        for i in order:
            cost = message_cost(self.history[i])
            if cost > room:
                if stop:
                    break
                continue
            kept.append(i)
            room -= cost
        return [self.history[i] for i in sorted(kept)]
