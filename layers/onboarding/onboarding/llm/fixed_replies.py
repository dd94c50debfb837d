"""Owns what the coach says without the model: the reply to a reset command, and the notice a
turn whose memory could not be read opens with."""

from onboarding.llm.step_texts import STEP_PROMPTS
from onboarding.model.state import OnboardingAgentType

# Said by us, first, in a turn whose memory could not be read: the person knows why the coach may
# ask something again. Their messages are still stored, so the next turn sees this one.
MEMORY_UNAVAILABLE_NOTICE = (
    "(I can't reach my notes about you right now, so I may ask something you've already told me. "
    "Your messages are saved.) "
)

RESET_REPLY = (
    "Okay, we're starting a fresh conversation. I still remember what you've told me about yourself "
    "and the onboarding steps we've finished."
)
RESET_REPLY_WITH_STEP = RESET_REPLY + " Let's pick up the {title} step."
RESTART_REPLY = (
    "Okay, let's go through your onboarding again from the start. I've kept your earlier answers "
    "on file, so you can tell me what has changed."
)


def reset_reply(step: OnboardingAgentType, onboarding_complete: bool) -> str:
    """What a reset command is answered with: after a completed onboarding it starts again."""
    return (
        RESTART_REPLY if onboarding_complete else RESET_REPLY_WITH_STEP.format(title=STEP_PROMPTS[step].title.lower())
    )
