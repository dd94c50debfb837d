"""The immutable context an onboarding agent works from for one turn (spec 000, Requirement 1)."""

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer

from onboarding.frozen import deep_freeze, thaw

# The spec types these fields as `List[Dict]` and `Dict`, and callers pass exactly that. Pydantic's
# `frozen=True` only stops attribute assignment; a list field could still be appended to. So the
# validated values are deep-frozen copies (tuple of read-only mappings), and they serialise back
# to plain lists and dicts.
FrozenHistory = Annotated[
    Sequence[Mapping[str, Any]],
    AfterValidator(deep_freeze),
    PlainSerializer(thaw, return_type=list[dict[str, Any]]),
]
FrozenMapping = Annotated[
    Mapping[str, Any],
    AfterValidator(deep_freeze),
    PlainSerializer(thaw, return_type=dict[str, Any]),
]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class OnboardingAgentContext(BaseModel):
    """Immutable context for onboarding agents.

    Attributes:
        user_id: Unique identifier for the user.
        conversation_history: Recent messages, oldest first, as `{"role": ..., "content": ...}`.
            Entries are kept as given (even malformed ones): `_build_messages` skips what it
            cannot use, with a warning, as the spec's error handling asks.
        agent_context: Data collected by previous agents, keyed by agent.
        loaded_at: When the context was loaded (timezone-aware, UTC).
    """

    model_config = ConfigDict(frozen=True, strict=False, extra="forbid")

    user_id: Annotated[str, Field(min_length=1, strict=True)]
    conversation_history: FrozenHistory = Field(default_factory=list)
    agent_context: FrozenMapping = Field(default_factory=dict)
    loaded_at: datetime = Field(default_factory=_utc_now)
