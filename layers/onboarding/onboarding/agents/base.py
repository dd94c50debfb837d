"""Owns what every onboarding agent shares: system prompt, budgeted messages, streaming with tools."""

from abc import ABC
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from aws_lambda_powertools import Logger
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, SystemMessage, ToolMessage

from onboarding.config import DEFAULT_LIMITS, Limits
from onboarding.context import OnboardingAgentContext
from onboarding.llm.converse import alternating_messages
from onboarding.llm.prompt import FittedPrompt, PromptFacts, fit_system_prompt
from onboarding.llm.sections import PromptSection, recall_lines, recall_section_tokens
from onboarding.llm.tools import build_tools, tool_definitions
from onboarding.llm.working_copy import WorkingCopy
from onboarding.memory.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens
from onboarding.memory.window import fit_window, message_tokens
from onboarding.model.errors import MessageOverBudgetError
from onboarding.model.messages import Message, ToolCall
from onboarding.model.normalization import is_blank
from onboarding.model.state import OnboardingAgentType

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
    # The system prompt part by part, and how many items of each kind of memory gave way to fit
    # its allowance (llm/prompt.py; empty when all of it fitted).
    system_sections: tuple[PromptSection, ...] = ()
    system_left_out: Mapping[str, int] = field(default_factory=dict)

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
        latest history messages go to the model, within `token_budget`."""
        self.context = context
        self.llm = llm
        self.limits = limits.prompt
        self._limits = limits
        self.working = self._fresh_working_copy()
        self._plan: PromptPlan | None = None  # the turn's plan, once its messages are built
        self.produced: list[Message] = []
        """What this turn added after the user's message: tool calls, tool results, the reply."""
        self.input_tokens = self.output_tokens = 0  # the model's usage over every try of the turn
        # A model call under way whose usage has not come (Bedrock reports it at the stream's end):
        # our estimate of its input, and of its output so far. A turn cut off mid-reply still spent them.
        self._in_flight: list[int] | None = None
        # The recalled messages have their own allowance, on top of the system prompt's.
        self.recall_lines = recall_lines(context.recalled, self.limits.recall_allowance)

    def spent(self) -> tuple[int, int, bool]:
        """Input and output tokens of the turn's model calls so far, and whether some are our
        estimate: a call cut off mid-reply (the client went away, the stream broke) never gets
        Bedrock's count, so its prompt's estimate and the estimate of what it said count instead."""
        if self._in_flight is None:
            return self.input_tokens, self.output_tokens, False
        return self.input_tokens + self._in_flight[0], self.output_tokens + self._in_flight[1], True

    def _fresh_working_copy(self) -> WorkingCopy:
        state = self.context.onboarding_state(self.agent_type)
        return WorkingCopy(
            self.agent_type, state, self.context.profile, self._limits, source=self.context.message_source
        )

    def _prompt_facts(self) -> PromptFacts:
        """The memory the prompt shows: as the turn's tools have left it so far (at the start of
        a turn, what was loaded)."""
        state, profile = self.working.state, self.working.profile
        waiting = state.waiting_for
        shown = self.context.show_profile  # the profile flag (docs/rollout.md)
        return PromptFacts(
            profile_lines=profile.render_lines() if shown else (),
            address_as=profile.address_as if shown else None,
            summary=self.context.summary or None,
            waiting_for=waiting.field if waiting and waiting.step == self.agent_type else None,
            waiting_attempts=waiting.attempts if waiting else 0,
            skipped=state.skipped,
            onboarding_complete=state.completed_at is not None,
            memory_unavailable=self.context.memory_unavailable,
            returning_since=self.context.returning_since,
            single_prompt=self.context.single_prompt,
            recalled=self.recall_lines,
        )

    def fitted_system_prompt(self, allowance: int | None = None) -> FittedPrompt:
        """This step's instructions, what is known, the profile and the summary, fitted to the
        allowance (the settings' system allowance unless a smaller one is given): what is kept
        first and what gives way is llm/sections.py's; what gave way is named in one line,
        with the tools that read it. Deterministic: the same memory gives the same prompt."""
        # The recalled messages' section is shown whole, on top of the system allowance: its lines
        # were fitted to its own (RECALL_MAX_TOKENS) in __init__.
        ceiling = self.limits.system_allowance + recall_section_tokens(self.recall_lines)
        most = ceiling if allowance is None else min(allowance, ceiling)
        return fit_system_prompt(self.agent_type, self.working.state.agent_context, self._prompt_facts(), most)

    def get_system_prompt(self, allowance: int | None = None) -> str:
        """The fitted system prompt's text (see `fitted_system_prompt`)."""
        return self.fitted_system_prompt(allowance).text

    def prompt_plan(self, message: str) -> PromptPlan:
        """System prompt, then the newest history that fits the budget, then `message`.

        The system prompt always fits its allowance, and the settings keep the largest message the
        up-front check accepts within what the allowance leaves, so a message that passed that check
        always fits. MessageOverBudgetError, when the system prompt and `message` alone exceed the
        budget, is left for settings built around that check (it cannot happen with `Limits`).
        """
        fitted = self.fitted_system_prompt()
        system = fitted.text
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
            system_sections=fitted.sections,
            system_left_out=fitted.left_out,
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
        over, fitted as in `fitted_system_prompt`."""
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
            prompt_tokens = self._round_prompt_tokens()
            async for chunk in model.astream(messages):
                if not chunks:  # the model is answering: it read the prompt
                    self._in_flight = [prompt_tokens, 0]
                chunks.append(chunk)  # type: ignore[arg-type]
                text = str(chunk.text)
                if text:
                    if separate:
                        text, separate = " " + text, False
                    said += text
                    self._in_flight = [prompt_tokens, (self._in_flight or [0, 0])[1] + count_tokens(text)]
                    yield text
            # Merged once at the end: adding each chunk to the ones before re-merges them all every time.
            gathered = (chunks[0] + chunks[1:]) if chunks else None
            self._settle_usage(gathered)
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

    def answer_reset(self, reply: str) -> None:
        """A reset command's answer, said by us, not the model: `reply` is what the turn produced,
        and a new conversation starts (the waited-for field goes with the old one; after a
        completed onboarding, onboarding starts again)."""
        self.produced = [Message("assistant", reply)]
        self.working.start_new_conversation()

    def _round_prompt_tokens(self) -> int:
        """Our estimate of what a model call of this turn reads: the planned prompt and the tool
        exchange so far (the tool definitions are not in the budget, nor here)."""
        planned = self._plan.total_tokens if self._plan is not None else 0
        return planned + sum(message_tokens(message) for message in self.produced)

    def _settle_usage(self, gathered: AIMessageChunk | None) -> None:
        """A call that finished: Bedrock's count of its tokens (our estimate if it sent none)."""
        usage = gathered.usage_metadata if gathered is not None else None
        if usage:
            self.input_tokens += usage.get("input_tokens", 0)
            self.output_tokens += usage.get("output_tokens", 0)
        elif self._in_flight is not None:
            self.input_tokens += self._in_flight[0]
            self.output_tokens += self._in_flight[1]
        self._in_flight = None

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
