"""What the Bedrock emulator records of each request, and the faults a test queues for the next ones."""

from dataclasses import dataclass
from typing import Any, Literal

from infra.local.bedrock_emulator.coach import Turn
from infra.local.bedrock_emulator.rules import message_text


@dataclass(frozen=True)
class Fault:
    """What the next request meets: `throttle` answers 429 before any event; `unavailable` answers
    503 ServiceUnavailableException; `stream_error` sends `modelStreamErrorException` after
    `after_chunks` text chunks, and `stream_throttle` a `throttlingException` event there (Bedrock
    can refuse inside a stream that already opened); `empty_reply` streams a complete message with
    no text (a model may do that, e.g. when it stops at once); `none` answers normally (to queue a
    fault for a later request)."""

    kind: Literal["throttle", "unavailable", "stream_error", "stream_throttle", "empty_reply", "none"]
    after_chunks: int = 0


@dataclass(frozen=True)
class RecordedRequest:
    model_id: str
    operation: str
    body: dict[str, Any]

    @property
    def system_text(self) -> str:
        return "\n".join(str(block.get("text", "")) for block in self.body.get("system", []))

    @property
    def conversation(self) -> list[Turn]:
        return [Turn(message["role"], message_text(message)) for message in self.body.get("messages", [])]
