"""Turn stored history into a message sequence Bedrock's Converse API accepts (Property 8).

Bedrock rejects, for Anthropic models, a conversation that starts with an assistant message,
has two messages of the same role in a row, or carries an empty text block. Stored history can
legitimately contain each of those (a reply that failed leaves two user turns in a row; a window
cut can start on a reply), so the sequence is normalised here rather than trusted.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from langchain_core.messages import AIMessage, HumanMessage

from onboarding.text import is_blank

Role = Literal["user", "assistant"]
ChatTurn = HumanMessage | AIMessage


@dataclass(frozen=True)
class HistoryTurn:
    role: Role
    content: str


def _as_message(role: Role, texts: list[str]) -> ChatTurn:
    # One text stays a plain string. Merged turns become one text block each, so that every
    # original message is kept whole and byte-exact instead of being glued into a new string.
    content: str | list[str | dict[str, str]]
    content = texts[0] if len(texts) == 1 else [{"type": "text", "text": text} for text in texts]
    return HumanMessage(content=content) if role == "user" else AIMessage(content=content)


def alternating_messages(history: Iterable[HistoryTurn], current_message: str) -> list[ChatTurn]:
    """History plus the current user message as user/assistant turns that strictly alternate.

    - blank turns are dropped;
    - consecutive turns of the same role are merged into one message (content kept whole);
    - the sequence starts with a user turn (leading assistant turns are dropped);
    - it ends with a user turn whose last text is `current_message`.
    """
    if is_blank(current_message):
        raise ValueError("the current message must contain some text")
    runs: list[tuple[Role, list[str]]] = []
    for turn in [*history, HistoryTurn("user", current_message)]:
        if is_blank(turn.content):
            continue
        if runs and runs[-1][0] == turn.role:
            runs[-1][1].append(turn.content)
        elif runs or turn.role == "user":
            runs.append((turn.role, [turn.content]))
    return [_as_message(role, texts) for role, texts in runs]


def message_texts(message: ChatTurn) -> list[str]:
    """The text blocks of a message built by `alternating_messages`, in order."""
    if isinstance(message.content, str):
        return [message.content]
    return [block["text"] for block in message.content if isinstance(block, dict) and "text" in block]
