"""Owns one saved onboarding answer as `agent_context` stores it: its value, where and when the
client said it, and the values it replaced (docs/decisions/0020-answers-with-provenance.md).

Stored (inside the state item's `agent_context` JSON, under `{step: {field: ...}}`):

- an answer written before provenance existed: the value itself, a string;
- an answer now: `{"value": str | null, "said_in": message id | null, "said_at": ISO time | null,
  "previous": [{"value", "said_in", "said_at", "replaced_at"}, ...]}`, oldest previous value first.
  `value` is null when an onboarding restart cleared it (its history stays).

Every reader goes through `read_answer`, so both shapes read the same; a malformed entry reads as
no answer rather than failing the turn.
"""

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class AnswerSource:
    """The client's message an answer came from."""

    message_id: str | None = None
    at: datetime | None = None


@dataclass(frozen=True)
class PreviousValue:
    value: str
    said_in: str | None = None
    said_at: datetime | None = None
    replaced_at: datetime | None = None  # when the client gave the value that replaced it


def _time(raw: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        return None


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def same_value(first: str | None, second: str | None) -> bool:
    """Equal once case and spacing are ignored: saying "3 Days" after "3 days" changes nothing."""
    if first is None or second is None:
        return first is second
    return " ".join(first.split()).casefold() == " ".join(second.split()).casefold()


@dataclass(frozen=True)
class Answer:
    value: str | None
    said_in: str | None = None
    said_at: datetime | None = None
    previous: tuple[PreviousValue, ...] = ()

    @property
    def answered(self) -> bool:
        return self.value is not None

    def stored(self) -> dict[str, Any]:
        """The JSON shape `agent_context` keeps."""
        return {
            "value": self.value,
            "said_in": self.said_in,
            "said_at": _iso(self.said_at),
            "previous": [
                {"value": p.value, "said_in": p.said_in, "said_at": _iso(p.said_at), "replaced_at": _iso(p.replaced_at)}
                for p in self.previous
            ],
        }

    def _kept(self, previous: tuple[PreviousValue, ...], max_previous: int) -> tuple[PreviousValue, ...]:
        # The first value is the one "when I started" asks about: it stays; the oldest after it go.
        if len(previous) <= max_previous:
            return previous
        if max_previous <= 1:
            return previous[:max_previous]
        return (previous[0], *previous[len(previous) - max_previous + 1 :])

    def replaced_by(self, value: str, source: AnswerSource | None, max_previous: int) -> "Answer":
        """This answer after the client said `value`: the same value keeps its first provenance;
        a new one becomes current and this one joins the previous values."""
        if same_value(self.value, value):
            return self
        source = source or AnswerSource()
        previous = self.previous
        if self.value is not None:
            previous = (*previous, PreviousValue(self.value, self.said_in, self.said_at, source.at))
        return Answer(value, source.message_id, source.at, self._kept(previous, max_previous))

    def cleared(self, at: datetime | None, max_previous: int) -> "Answer":
        """No current value (an onboarding restart), the last one kept as a previous value."""
        if self.value is None:
            return self
        previous = (*self.previous, PreviousValue(self.value, self.said_in, self.said_at, at))
        return Answer(None, None, None, self._kept(previous, max_previous))

    def joined_with(self, other: "Answer") -> "Answer":
        """This answer (it wins, unless it has no value) with `other`'s values kept as previous
        ones, ordered by when they were said (a linked phone's answers: decision 0015)."""
        winner, loser = (other, self) if self.value is None and other.value is not None else (self, other)
        extra = list(loser.previous)
        if loser.value is not None and not same_value(loser.value, winner.value):
            extra.append(PreviousValue(loser.value, loser.said_in, loser.said_at, None))
        seen = {(p.value, p.said_in) for p in winner.previous}
        merged = (*winner.previous, *(p for p in extra if (p.value, p.said_in) not in seen))
        return replace(winner, previous=_by_time(merged))


def _by_time(values: tuple[PreviousValue, ...]) -> tuple[PreviousValue, ...]:
    # Values without a time (written before provenance) are the oldest.
    return tuple(sorted(values, key=lambda p: (p.said_at is not None, p.said_at.timestamp() if p.said_at else 0.0)))


def _previous(raw: Any) -> PreviousValue | None:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("value"), str):
        return None
    said_in = raw.get("said_in")
    return PreviousValue(
        raw["value"],
        said_in if isinstance(said_in, str) else None,
        _time(raw.get("said_at")),
        _time(raw.get("replaced_at")),
    )


def read_answer(raw: Any) -> Answer | None:
    """The answer stored as `raw` (either shape); None when `raw` is not an answer."""
    if isinstance(raw, str):
        return Answer(raw)
    if not isinstance(raw, Mapping) or "value" not in raw:
        return None
    value, said_in, previous = raw.get("value"), raw.get("said_in"), raw.get("previous")
    if value is not None and not isinstance(value, str):
        return None
    earlier = tuple(p for item in previous if (p := _previous(item))) if isinstance(previous, (list, tuple)) else ()
    return Answer(value, said_in if isinstance(said_in, str) else None, _time(raw.get("said_at")), earlier)


def answer_value(raw: Any) -> str | None:
    """The current value of a stored answer (None: unanswered, cleared or malformed)."""
    answer = read_answer(raw)
    return answer.value if answer is not None else None


def is_answered(step_answers: Any, field: str) -> bool:
    return isinstance(step_answers, Mapping) and answer_value(step_answers.get(field)) is not None


def step_answers(agent_context: Mapping[str, Any], step: str) -> dict[str, Answer]:
    """The answers stored for `step`, read (its `completed_at` and malformed entries left out)."""
    saved = agent_context.get(step)
    if not isinstance(saved, Mapping):
        return {}
    return {key: answer for key, raw in saved.items() if key != "completed_at" and (answer := read_answer(raw))}
