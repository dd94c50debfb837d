"""Owns what a text asks for, and the turn request queued for the worker."""

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from onboarding.model.normalization import normalized_text

E164_PATTERN = r"^\+[1-9]\d{6,14}$"


class OptOut(StrEnum):
    """Carrier keywords, already recognised by the SMS provider (STOP, START, HELP and their synonyms)."""

    STOP = "STOP"
    START = "START"
    HELP = "HELP"


class InboundSms(BaseModel):
    """One text a person sent to our number."""

    model_config = ConfigDict(frozen=True)

    message_id: str = Field(min_length=1, max_length=64)
    from_phone: str = Field(pattern=E164_PATTERN)
    to_phone: str = Field(min_length=1, max_length=64)
    body: str = Field(max_length=16_000)
    opt_out: OptOut | None = None

    @field_validator("body")
    @classmethod
    def _normalized(cls, body: str) -> str:
        """Normalised where it comes in (model/normalization.py): keywords, links and the queued turn all
        read the text as it is stored."""
        return normalized_text(body)


class SmsTurnRequest(BaseModel):
    """A text to answer, as the webhook queues it for the worker (the queue message body)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    message_id: str = Field(min_length=1, max_length=64)
    user_id: str = Field(min_length=1)
    from_phone: str = Field(pattern=E164_PATTERN)
    to_phone: str = Field(min_length=1, max_length=64)
    text: str
    # When the webhook took the text: a text taken before the user's data was erased is not
    # answered after it (the erase refuses the turn's writes).
    received_at: datetime | None = None
