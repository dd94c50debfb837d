"""Owns the baselines the benchmark sets beside our memory, all built from the ORIGINAL transcript
(the conversation's own lines, never a reply our coach made: those quote our saved answers and
would lend them our memory), as it stands when the questions are asked:

- `window-15`: the seed's last 15 messages;
- `full-cut`: the whole history, cut to the prompt's token budget (newest kept);
- `langchain-window`: LangChain's `trim_messages` keeping the last 20 messages (a 10-exchange window);
- `all-history`: everything said, uncut: the ceiling no memory can pass (what evidence is missing
  even here is missing from the data).
"""

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, trim_messages

from infra.bench.memory_benchmark.dataset import Conversation
from onboarding.memory.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens

SEED_WINDOW = 15
LANGCHAIN_WINDOW = 20
BASELINES = ("window-15", "full-cut", "langchain-window")
CEILING = "all-history"


def transcript(conversation: Conversation) -> list[BaseMessage]:
    """The conversation as said: the client's turns as the human's, the other party's as the AI's."""
    return [
        HumanMessage(d.content) if d.speaker == conversation.client else AIMessage(d.content)
        for s in conversation.sessions
        for d in s.dialogs
    ]


def tokens(messages: Sequence[BaseMessage]) -> int:
    """What a prompt of `messages` costs, counted as the prompt's budget counts it."""
    return sum(count_tokens(str(m.content)) + MESSAGE_OVERHEAD_TOKENS for m in messages) + MESSAGE_OVERHEAD_TOKENS


def _cut(messages: Sequence[BaseMessage], budget: int) -> list[BaseMessage]:
    kept: list[BaseMessage] = []
    used = MESSAGE_OVERHEAD_TOKENS
    for message in reversed(messages):
        cost = count_tokens(str(message.content)) + MESSAGE_OVERHEAD_TOKENS
        if used + cost > budget:
            break
        kept.insert(0, message)
        used += cost
    return kept


def windows(history: Sequence[BaseMessage], question: str, budget: int) -> dict[str, list[BaseMessage]]:
    """What each baseline (and the ceiling) would put before `question`."""
    asked = [HumanMessage(question)]
    return {
        "window-15": list(history[-SEED_WINDOW:]),
        "full-cut": _cut(history, budget - tokens(asked)),
        "langchain-window": trim_messages(
            list(history), strategy="last", token_counter=len, max_tokens=LANGCHAIN_WINDOW, start_on="human"
        ),
        CEILING: list(history),
    }
