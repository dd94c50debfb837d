"""Owns the API's JSON shapes: requests, responses and the error body, as the OpenAPI document shows them."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class ErrorBody(BaseModel):
    error: str = Field(description="A stable, machine-readable code.")
    message: str = Field(description="What went wrong, for people.")
    details: list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    message: str = Field(description="What the user said.")
    client_message_id: str | None = Field(
        default=None,
        alias="clientMessageId",
        pattern=r"^[A-Za-z0-9_.:-]{1,128}$",
        description=(
            "The app's own id for this message. Sending the same id again (a retry) stores nothing new: "
            "the stored reply is returned, or the stored message is answered if the first try did not finish. "
            "While the first try is still being answered, a retry gets 409 `in_progress` with `Retry-After` "
            "(a second or so): poll, sending it again after each `Retry-After`, until the reply comes (200)."
        ),
    )


class CamelModel(BaseModel):
    """The API's JSON is camelCase; the code stays snake_case."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class ChatReply(CamelModel):
    reply: str
    user_message_id: str
    assistant_message_id: str | None = Field(description="None when the model's reply was empty (nothing stored).")


class HistoryMessage(CamelModel):
    id: str
    role: str
    content: str
    created_at: datetime


class HistoryResponse(CamelModel):
    messages: list[HistoryMessage] = Field(description="Newest first.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; absent on the last page.")


class PhoneLink(CamelModel):
    code: str = Field(description="Text `LINK <code>` from the phone to link it; works once.")
    expires_at: datetime


class PhonesResponse(BaseModel):
    phones: list[str] = Field(description="E.164 numbers whose texts continue this user's conversation.")


class DeletedCounts(CamelModel):
    messages: int
    state_items: int = Field(description="Onboarding state, profile and conversation summary.")
    phone_numbers: int = Field(description="Phone numbers unlinked (a number re-linked to someone else stays).")
    dedupe_records: int = Field(description="Records of which message a client or SMS message id produced.")
    link_codes: int = Field(description="Phone-link codes not used yet.")
    other_items: int
    check_in_schedules: int = Field(default=0, description="The user's check-in schedule (EventBridge Scheduler).")


class CheckInsResponse(CamelModel):
    scheduled: bool = Field(description="Whether the user has a check-in schedule (from their scheduling answers).")
    days: list[str] = Field(default_factory=list, description="Weekdays, MON to SUN.")
    at: str | None = Field(default=None, description="Local time, HH:MM.")
    time_zone: str | None = Field(default=None, description="IANA time zone the time is in.")
    channel: str | None = Field(default=None, description="sms, or app (found with GET /history).")
    paused: bool = Field(default=False, description="Paused by STOP (or an opt-out) until START.")
    next_at: str | None = Field(default=None, description="The next check-in, ISO 8601 with the offset.")


class KeptCounts(CamelModel):
    rate_counters: int = Field(
        description="Rate-limit counters: only how many messages were sent in a window; they expire within the hour."
    )


class ErasureResponse(CamelModel):
    deleted: DeletedCounts
    total: int = Field(description="Items deleted.")
    kept: KeptCounts


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody} for status in (400, 401, 409, 413, 429, 502, 503)
}
SSE_DESCRIPTION = (
    'With `Accept: text/event-stream`: one `chunk` event per piece of the reply (`{"text": ...}`), then '
    '`done` (`{"userMessageId", "assistantMessageId"}`), or `error` (`{"error", "message", '
    '"userMessageId"}`) if the model fails mid-reply; the error `coach_unavailable` (with `retryAfter`, in '
    "seconds) means the model has been failing and was not called: the message is saved."
)
