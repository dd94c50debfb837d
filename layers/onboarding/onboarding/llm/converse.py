"""Owns Converse normalisation: stored history as a message sequence Bedrock accepts (Property 8).

Bedrock rejects, for Anthropic models, a conversation that starts with an assistant message,
has two messages of the same role in a row, carries an empty text block, has a tool result that
does not answer a tool call of the assistant message right before it, or a tool call left without
its result. Stored history can legitimately contain each of those (a reply that failed leaves two
user turns in a row; a window cut can start on a reply or on a tool result), so the sequence is
normalised here rather than trusted.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from onboarding.model.immutable import thaw
from onboarding.model.messages import Message, ToolCall
from onboarding.model.normalization import is_blank


@dataclass
class _Run:
    """Consecutive turns of one Converse role: texts, and tool calls or tool results."""

    role: Literal["user", "assistant"]
    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    results: list[Message] = field(default_factory=list)


def _paired(turns: Sequence[Message]) -> list[Message]:
    """Tool calls kept only with their results right after them, and results only after their call;
    each call id at most once in the whole conversation, with one result. A history that is
    already malformed (a reply stored twice, say) must never make Bedrock refuse every later turn."""
    kept: list[Message] = []
    seen_ids: set[str] = set()
    index = 0
    while index < len(turns):
        turn = turns[index]
        index += 1
        if turn.role == "tool":
            continue  # a result whose call is not right before it (the window started after the call)
        if turn.role == "assistant" and turn.tool_calls:
            results: dict[str, Message] = {}
            while index < len(turns) and turns[index].role == "tool":
                result = turns[index]
                results.setdefault(result.tool_call_id or "", result)  # a second result of a call goes
                index += 1
            calls: list[ToolCall] = []
            for call in turn.tool_calls:
                if call.call_id in results and call.call_id not in seen_ids:
                    seen_ids.add(call.call_id)
                    calls.append(call)
            kept.append(Message("assistant", turn.content, tool_calls=tuple(calls)))
            kept.extend(results[call.call_id] for call in calls)
            continue
        kept.append(turn)
    return kept


def _runs(turns: Iterable[Message]) -> list[_Run]:
    runs: list[_Run] = []
    for turn in turns:
        role: Literal["user", "assistant"] = "assistant" if turn.role == "assistant" else "user"
        if turn.role != "tool" and not turn.tool_calls and is_blank(turn.content):
            continue
        if not runs or runs[-1].role != role:
            if not runs and (role != "user" or turn.role == "tool"):
                continue  # Converse wants a user's own words first
            runs.append(_Run(role))
        run = runs[-1]
        if turn.role == "tool":
            run.results.append(turn)
        else:
            if not is_blank(turn.content):
                run.texts.append(turn.content)
            run.calls.extend(turn.tool_calls)
    return runs


def _text_content(texts: list[str]) -> str | list[str | dict[str, Any]]:
    # One text stays a plain string. Merged turns become one text block each, so that every
    # original message is kept whole and byte-exact instead of being glued into a new string.
    return texts[0] if len(texts) == 1 else [{"type": "text", "text": text} for text in texts]


def _as_messages(run: _Run) -> list[BaseMessage]:
    if run.role == "assistant":
        calls = [{"id": c.call_id, "name": c.name, "args": thaw(c.args), "type": "tool_call"} for c in run.calls]
        return [AIMessage(content=_text_content(run.texts) if run.texts else "", tool_calls=calls)]
    # Tool results first: Anthropic models want them at the start of the user message.
    messages: list[BaseMessage] = [
        ToolMessage(content=r.content or "(empty)", tool_call_id=r.tool_call_id or "") for r in run.results
    ]
    if run.texts:
        messages.append(HumanMessage(content=_text_content(run.texts)))
    return messages


def alternating_messages(history: Iterable[Message], current_message: str) -> list[BaseMessage]:
    """History plus the current user message as Converse-valid user/assistant turns.

    - blank turns are dropped; tool calls stay only with their results, results only after their call;
    - consecutive turns of the same role are merged into one message (content kept whole);
    - the sequence starts with a user's own text (leading assistant turns and results are dropped);
    - it ends with a user turn whose last text is `current_message`.
    """
    if is_blank(current_message):
        raise ValueError("the current message must contain some text")
    turns = [*_paired(list(history)), Message("user", current_message)]
    return [message for run in _runs(turns) for message in _as_messages(run)]
