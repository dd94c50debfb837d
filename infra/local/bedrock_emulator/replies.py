"""What the emulator's replies look like on Bedrock's wire: Converse's answer, ConverseStream's content
events (text in word-sized deltas, each tool call's input JSON in fragments), the stop reason, the
usage, and the exception events a stream fault sends."""

import json
import re
from typing import Any

from infra.local.bedrock_emulator.coach import CoachReply

_CHUNK = re.compile(r"\S+\s*|\s+")
# Bedrock streams a tool call's input as pieces of its JSON text; a few pieces per call make sure
# clients join them rather than expect one.
_INPUT_FRAGMENT_CHARS = 24

STREAM_FAULTS = {
    "stream_error": ("modelStreamErrorException", "The model stream failed."),
    "stream_throttle": ("throttlingException", "Too many tokens, please wait before trying again."),
}


def stop_reason(reply: CoachReply) -> str:
    return "tool_use" if reply.tool_calls else "end_turn"


def content_events(reply: CoachReply) -> list[tuple[str, dict[str, Any]]]:
    """The content events of ConverseStream: the text block (index 0, deltas only, as Bedrock sends
    text), then per tool call a `contentBlockStart` naming it, its input JSON in fragments, and a
    `contentBlockStop`."""
    events: list[tuple[str, dict[str, Any]]] = []
    index = 0
    if reply.text or not reply.tool_calls:
        events += [
            ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}})
            for piece in _CHUNK.findall(reply.text)
        ]
        events.append(("contentBlockStop", {"contentBlockIndex": 0}))
        index = 1
    for call in reply.tool_calls:
        start = {"toolUse": {"toolUseId": call.tool_use_id, "name": call.name}}
        events.append(("contentBlockStart", {"contentBlockIndex": index, "start": start}))
        text = json.dumps(call.input, ensure_ascii=False)
        events += [
            ("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {"input": fragment}}})
            for fragment in (text[at : at + _INPUT_FRAGMENT_CHARS] for at in range(0, len(text), _INPUT_FRAGMENT_CHARS))
        ]
        events.append(("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    return events


def usage_of(reply: CoachReply, body: dict[str, Any]) -> dict[str, int]:
    # A rough count (4 characters a token) is enough for an emulator's usage report. It reads this
    # request's body, not the emulator's last one, which a concurrent request may have replaced.
    input_tokens = max(1, len(json.dumps(body)) // 4)
    output_text = reply.text + "".join(json.dumps(call.input) for call in reply.tool_calls)
    output_tokens = max(1, len(output_text) // 4)
    return {"inputTokens": input_tokens, "outputTokens": output_tokens, "totalTokens": input_tokens + output_tokens}


def converse_answer(reply: CoachReply, usage: dict[str, int]) -> dict[str, Any]:
    """Converse's (not streamed) answer: the text block, then a toolUse block per tool call."""
    content: list[dict[str, Any]] = [{"text": reply.text}] if reply.text or not reply.tool_calls else []
    content += [
        {"toolUse": {"toolUseId": call.tool_use_id, "name": call.name, "input": call.input}}
        for call in reply.tool_calls
    ]
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_reason(reply),
        "usage": usage,
        "metrics": {"latencyMs": 1},
    }
