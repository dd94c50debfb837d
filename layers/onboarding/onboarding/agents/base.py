"""Owns what every onboarding agent shares: system prompt, budgeted messages, streaming with tools."""

from abc import ABC
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from aws_lambda_powertools import Logger
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, SystemMessage, ToolMessage

from onboarding.config import DEFAULT_LIMITS, Limits
from onboarding.context import OnboardingAgentContext
from onboarding.llm.converse import alternating_messages
from onboarding.llm.prompts import PromptFacts, render_system_prompt
from onboarding.llm.tools import build_tools, tool_definitions
from onboarding.llm.working_copy import WorkingCopy
from onboarding.memory.recall import recall_lines, recall_section_tokens
from onboarding.memory.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens
from onboarding.memory.window import fit_window, message_tokens
from onboarding.model.errors import MessageOverBudgetError
from onboarding.model.messages import Message, ToolCall
from onboarding.model.state import OnboardingAgentType
from onboarding.model.text import is_blank

logger = Logger(child=True)


@dataclass(frozen=True)
class PromptPlan:
    """Exactly what goes to the model for a message, and what it costs."""

    system: str
    window: tuple[Message, ...]
    current: str
    system_tokens: int
    window_tokens: int
    current_tokens: int
    budget: int
    left_out: int  # history entries the budget could not hold (normally 0: the summary has them)

    @property
    def total_tokens(self) -> int:
        return self.system_tokens + self.window_tokens + self.current_tokens


def _history_message(entry: Mapping[str, Any]) -> Message | None:
    """One history entry as a message (a loaded `Message` is one already), or None, with a
    warning, when it is malformed (Requirement: skip malformed entries)."""
    try:
        return Message.from_entry(entry)
    except (AttributeError, ValueError):
        # Log the shape only: the content is personal data.
        keys = sorted(str(key) for key in entry) if isinstance(entry, Mapping) else []
        role = entry.get("role") if isinstance(entry, Mapping) else None
        logger.warning("Skipping malformed history entry", extra={"entry_keys": keys, "role": str(role)[:20]})
        return None


def _text(message: AIMessageChunk | None) -> str:
    return "" if message is None else str(message.text)


class BaseOnboardingAgent(ABC):
    """An onboarding step's agent: one instance per turn, built on an immutable context."""

    agent_type: ClassVar[OnboardingAgentType]

    def __init__(self, context: OnboardingAgentContext, llm: BaseChatModel, limits: Limits = DEFAULT_LIMITS) -> None:
        """`limits` (from the settings) bound the prompt: at most `window_max_messages` of the
        latest history messages go to the model (Requirement 3.5), within `token_budget`."""
        self.context = context
        self.llm = llm
        self.limits = limits.prompt
        self._limits = limits
        self.working = self._fresh_working_copy()
        self._plan: PromptPlan | None = None  # the turn's plan, once its messages are built
        self.produced: list[Message] = []
        """What this turn added after the user's message: tool calls, tool results, the reply."""
        self.input_tokens = self.output_tokens = 0  # the model's usage over every try of the turn
        # The recalled messages have their own allowance, on top of the system prompt's.
        self.recall_lines = recall_lines(context.recalled, self.limits.recall_allowance)

    def _fresh_working_copy(self) -> WorkingCopy:
        state = self.context.onboarding_state(self.agent_type)
        return WorkingCopy(
            self.agent_type, state, self.context.profile, self._limits, source=self.context.message_source
        )

    def _prompt_facts(self, summary_lines: list[str]) -> PromptFacts:
        """The memory the prompt shows: as the turn's tools have left it so far (at the start of
        a turn, what was loaded)."""
        state, profile = self.working.state, self.working.profile
        waiting = state.waiting_for
        shown = self.context.show_profile  # the profile flag (docs/rollout.md)
        return PromptFacts(
            profile_lines=profile.render_lines() if shown else (),
            address_as=profile.address_as if shown else None,
            summary="\n".join(summary_lines) or None,
            waiting_for=waiting.field if waiting and waiting.step == self.agent_type else None,
            waiting_attempts=waiting.attempts if waiting else 0,
            skipped=state.skipped,
            onboarding_complete=state.completed_at is not None,
            memory_unavailable=self.context.memory_unavailable,
            returning_since=self.context.returning_since,
            single_prompt=self.context.single_prompt,
            recalled=self.recall_lines,
        )

    def get_system_prompt(self, allowance: int | None = None) -> str:
        """This step's instructions, what is known, the profile and the summary, within the
        allowance (the settings' system allowance unless a smaller one is given), and the recalled
        messages within their own.

        The summary is the only part that grows with the conversation, so when the prompt is over
        its allowance the summary's oldest lines go first.
        """
        ceiling = self.limits.system_allowance + recall_section_tokens(self.recall_lines)
        most = ceiling if allowance is None else min(allowance, ceiling)
        lines = (self.context.summary or "").splitlines()
        while True:
            prompt = render_system_prompt(self.agent_type, self.working.state.agent_context, self._prompt_facts(lines))
            if count_tokens(prompt) <= most or not lines:
                return prompt
            lines = lines[1:]

    def prompt_plan(self, message: str) -> PromptPlan:
        """System prompt, then the newest history that fits the budget, then `message`.

        Raises MessageOverBudgetError when the system prompt and `message` alone exceed the budget.
        """
        system = self.get_system_prompt()
        system_tokens = count_tokens(system) + MESSAGE_OVERHEAD_TOKENS
        current_tokens = count_tokens(message) + MESSAGE_OVERHEAD_TOKENS
        if system_tokens + current_tokens > self.limits.token_budget:
            raise MessageOverBudgetError(current_tokens, self.limits.token_budget - system_tokens)
        turns = [turn for entry in self.context.conversation_history if (turn := _history_message(entry))]
        available = self.limits.token_budget - system_tokens - current_tokens
        window = fit_window(turns, available, self.limits.window_messages)
        return PromptPlan(
            system=system,
            window=window,
            current=message,
            system_tokens=system_tokens,
            window_tokens=sum(message_tokens(turn) for turn in window),
            current_tokens=current_tokens,
            budget=self.limits.token_budget,
            left_out=len(turns) - len(window),
        )

    def _build_messages(self, message: str) -> list[BaseMessage]:
        """System prompt, the latest history within the budget (at most `window_max_messages`),
        then `message`. Always valid for Bedrock's Converse API: see `alternating_messages`."""
        plan = self.prompt_plan(message)
        self._plan = plan
        return [SystemMessage(content=plan.system), *alternating_messages(plan.window, message)]

    def _rebuilt_system(self) -> SystemMessage:
        """The system prompt again, from what the tools just saved ("call me Tom": this very reply
        says Tom). The turn's window stays; the prompt may grow only into what the budget left
        over, so the summary's oldest lines give way first, as in `get_system_prompt`."""
        plan = self._plan
        if plan is None:  # unreachable: the messages are built before any tool round
            raise RuntimeError("no prompt plan to rebuild the system prompt within")
        headroom = plan.budget - plan.total_tokens
        return SystemMessage(content=self.get_system_prompt(plan.system_tokens - MESSAGE_OVERHEAD_TOKENS + headroom))

    async def stream_response(self, message: str) -> AsyncIterator[str]:
        """The coach's reply to `message`, as text chunks in the order the model streams them.

        Tool calls run inside the turn: their results go back to the model, which then goes on
        with its reply (at most `max_tool_rounds` rounds). What the turn produced is in `produced`.
        """
        # Each call starts from the loaded state: a try retried after a tool round must not keep
        # the first try's tool calls or their effects, which its reply never saw.
        self.produced = []
        self.working = self._fresh_working_copy()
        messages = self._build_messages(message)
        # Without its memory the turn could not know what it would overwrite: it gets no tools.
        tools = [] if self.context.memory_unavailable else build_tools(self.working)
        by_name = {tool.name: tool for tool in tools}
        definitions = tool_definitions(self.agent_type, self.context.completed_at is not None)
        model = self.llm.bind_tools(list(definitions)) if tools else self.llm
        said = ""
        for round_number in range(self.limits.max_tool_rounds + 1):
            chunks: list[AIMessageChunk] = []
            separate = bool(said) and not said[-1].isspace()
            async for chunk in model.astream(messages):
                chunks.append(chunk)  # type: ignore[arg-type]
                text = str(chunk.text)
                if text:
                    if separate:
                        text, separate = " " + text, False
                    said += text
                    yield text
            # Merged once at the end: adding each chunk to the ones before re-merges them all every time.
            gathered = (chunks[0] + chunks[1:]) if chunks else None
            if gathered is not None and gathered.usage_metadata:
                self.input_tokens += gathered.usage_metadata.get("input_tokens", 0)
                self.output_tokens += gathered.usage_metadata.get("output_tokens", 0)
            calls = list(gathered.tool_calls) if gathered is not None else []
            text = _text(gathered)
            if not calls or round_number == self.limits.max_tool_rounds:
                if not is_blank(text):
                    self.produced.append(Message("assistant", text))
                break
            stored_calls = tuple(ToolCall(str(c["id"]), c["name"], dict(c["args"])) for c in calls)
            self.produced.append(Message("assistant", text, tool_calls=stored_calls))
            messages.append(AIMessage(content=text, tool_calls=calls))
            for call in calls:
                result = await self._run_tool(by_name, call["name"], call["args"])
                self.produced.append(Message("tool", result, tool_call_id=str(call["id"])))
                messages.append(ToolMessage(content=result, tool_call_id=str(call["id"])))
            messages[0] = self._rebuilt_system()
        self.working.finish_turn()

    @staticmethod
    async def _run_tool(by_name: Mapping[str, Any], name: str, args: Mapping[str, Any]) -> str:
        tool = by_name.get(name)
        if tool is None:
            logger.warning("Model called an unknown tool", extra={"tool": name[:64]})
            return '{"error": "no such tool"}'
        try:
            return str(await tool.ainvoke(dict(args)))
        except Exception as error:  # a bad call is answered, so the model can correct itself
            logger.warning("Tool call rejected", extra={"tool": name, "reason": type(error).__name__})
            return '{"error": "invalid arguments for this tool"}'
