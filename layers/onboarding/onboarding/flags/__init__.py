"""Owns the memory's feature flags: their names, their documented defaults, and the value a turn
runs with (docs/rollout.md, decision 0021).

The defaults are what a turn uses when no flags were ever read (AppConfig or the file could not be
reached, or held something invalid, since the instance started): every part of the memory on, as
before the flags existed. Pure dataclasses here; evaluating them per user is `flags.rollout`'s
(Powertools' Feature Flags), imported only where a turn is composed.
"""

from dataclasses import dataclass

from onboarding.config.policies import ConversationRules

# The flag names, as in the AppConfig configuration (Powertools' feature flags schema).
MEMORY_FLAG = "memory"
SUMMARY_FLAG = "rolling_summary"
PROFILE_FLAG = "profile"
GAP_FLAG = "conversation_gap"
RECALL_FLAG = "recall"
# The context key a percentage rule's MODULO_RANGE reads: a stable integer from the user id.
ROLLOUT_KEY = "rollout_bucket"
# The arm of a turn with every flag on, and of one in single-prompt mode.
FULL_ARM = "full"
SINGLE_PROMPT_ARM = "single_prompt"


@dataclass(frozen=True)
class MemoryFlags:
    """Which parts of the memory one user's turn uses.

    memory: off is single-prompt mode: nothing is loaded, the agent gets the system prompt and
        the message only (no tools), and the message and reply are still stored.
    summary: the rolling summary is shown and folded. profile: the profile is shown in the prompt
        (what the tools save is still saved). gap: an idle gap opens a new conversation (a recap).
    recall: the few most relevant older messages are recalled into the prompt (every message is
        indexed whatever the flag, so turning it on later finds what was said before).
    """

    memory: bool = True
    summary: bool = True
    profile: bool = True
    gap: bool = True
    recall: bool = True

    @property
    def arm(self) -> str:
        """The arm the turn runs in, for comparing arms in the telemetry: `full`, `single_prompt`,
        or the parts that are off (`no_summary/no_gap`)."""
        if not self.memory:
            return SINGLE_PROMPT_ARM
        parts = (("summary", self.summary), ("profile", self.profile), ("gap", self.gap), ("recall", self.recall))
        off = [name for name, on in parts if not on]
        return "/".join(f"no_{name}" for name in off) or FULL_ARM

    def conversation_rules(self, rules: ConversationRules) -> ConversationRules:
        """The rules a turn splits conversations by: without the gap flag, only a reset splits."""
        return rules if self.gap else ConversationRules(float("inf"), rules.reset_keywords)


DEFAULT_FLAGS = MemoryFlags()
