"""Owns scoring one question for one memory: whether the evidence reached the model, where it was,
and what else a prompt must not hold.

- Evidence recall: every evidence dialog's text is in what the model read, or (failing that) the
  answer's words are, every `;`-separated part in a row (matching.py: whole words, LoCoMo's
  normalisation). `via` says which, so an answer-only recall is never mistaken for evidence.
  LoCoMo's own retrieval recall, the share of the evidence dialogs present, is kept too.
- Where (ours): the prompt's parts (saved answers, profile, recalled messages, window, the earlier
  conversation's lines carried verbatim next to the summary, the summary itself) and the tool
  results of later rounds. Evidence found only with the summary's help is reported apart: offline
  the emulator wrote that summary, so it is not claimed.
- Current values: after a correction, no superseded value stands in the sections that present
  current values. Abstention: the question's trap is nowhere in what the model read.
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, HumanMessage

from infra.bench.fidelity import request_text, request_tokens
from infra.bench.memory_benchmark.baselines import tokens
from infra.bench.memory_benchmark.dataset import Conversation, Question
from infra.bench.memory_benchmark.matching import has_words, normal, words
from infra.local.bedrock_emulator.recorded import RecordedRequest
from onboarding.llm.sections import RECALL_HEADER

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


@dataclass
class Score:
    """One question scored for one memory (ours, with or without recall, or a baseline)."""

    recalled: bool
    tokens: int
    via: str = ""  # "evidence" or "answer": what was found
    evidence_share: float = 0.0  # LoCoMo's retrieval recall: the evidence dialogs present, as a share
    carrier: str = ""  # ours only: where the evidence was found ("summary": only with its help)
    superseded_as_current: bool = False
    holds_old_value: bool = False
    false_evidence: bool = False  # abstention: the question's trap reached the model


def found(question: Question, conversation: Conversation, text: str) -> tuple[str, float]:
    """("evidence" | "answer" | "", share of evidence dialogs present) for `text`."""
    said = normal(text)
    dialogs = [conversation.dialog(e) for e in question.evidence]
    present = [d is not None and normal(d.content) in said for d in dialogs]
    share = sum(present) / len(present) if present else 0.0
    if present and all(present):
        return "evidence", share
    parts = [p for p in (question.answer or "").split(";") if p.strip()]
    said_words = words(text)
    if parts and all(has_words(said_words, part) for part in parts):
        return "answer", share
    return "", share


def trapped(question: Question, text: str) -> bool:
    return bool(question.trap) and has_words(words(text), question.trap or "")


def sections(system: str) -> dict[str, str]:
    """The system prompt by part (the rest is instructions)."""
    parts = dict.fromkeys((*SECTION_STARTS, "carried lines"), "")
    for block in system.split("\n\n"):
        for name, starts in SECTION_STARTS.items():
            if block.startswith(starts):
                parts[name] += block + "\n"
    summary = parts["summary"].splitlines()
    parts["carried lines"] = "\n".join(line for line in summary if _CARRIED.match(line))
    parts["summary"] = "\n".join(line for line in summary if not _CARRIED.match(line))
    return parts


def score_ours(question: Question, conversation: Conversation, requests: Sequence[RecordedRequest]) -> Score:
    """Our memory's prompt (the first request) and what the tools it called returned (later rounds)."""
    first = requests[0]
    parts: Mapping[str, str] = {
        **sections(first.system_text),
        "window": request_text(first).removeprefix(first.system_text),
        "tool result": "\n".join(map(request_text, requests[1:])),
    }
    claimed_text = "\n".join(parts[name] for name in CLAIMED)
    via, share = found(question, conversation, claimed_text)
    carrier = next((name for name in CLAIMED if via and found(question, conversation, parts[name])[0]), "")
    if via and not carrier:
        carrier = "several"
    elif not via:
        via, share = found(question, conversation, claimed_text + "\n" + parts["summary"])
        carrier = "summary" if via else ""
    current = normal("\n".join(b for b in first.system_text.split("\n\n") if b.startswith(CURRENT_SECTIONS)))
    return Score(
        recalled=bool(via),
        tokens=request_tokens(first),
        via=via,
        evidence_share=share,
        carrier=carrier,
        superseded_as_current=any(normal(old) in current for old in question.superseded),
        false_evidence=trapped(question, "\n".join(map(request_text, requests))),
    )


def score_window(question: Question, conversation: Conversation, kept: Sequence[BaseMessage], asked: str) -> Score:
    """A baseline's window (and the question after it)."""
    text = "\n".join(str(m.content) for m in kept)
    via, share = found(question, conversation, text)
    return Score(
        recalled=bool(via),
        tokens=tokens([*kept, HumanMessage(asked)]),
        via=via,
        evidence_share=share,
        holds_old_value=any(normal(v) in normal(text) for v in question.superseded),
        false_evidence=trapped(question, text),
    )
