"""The check-in's agent, beside the five onboarding agents: one short message the coach sends
unprompted, written from the memory (the plan, the last conversation, a limitation to mind), asked
of the model in one non-streaming call."""

from datetime import datetime

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from onboarding.llm.wording import CHECK_IN_CUE, CHECK_IN_HEADERS, CHECK_IN_PROMPT
from onboarding.model.answers import step_answers
from onboarding.model.history import TurnContext
from onboarding.model.normalization import is_blank

# The answers that make up the plan, in the order the prompt lists them.
PLAN_ITEMS = (
    ("goal_setting", "primary_goal"),
    ("goal_setting", "target"),
    ("workout_planning", "days_per_week"),
    ("workout_planning", "session_length"),
    ("workout_planning", "exercise_preferences"),
    ("workout_planning", "equipment"),
    ("scheduling", "training_days"),
    ("scheduling", "training_time"),
)
LAST_MESSAGES = 6  # of the last conversation, beside its summary


def check_in_prompt(loaded: TurnContext, cadence: str, local_time: datetime, max_chars: int) -> str:
    """The check-in's system prompt: what to write, then each section the memory has something for."""
    context, profile = loaded.state.agent_context, loaded.profile
    sections = [CHECK_IN_PROMPT.format(cadence=cadence, local_time=f"{local_time:%A %H:%M}", max_chars=max_chars)]
    if profile.address_as:
        sections.append(f"{CHECK_IN_HEADERS['address']} {profile.address_as}")
    plan = [
        f"- {step}.{item}: {answer.value}"
        for step, item in PLAN_ITEMS
        if (answer := step_answers(context, step).get(item)) is not None and answer.value
    ]
    if plan:
        sections.append("\n".join([CHECK_IN_HEADERS["plan"], *plan]))
    said = step_answers(context, "fitness_assessment").get("limitations")
    limitation = profile.limitations or (said.value if said is not None else None)
    if limitation:
        sections.append(f"{CHECK_IN_HEADERS['limitation']}\n- {limitation}")
    last = [
        f"- {'client' if m.role == 'user' else 'coach'}: {' '.join(m.content.split())}"
        for m in loaded.messages
        if m.role in ("user", "assistant") and not is_blank(m.content)
    ][-LAST_MESSAGES:]
    if loaded.summary is not None or last:
        summary = [f"- earlier: {' '.join(loaded.summary.text.split())}"] if loaded.summary is not None else []
        sections.append("\n".join([CHECK_IN_HEADERS["last"], *summary, *last]))
    return "\n\n".join(sections)


class CheckInAgent:
    """Writes a check-in: one model call, not streamed (nobody waits on it token by token)."""

    def __init__(self, llm: BaseChatModel, max_chars: int) -> None:
        self._llm = llm
        self._max_chars = max_chars

    def prompt(self, loaded: TurnContext, cadence: str, local_time: datetime) -> str:
        return check_in_prompt(loaded, cadence, local_time, self._max_chars)

    async def write(self, loaded: TurnContext, cadence: str, local_time: datetime) -> str:
        """The check-in's text (at most `max_chars`, cut at a sentence end when it runs over)."""
        messages = [SystemMessage(self.prompt(loaded, cadence, local_time)), HumanMessage(CHECK_IN_CUE)]
        reply = await self._llm.ainvoke(messages)
        return _fitted(" ".join(str(reply.text).split()), self._max_chars)


def _fitted(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    end = max(cut.rfind(". "), cut.rfind("? "), cut.rfind("! "))
    return cut[: end + 1] if end > 0 else cut.rstrip()
