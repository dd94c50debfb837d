"""The JSON shapes of the console's routes, as its OpenAPI document shows them (camelCase on the wire)."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class CamelModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class SessionInfo(CamelModel):
    mode: Literal["local", "aws"] = Field(description="`local`: the embedded local stack; `aws`: a real table.")
    read_only: bool = Field(description="True against AWS: no chat, SMS, link or erase from the console.")
    personal_data: bool = Field(description="False: every text the user said or told is shown as its length only.")
    table_name: str
    token_budget: int
    system_allowance: int
    window_max_messages: int
    default_user: str = Field(description="The user the page opens on: the one `infra.chat` talks as by default.")


class UserList(CamelModel):
    users: list[str] = Field(description="User ids with data in the local table (never listed against AWS).")


class Provenance(CamelModel):
    """Where a remembered value came from: the tool call that saved it, and what the user had said."""

    tool: str = Field(description="The tool call that saved it (`save_<step>` or `remember_fact`).")
    tool_message_id: str
    saved_at: datetime | None
    user_message_id: str | None = Field(description="The user message the turn answered.")
    user_said: str | None = Field(description="That message's text (redacted unless personal data is shown).")


class EarlierValue(CamelModel):
    """A value the answer had before the client corrected it."""

    value: str = Field(description="The value as the client gave it (redacted unless personal data is shown).")
    said_at: datetime | None = Field(description="When the client said it (None: saved before answers had a time).")
    replaced_at: datetime | None = Field(description="When the client gave the value that replaced it.")


class Answer(CamelModel):
    step: str
    field: str
    question: str
    value: str | None = Field(description="The current value, as plain text. None: not collected yet.")
    said_at: datetime | None = Field(description="When the client said the current value.")
    said_in: str | None = Field(description="The id of the client's message that gave the current value.")
    earlier: list[EarlierValue] = Field(description="Values it had before a correction, oldest first.")
    skipped: bool = Field(description="The client could not say; the coach does not ask again.")
    provenance: Provenance | None = Field(description="None when its tool call is no longer among the messages read.")


class ProfileEntry(CamelModel):
    field: str
    value: str
    provenance: Provenance | None


class WaitingFor(CamelModel):
    step: str
    field: str
    attempts: int


class CheckInView(CamelModel):
    schedule: str = Field(description="When and how, e.g. 'MON at 09:00 (Europe/Berlin), by SMS'.")
    paused: bool = Field(description="Paused by STOP until START.")
    next_at: datetime | None = Field(description="The next check-in (none while paused).")


class MemoryView(CamelModel):
    user_id: str
    step: str = Field(description="The current onboarding step.")
    step_title: str
    completed_at: datetime | None
    waiting_for: WaitingFor | None
    answers: list[Answer]
    profile: list[ProfileEntry]
    summary: str | None
    summary_through: str | None = Field(description="The last message id the summary covers.")
    phones: list[str]
    check_in: CheckInView | None = Field(default=None, description="The user's check-in schedule, if any.")
    state_version: int
    profile_version: int
    messages_read: int = Field(description="Stored messages read to find the provenance (newest first).")


class SectionView(CamelModel):
    kind: Literal[
        "instructions", "profile", "collected_answers", "waiting_for", "recap", "summary", "left_out", "recall"
    ]
    title: str
    text: str
    tokens: int = Field(description="This part's estimated tokens (counted on its own).")


class ToolCallView(CamelModel):
    name: str
    args: str = Field(description="The arguments as JSON (redacted unless personal data is shown).")


class WindowMessage(CamelModel):
    message_id: str
    role: str
    text: str
    tool_calls: list[ToolCallView]
    tokens: int = Field(description="What the budget counts for it (memory.window.message_tokens).")


class LeftOut(CamelModel):
    message_id: str
    role: str
    text: str
    reason: Literal["folded_into_summary", "before_conversation_start", "over_budget"]
    detail: str


class PlanView(CamelModel):
    """What the model got (or would get) for one message: numbers exactly as `infra.inspect_prompt` prints them."""

    step: str
    budget: int
    total_tokens: int
    system_tokens: int = Field(description="The whole system prompt's count plus the message framing.")
    window_tokens: int
    current_tokens: int
    system_allowance: int
    window_max_messages: int
    window_available_tokens: int = Field(description="What the budget left for the window.")
    system: str = Field(description="The system prompt exactly as sent (redacted unless personal data is shown).")
    sections: list[SectionView]
    summary_lines_dropped: int = Field(description="Oldest summary lines cut to keep the prompt in its allowance.")
    window: list[WindowMessage]
    current: str
    left_out: list[LeftOut]
    left_out_by_budget: int = Field(description="The plan's own count of candidates the budget could not hold.")
    loaded_messages: int
    conversation_start: int = Field(description="Index of the current conversation's first loaded message.")


class ModelRequest(CamelModel):
    """One request the model received, as it went over the wire (botocore's parameters)."""

    operation: str
    system: str
    messages: list[dict[str, object]]
    tools: list[str]


class DynamoDBFigures(CamelModel):
    requests: int
    by_operation: dict[str, int]
    failed: int
    capacity_units: float = Field(description="Summed from the table's ConsumedCapacity answers.")
    requests_without_capacity: int = Field(
        description="Requests the table answered without a ConsumedCapacity figure (moto gives none for transactions)."
    )


class TokenFigures(CamelModel):
    input: int
    output: int
    model_calls: int = Field(description="Model calls: each tool round is one, the summary fold another.")


class TurnFigures(CamelModel):
    first_token_ms: float | None = Field(description="Server side: from the request to the first chunk.")
    turn_ms: float | None = Field(description="Server side: from the request to the end of the response.")
    dynamodb: DynamoDBFigures
    tokens: TokenFigures
    cost_usd: float | None = Field(
        description=(
            "The model's tokens at the list prices of infra/local/prices.py (None: no model call, or no price)."
        )
    )
    cost_note: str


class TurnRecord(CamelModel):
    turn_id: str
    user_id: str
    channel: Literal["app", "sms"]
    started_at: datetime
    finished: bool
    status: str = Field(description="`done`, `no_turn` (answered without the model), or the error code.")
    message: str
    reply: str
    plan: PlanView | None = Field(description="None when no plan could be made (an unreadable or too long message).")
    plan_matches_request: bool | None = Field(
        description="Whether the first model request's system prompt is the plan's, byte for byte (None: no call)."
    )
    model_requests: list[ModelRequest]
    memory_before: MemoryView | None
    memory_after: MemoryView | None
    changed: list[str] = Field(description="Paths of what the turn changed in the memory view.")
    note: str | None = Field(description="Why part of the record is missing (the turn itself went on).")
    figures: TurnFigures


class TurnList(CamelModel):
    turns: list[TurnRecord] = Field(description="This console's recorded turns for the user, oldest first.")


class SmsRequest(CamelModel):
    from_phone: str = Field(alias="from", pattern=r"^\+[1-9]\d{6,14}$", description="The sender's E.164 number.")
    text: str
    user_id: str | None = Field(default=None, description="The user the page shows (for the memory before).")


class SmsResult(CamelModel):
    webhook_status: int
    immediate_reply: str | None = Field(description="What the webhook answered at once (a link, a refusal).")
    turn: TurnRecord
