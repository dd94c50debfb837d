"""Owns every text the person reads that we write ourselves, without the model, on either channel:
a reset's answer, the notice of a turn whose memory could not be read, and the SMS channel's
answers (phone links, erasing by text, what is not text, a text too long or too fast, an apology
when the coach could not answer). What the model reads (the persona, the questions, the tools'
descriptions, the summary's and the check-in's instructions) is llm/wording.py's.
"""

from onboarding.llm.wording import STEP_PROMPTS
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


# The SMS webhook's answers (sms/intake.py).
LINKED = "Linked! Texts from this phone now continue your conversation from the app."
LINK_REFUSED = "That link code is not valid or has expired. Get a new one in the app and text LINK <code>."
LINK_CONFIRM = (
    "Reply YES within {minutes} minutes to link this phone to the app account that made this code: "
    "what you have texted me so far joins that account's memory, and your texts continue its "
    "conversation. If that is not your account, ignore this and nothing changes."
)
LINK_LOCKED = "Too many wrong link codes from this phone. Try again in {minutes} minutes, with a new code from the app."
LINK_BUSY = "I'm still checking other link codes from this phone. Send yours again in a minute."
TEXT_ONLY = "I can only read text messages. Please type your answer."
ERASE_ASK = (
    "This erases everything I have stored for you: our messages, your answers and your profile. It "
    "can't be undone. To confirm, reply YES DELETE within {minutes} minutes."
)
ERASE_NOT_ASKED = "To erase everything I have stored for you, first text DELETE MY DATA."
ERASE_DONE = (
    "Done: your data is erased ({messages} messages, {saved} saved items, {phones} phone link). "
    "Text me anytime to start fresh."
)

# The SMS worker's answers (sms/responder.py).
MODEL_APOLOGY = "Sorry, I couldn't answer just now. I have your message; please text me again in a minute."
TOO_LONG = "That message is too long for me to read. Could you send it in a few shorter texts?"
SLOW_DOWN = "You're texting faster than I can keep up. Give me a minute, then send that again."
