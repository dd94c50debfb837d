"""Views of the library's values that only the tests read: the default flags as a Powertools
configuration, a built LangChain message's text blocks, and a whole system prompt by section."""

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage

from onboarding.flags import DEFAULT_FLAGS, GAP_FLAG, MEMORY_FLAG, PROFILE_FLAG, RECALL_FLAG, SUMMARY_FLAG
from onboarding.llm.prompt import PromptFacts, fit_system_prompt
from onboarding.llm.sections import PromptSection
from onboarding.model.state import OnboardingAgentType


def default_flags_document() -> dict[str, Any]:
    """The defaults as a Powertools feature flags configuration (what the template deploys as the
    first AppConfig version)."""
    return {
        MEMORY_FLAG: {"default": DEFAULT_FLAGS.memory},
        SUMMARY_FLAG: {"default": DEFAULT_FLAGS.summary},
        PROFILE_FLAG: {"default": DEFAULT_FLAGS.profile},
        GAP_FLAG: {"default": DEFAULT_FLAGS.gap},
        RECALL_FLAG: {"default": DEFAULT_FLAGS.recall},
    }


def message_texts(message: BaseMessage) -> list[str]:
    """The text blocks of a message built by `alternating_messages`, in order."""
    if isinstance(message.content, str):
        return [message.content] if message.content else []
    return [block["text"] for block in message.content if isinstance(block, dict) and "text" in block]


def system_prompt_sections(
    step: OnboardingAgentType, agent_context: Mapping[str, Any], memory: PromptFacts | None = None
) -> tuple[PromptSection, ...]:
    """The whole system prompt for `step` (nothing left out), section by section."""
    return fit_system_prompt(step, agent_context, memory).sections
