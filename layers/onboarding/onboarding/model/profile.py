"""Owns the user profile: what the client told about themself, kept across conversations.

It is the cross-thread memory: a new conversation (after a gap or a reset) starts with an empty
window, but the profile, like `agent_context`, stays and is rendered into every system prompt.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from onboarding.model.normalization import is_blank

ProfileField = Literal["name", "preferred_name", "goals", "level", "limitations", "preferences"]
FactKind = ProfileField | Literal["other"]
PROFILE_FIELDS: tuple[ProfileField, ...] = ("name", "preferred_name", "goals", "level", "limitations", "preferences")

FACT_LINE_PREFIX = "- Also: "  # how a free-form fact is shown (the prompt's fitting reads which lines are facts)

_LABELS: dict[str, str] = {
    "name": "Name",
    "preferred_name": "Preferred name",
    "goals": "Goals",
    "level": "Fitness level",
    "limitations": "Limitations",
    "preferences": "Preferences",
}


class UserProfile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str | None = None
    preferred_name: str | None = None
    goals: str | None = None
    level: str | None = None
    limitations: str | None = None
    preferences: str | None = None
    other_facts: tuple[str, ...] = Field(default=())

    def remember(self, kind: FactKind, value: str, *, max_chars: int, max_facts: int) -> "UserProfile":
        """A profile that also holds `value` (cut to `max_chars`). A profile field is replaced (the
        latest statement wins); an `other` fact is added, the oldest dropped beyond `max_facts`, so
        the system prompt stays bounded."""
        value = " ".join(value.split())[:max_chars]
        if is_blank(value):
            return self
        if kind == "other":
            facts = (*(f for f in self.other_facts if f != value), value)
            return self.model_copy(update={"other_facts": facts[-max_facts:] if max_facts else ()})
        return self.model_copy(update={kind: value})

    @property
    def address_as(self) -> str | None:
        """What the coach calls the client: the preferred name before the name."""
        return self.preferred_name or self.name

    def render_lines(self) -> list[str]:
        """`- Label: value` lines for the system prompt (empty when nothing is known)."""
        lines = [f"- {_LABELS[key]}: {value}" for key in PROFILE_FIELDS if (value := getattr(self, key))]
        lines.extend(f"{FACT_LINE_PREFIX}{fact}" for fact in self.other_facts)
        return lines
