"""Owns the one message type used from the table to the model: `Message`, with its `ToolCall`s.

A stored message, a history entry in an agent's context and a message in the prompt's window are
the same `Message`. It also reads as the plain `{"role": ..., "content": ...}` mapping view (the
`conversation_history` entries of an agent's context), so the context holds the loaded messages themselves, not copies.
"""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal

from onboarding.model.immutable import deep_freeze, thaw

Role = Literal["user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("user", "assistant", "tool")


@dataclass(frozen=True)
class ToolCall:
    """A tool the model called inside a turn: Converse's `toolUse` block."""

    call_id: str
    name: str
    args: Mapping[str, Any]

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", deep_freeze(self.args))

    def as_entry(self) -> dict[str, Any]:
        return {"id": self.call_id, "name": self.name, "args": thaw(self.args)}


@dataclass(frozen=True, eq=False)
class Message(Mapping[str, Any]):
    """One message. An assistant message may carry tool calls (its text may then be empty); a
    `tool` message is the result of the call `tool_call_id` names. `message_id` sorts by time;
    a message the store has not written yet has no id or time."""

    role: Role
    content: str
    message_id: str = ""
    created_at: datetime | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    _keys: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)
    __frozen_value__: ClassVar[bool] = True  # deep_freeze keeps it as it is

    def __post_init__(self) -> None:
        keys = ["role", "content"]
        if self.tool_calls:
            keys.append("tool_calls")
        if self.tool_call_id is not None:
            keys.append("tool_call_id")
        object.__setattr__(self, "_keys", tuple(keys))

    # The plain mapping view: role, content, and tool_calls / tool_call_id when present.
    def __getitem__(self, key: str) -> Any:
        if key not in self._keys:
            raise KeyError(key)
        if key == "tool_calls":
            return tuple(deep_freeze(call.as_entry()) for call in self.tool_calls)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def _fields(self) -> tuple[Any, ...]:
        return (self.role, self.content, self.message_id, self.created_at, self.tool_calls, self.tool_call_id)

    def __eq__(self, other: object) -> bool:
        """Two messages are equal field by field; a message equals a mapping of the same view
        (so a loaded message equals the plain `{"role": ..., "content": ...}` dict)."""
        if isinstance(other, Message):
            return self._fields() == other._fields()
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.message_id, self.role, self.content))

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> "Message":
        """A history entry (a plain dict, or a `Message`) as a message; ValueError when it is
        not one (unknown role, content not text, a tool result without its call id)."""
        if isinstance(entry, Message):
            return entry
        role, content = entry.get("role"), entry.get("content")
        if role not in ROLES or not isinstance(content, str):
            raise ValueError("a history entry needs a known role and text content")
        try:
            calls = tuple(ToolCall(str(c["id"]), str(c["name"]), c["args"]) for c in entry.get("tool_calls") or ())
        except (KeyError, TypeError) as error:
            raise ValueError("a tool call needs an id, a name and its arguments") from error
        tool_call_id = entry.get("tool_call_id")
        if role == "tool" and not isinstance(tool_call_id, str):
            raise ValueError("a tool result needs its call id")
        return cls(role=role, content=content, tool_calls=calls, tool_call_id=tool_call_id)
