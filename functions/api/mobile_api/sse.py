"""Owns how `POST /chat` streams a reply as Server-Sent Events: the Accept header that asks for
it, and the events: `chunk` for each piece of the reply, then `done` or `error` (always one of
them, whatever failed). The fold runs after `done`, before the stream, and the invocation, ends.
See docs/decisions/0006-streaming-with-lambda-web-adapter.md."""

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi.sse import format_sse_event

from onboarding.turn.run import Turn

from .errors import HANDLED, INTERNAL_ERROR, failure_of, log_failure
from .log import logger


def accepts_event_stream(accept: str | None) -> bool:
    """True when the Accept header names text/event-stream with a non-zero quality."""
    for media_range in (accept or "").split(","):
        media_type, *params = (part.strip() for part in media_range.split(";"))
        if media_type.lower() == "text/event-stream":
            q = next((p.split("=", 1)[1] for p in params if p.replace(" ", "").lower().startswith("q=")), "1")
            try:
                return float(q) > 0
            except ValueError:
                return False
    return False


def sse_event(event: str, data: dict[str, Any]) -> bytes:
    return format_sse_event(event=event, data_str=json.dumps(data, ensure_ascii=False))


async def stream_events(turn: Turn) -> AsyncIterator[bytes]:
    """The turn's reply as SSE events."""
    user_message_id = turn.user_message.message_id
    try:
        async for chunk in turn:
            yield sse_event("chunk", {"text": chunk})
    except Exception as error:  # the stream always ends with `done` or `error`, whatever failed
        if isinstance(error, HANDLED):
            log_failure(error)
            failure = failure_of(error, message_kept=True)
        else:
            logger.exception("Unexpected error while streaming the reply")
            failure = INTERNAL_ERROR
        event = failure.body() | {"userMessageId": user_message_id}
        if failure.retry_after_s is not None:
            event["retryAfter"] = failure.retry_after_s
        yield sse_event("error", event)
        return
    if turn.result is None:  # unreachable: a completed stream always has its result
        raise RuntimeError("the turn finished without a result")
    assistant = turn.result.assistant_message
    yield sse_event(
        "done",
        {"userMessageId": user_message_id, "assistantMessageId": assistant.message_id if assistant else None},
    )
    # The client has the whole reply; the fold runs now, before the stream (and the invocation) ends.
    await turn.fold_summary()
