"""Owns the working copy of a user's state and profile that a turn's tools change.

Tools only change this in-memory copy; the turn stores it with the reply in one transaction, so a
turn that fails changes nothing, and a tool call the turn stored always matches the state stored
with it. Every change is also logged as an operation, so that when another turn saved first (the
versioned write refused ours), the same changes are applied again on what that turn stored
(`rebased`): two turns saving different answers at once keep both, the same answer twice is one.

Each answer keeps the client message it came from (`source`) and, when a later message changes
it, its earlier values (onboarding.model.answers; decision 0020).
"""

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from onboarding.checkins.cadence import Unreadable, read_cadence
from onboarding.config import Limits
from onboarding.llm.wording import CHECK_IN_ASK_AGAIN, STEP_PROMPTS
from onboarding.model.answers import Answer, AnswerSource, read_answer, step_answers
from onboarding.model.immutable import thaw
from onboarding.model.normalization import is_blank
from onboarding.model.profile import PROFILE_FIELDS, FactKind, UserProfile
from onboarding.model.state import ONBOARDING_ORDER, OnboardingAgentType, OnboardingState, WaitingFor, next_step

# Answers of a step that also describe the client beyond onboarding: mirrored into the profile.
PROFILE_MIRROR: Mapping[tuple[OnboardingAgentType, str], str] = {
    (OnboardingAgentType.FITNESS_ASSESSMENT, "fitness_level"): "level",
    (OnboardingAgentType.FITNESS_ASSESSMENT, "limitations"): "limitations",
    (OnboardingAgentType.GOAL_SETTING, "primary_goal"): "goals",
    (OnboardingAgentType.WORKOUT_PLANNING, "exercise_preferences"): "preferences",
}


class WorkingCopy:
    """The state and profile as the turn's tools leave them. `limits.max_asks` bounds the re-asks of
    one waited-for field before it is skipped; the profile limits bound what it keeps."""

    def __init__(
        self,
        step: OnboardingAgentType,
        state: OnboardingState,
        profile: UserProfile,
        limits: Limits,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        source: AnswerSource | None = None,
    ) -> None:
        """`source`: the client message this turn answers; every value the tools save is marked
        with it."""
        self.step = step
        self._clock = clock
        self._limits = limits
        self._max_asks = limits.max_asks
        self.source = source
        self._agent_context: dict[str, Any] = thaw(state.agent_context)
        self._current = state.current_agent
        self._waiting = state.waiting_for
        self._skipped = list(state.skipped)
        self._completed_at = state.completed_at
        self._asked_this_turn = False
        self.profile = profile
        self.state_changed = False
        self.profile_changed = False
        self._operations: list[tuple[str, tuple[Any, ...]]] = []

    def _log(self, operation: str, *args: Any) -> None:
        self._operations.append((operation, args))

    @property
    def answer_keys(self) -> tuple[str, ...]:
        """The names of the items this turn saved (names only: telemetry never holds a value)."""
        keys = [key for op, args in self._operations if op == "save_answers" for key, v in args[0].items() if v]
        return tuple(dict.fromkeys(keys))

    def rebased(self, state: OnboardingState, profile: UserProfile) -> "WorkingCopy":
        """This turn's changes, applied again in order on `state` and `profile` (what another turn
        stored in between). What the tools answered the model is not re-answered: the stored
        tool results stay what the model saw."""
        copy = WorkingCopy(self.step, state, profile, self._limits, self._clock, self.source)
        for operation, args in self._operations:
            getattr(copy, operation)(*args)
        return copy

    def _clean(self, value: str) -> str:
        return " ".join(value.split())[: self._limits.profile_value_chars]

    def _remember(self, kind: FactKind, value: str) -> UserProfile:
        return self.profile.remember(
            kind, value, max_chars=self._limits.profile_value_chars, max_facts=self._limits.profile_other_facts
        )

    @property
    def state(self) -> OnboardingState:
        return OnboardingState(
            current_agent=self._current,
            agent_context=self._agent_context,
            waiting_for=self._waiting,
            skipped=tuple(self._skipped),
            completed_at=self._completed_at,
        )

    def _known(self, step: OnboardingAgentType) -> set[str]:
        answered = {key for key, answer in step_answers(self._agent_context, step.value).items() if answer.answered}
        skipped = {name.split(".", 1)[1] for name in self._skipped if name.startswith(f"{step.value}.")}
        return answered | skipped

    def _store_answer(self, step: OnboardingAgentType, key: str, value: str) -> tuple[Answer, Answer | None]:
        """Save `value` as `step.key`'s answer, marked with this turn's source; the answer before."""
        saved = dict(self._agent_context.get(step.value, {}))
        before = read_answer(saved.get(key))
        after = (before or Answer(None)).replaced_by(value, self.source, self._limits.answer_history_values)
        saved[key] = after.stored()
        self._agent_context[step.value] = saved
        if (profile_field := PROFILE_MIRROR.get((step, key))) is not None:
            self.profile = self._remember(profile_field, value)  # type: ignore[arg-type]
            self.profile_changed = True
        return after, before

    def _missing(self, step: OnboardingAgentType) -> list[str]:
        known = self._known(step)
        return [f.key for f in STEP_PROMPTS[step].fields if f.key not in known]

    def save_answers(self, answers: Mapping[str, str | None], step_complete: bool) -> str:
        """What `save_<step>` does: store the answers given, and finish the step when asked to and
        every item is known. The result tells the model what happened and what comes next."""
        self._log("save_answers", dict(answers), step_complete)
        given = {
            key: self._clean(value) for key, value in answers.items() if isinstance(value, str) and not is_blank(value)
        }
        if self._completed_at is not None:
            return json.dumps({"error": "onboarding is already complete; nothing was saved"})
        unreadable = self._unreadable_schedule(self.step, given)
        if unreadable is not None:
            given.pop(unreadable.item, None)
        for key, value in given.items():
            self._store_answer(self.step, key, value)
        if self._waiting is not None and self._waiting.field in given:
            self._waiting = None
        self.state_changed = True
        result: dict[str, Any] = {"saved": sorted(given)}
        if unreadable is not None:
            result["ask_again"] = CHECK_IN_ASK_AGAIN.format(item=unreadable.item, why=unreadable.why)
        missing = self._missing(self.step)
        if not step_complete or missing:
            result |= {"step_complete": False, "still_missing": missing}
            return json.dumps(result)
        finished = {**self._agent_context.get(self.step.value, {}), "completed_at": self._clock().isoformat()}
        self._agent_context[self.step.value] = finished
        following = next_step(self.step)
        if following is None:
            self._completed_at = self._completed_at or self._clock()
            return json.dumps(result | {"step_complete": True, "onboarding_complete": True})
        # Never backwards: another turn (a text and an app message at once) may have moved on.
        if ONBOARDING_ORDER.index(following) > ONBOARDING_ORDER.index(self._current):
            self._current = following
            self._waiting = None
        open_fields = [f for f in STEP_PROMPTS[following].fields if f.key not in self._known(following)]
        result |= {"step_complete": True, "next_step": STEP_PROMPTS[following].title}
        if open_fields:
            result["next_question"] = open_fields[0].question
        return json.dumps(result)

    def _unreadable_schedule(self, step: OnboardingAgentType, given: Mapping[str, str]) -> Unreadable | None:
        """A check-ins (or time zone) answer that cannot be read as a schedule is not saved, and
        the model is told to ask again: never guessed (checkins/cadence.py)."""
        if step != OnboardingAgentType.SCHEDULING or not given.keys() & {"check_ins", "timezone"}:
            return None
        saved = {key: answer.value for key, answer in step_answers(self._agent_context, step.value).items()}
        read = read_cadence(saved | dict(given), self._limits.quiet_hours)
        return read if isinstance(read, Unreadable) and read.item in given else None

    def remember(self, kind: FactKind, value: str) -> str:
        """What `remember_fact` does: keep a fact about the client in the profile."""
        self._log("remember", kind, value)
        before = self.profile
        self.profile = self._remember(kind, value)
        self.profile_changed = self.profile_changed or self.profile != before
        return json.dumps({"remembered": kind})

    def correct(self, item: str, value: str) -> str:
        """What `correct_answer` does: the client changed an answer (of any step, also after
        onboarding); the new value is current and the old one is kept with where it came from."""
        step, field = _item(item)
        if step is None or is_blank(value):
            return json.dumps({"error": f"unknown item {item!r}" if step is None else "no value given"})
        unreadable = self._unreadable_schedule(step, {field: self._clean(value)})
        if unreadable is not None:
            return json.dumps({"error": CHECK_IN_ASK_AGAIN.format(item=unreadable.item, why=unreadable.why)})
        self._log("correct", item, value)
        after, before = self._store_answer(step, field, self._clean(value))
        if self._waiting is not None and self._waiting.step == step and self._waiting.field == field:
            self._waiting = None
        self.state_changed = True
        previous = before.value if before is not None and before.value != after.value else None
        return json.dumps({"corrected": item, "value": after.value, "previous": previous})

    def history(self, item: str) -> str:
        """What `answer_history` does (reads only): an item's current value and the earlier ones,
        each with the date the client said it, for "what did I weigh when I started?"."""
        step, field = _item(item)
        if step is None:
            return json.dumps({"error": f"unknown item {item!r}"})
        answer = read_answer(self._agent_context.get(step.value, {}).get(field))
        if answer is None or (answer.value is None and not answer.previous):
            return json.dumps({"item": item, "never_answered": True})
        return json.dumps(
            {
                "item": item,
                "current": answer.value,
                "current_since": _day(answer.said_at),
                "earlier": [
                    {"value": p.value, "said": _day(p.said_at), "replaced": _day(p.replaced_at)}
                    for p in answer.previous
                ],
            }
        )

    def recall(self, about: str | None = None) -> str:
        """What `recall_facts` does (reads only): every fact kept about the client, its named fields
        and its free-form facts (oldest first), or only those sharing a word with `about`. The
        system prompt may not have room for them all (llm/sections.py); this reads them."""
        facts = [{"kind": key, "value": value} for key in PROFILE_FIELDS if (value := getattr(self.profile, key))]
        facts += [{"kind": "other", "value": fact} for fact in self.profile.other_facts]
        wanted = {word for word in (about or "").casefold().split() if len(word) > 2}
        if wanted:
            facts = [f for f in facts if wanted & set(f"{f['kind']} {f['value']}".casefold().replace("_", " ").split())]
        return json.dumps({"facts": facts, "about": about} if about else {"facts": facts}, ensure_ascii=False)

    def start_new_conversation(self) -> None:
        """A reset command: the field waited for goes with the old conversation; after a completed
        onboarding, onboarding starts again from its first step, each answer kept as an earlier
        value (so nothing is lost, and the coach asks afresh)."""
        self.forget_waiting()
        if self._completed_at is None:
            return
        self._log("restart_onboarding")
        self.restart_onboarding()

    def restart_onboarding(self) -> None:
        at = self.source.at if self.source is not None and self.source.at else self._clock()
        cleared: dict[str, Any] = {}
        for step in ONBOARDING_ORDER:
            answers = step_answers(self._agent_context, step.value)
            if answers:
                limit = self._limits.answer_history_values
                cleared[step.value] = {key: a.cleared(at, limit).stored() for key, a in answers.items()}
        self._agent_context = cleared
        self._current, self._waiting, self._skipped, self._completed_at = ONBOARDING_ORDER[0], None, [], None
        self.state_changed = True

    def ask_for(self, field: str) -> str:
        """What `ask_for` does: remember that the next message should answer `field`; after
        `max_asks` turns asking for it, give up on it so the coach does not loop."""
        if field not in {f.key for f in STEP_PROMPTS[self.step].fields}:
            return json.dumps({"error": f"unknown item {field!r} for this step"})
        self._log("ask_for", field)
        attempts = self._waiting.attempts + 1 if self._waiting and self._waiting.field == field else 1
        self._asked_this_turn = True
        self.state_changed = True
        if attempts > self._max_asks:
            self._skip(field)
            return json.dumps({"skipped": field, "note": "asked too often: move on without it"})
        self._waiting = WaitingFor(step=self.step, field=field, attempts=attempts)
        return json.dumps({"waiting_for": field, "attempt": attempts})

    def _skip(self, field: str) -> None:
        self._waiting = None
        name = f"{self.step.value}.{field}"
        if name not in self._skipped:
            self._skipped.append(name)

    def finish_turn(self) -> None:
        """A field still waited for after a turn that neither answered nor asked for it again was
        re-asked in words: count that ask, and skip the field once it was asked too often."""
        self._log("finish_turn")
        waiting = self._waiting
        if waiting is None or self._asked_this_turn or waiting.step != self._current:
            return
        self.state_changed = True
        if waiting.attempts + 1 > self._max_asks:
            self._skip(waiting.field)
        else:
            self._waiting = waiting.model_copy(update={"attempts": waiting.attempts + 1})

    def forget_waiting(self) -> None:
        """A new conversation (a reset) drops the field the coach was waiting for."""
        self._log("forget_waiting")
        if self._waiting is not None:
            self._waiting = None
            self.state_changed = True


def _item(item: str) -> tuple[OnboardingAgentType | None, str]:
    """`step.field` as (step, field); (None, "") when it names no item of any step."""
    step_name, _, field = item.partition(".")
    step = next((s for s in ONBOARDING_ORDER if s.value == step_name), None)
    if step is None or field not in {f.key for f in STEP_PROMPTS[step].fields}:
        return None, ""
    return step, field


def _day(at: datetime | None) -> str | None:
    return at.date().isoformat() if at is not None else None
