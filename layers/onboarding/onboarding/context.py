"""Owns the immutable context an onboarding agent works from for one turn."""

from datetime import UTC, datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, SkipValidation, field_validator

from onboarding.model.answers import AnswerSource
from onboarding.model.immutable import FrozenHistory, FrozenMapping
from onboarding.model.messages import Message
from onboarding.model.profile import UserProfile
from onboarding.model.state import OnboardingAgentType, OnboardingState, WaitingFor

__all__ = ["FrozenHistory", "FrozenMapping", "OnboardingAgentContext"]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class OnboardingAgentContext(BaseModel):
    """Immutable context for onboarding agents.

    Attributes:
        user_id: Unique identifier for the user.
        conversation_history: The current conversation's messages that the summary does not cover,
            oldest first. The orchestrator passes the loaded `Message`s themselves, which read as
            `{"role": ..., "content": ...}` (an assistant entry may add `tool_calls`, a `tool`
            entry names its `tool_call_id`); a caller may pass such dicts. Entries are kept as
            given (even malformed ones): `_build_messages` skips what it cannot use, with a warning.
        agent_context: Data collected by previous agents, keyed by agent.
        loaded_at: When the context was loaded (timezone-aware, UTC).
        profile: What the client told about themself, across conversations.
        summary: The rolling summary of what left the window, if any.
        waiting_for, skipped, completed_at: the rest of the onboarding state.
        memory_unavailable: the turn could not read its memory (the history read failed): the
            agent works without tools and says so, and nothing of the state is written.
        message_source: the client message this turn answers (what the tools save is marked with it).
        returning_since: set when this message opens a new conversation after earlier ones (a gap
            or a reset): when the last one ended. The prompt then opens with a recap.
        single_prompt: the memory flag is off for this user (single-prompt mode): nothing was
            loaded, as with `memory_unavailable`, but by design, so the person is not told.
        show_profile: the profile flag: False leaves the profile out of the prompt.
        recalled: older messages recalled for this message, most relevant first, none of them
            already in the window or carried next to the summary (onboarding.recall).
    """

    model_config = ConfigDict(frozen=True, strict=False, extra="forbid")

    user_id: Annotated[str, Field(min_length=1, strict=True)]
    conversation_history: FrozenHistory = Field(default_factory=list)
    agent_context: FrozenMapping = Field(default_factory=dict)
    loaded_at: datetime = Field(default_factory=_utc_now)
    profile: UserProfile = Field(default_factory=UserProfile)
    summary: str | None = None
    waiting_for: WaitingFor | None = None
    skipped: tuple[str, ...] = ()
    completed_at: datetime | None = None
    memory_unavailable: bool = False
    message_source: AnswerSource | None = None
    returning_since: datetime | None = None
    single_prompt: bool = False
    show_profile: bool = True
    # Kept as the Messages they are (ids and times included): tuples of frozen messages are immutable.
    recalled: SkipValidation[tuple[Message, ...]] = ()

    @field_validator("recalled", mode="before")
    @classmethod
    def _recalled_as_tuple(cls, value: object) -> object:
        # A tuple however it comes (JSON gives a list), so the context stays immutable and equal.
        return tuple(value) if isinstance(value, list) else value

    def onboarding_state(self, step: OnboardingAgentType) -> OnboardingState:
        """The onboarding state this context was built from, at `step`."""
        return OnboardingState(
            current_agent=step,
            agent_context=self.agent_context,
            waiting_for=self.waiting_for,
            skipped=self.skipped,
            completed_at=self.completed_at,
        )
