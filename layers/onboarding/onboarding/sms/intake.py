"""Owns what the webhook does with a text, without the model: opt-outs, phone links, erasing by
text, and queueing the turn."""

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime

from aws_lambda_powertools import Logger

from onboarding.audit import Caller
from onboarding.config import Limits
from onboarding.erasing import erase_memory
from onboarding.linking import PhoneLinking
from onboarding.model.text import is_blank
from onboarding.model.users import PhoneOwner, new_sms_user_id
from onboarding.persistence import Repositories
from onboarding.persistence.keys import normalize_link_code
from onboarding.persistence.phones import LinkLockout
from onboarding.recall.vectors import VectorIndex
from onboarding.sms.inbound import InboundSms, OptOut, SmsTurnRequest
from onboarding.sms.queue import TurnQueue

logger = Logger(child=True)

# How often the owner of a text's number may change while the text is queued (a link moves it once).
OWNER_CHANGES = 3
_LINK_REQUEST = re.compile(r"^\s*LINK\s+(.+?)\s*$", re.IGNORECASE | re.DOTALL)

LINKED = "Linked! Texts from this phone now continue your conversation from the app."
LINK_REFUSED = "That link code is not valid or has expired. Get a new one in the app and text LINK <code>."
LINK_CONFIRMATION = "YES"
LINK_CONFIRM = (
    "Reply YES within {minutes} minutes to link this phone to the app account that made this code: "
    "what you have texted me so far joins that account's memory, and your texts continue its "
    "conversation. If that is not your account, ignore this and nothing changes."
)
LINK_LOCKED = "Too many wrong link codes from this phone. Try again in {minutes} minutes, with a new code from the app."
LINK_BUSY = "I'm still checking other link codes from this phone. Send yours again in a minute."
TEXT_ONLY = "I can only read text messages. Please type your answer."
ERASE_KEYWORD, ERASE_CONFIRMATION = "DELETE MY DATA", "YES DELETE"
ERASE_ASK = (
    "This erases everything I have stored for you: our messages, your answers and your profile. It "
    "can't be undone. To confirm, reply YES DELETE within {minutes} minutes."
)
ERASE_NOT_ASKED = "To erase everything I have stored for you, first text DELETE MY DATA."
ERASE_DONE = (
    "Done: your data is erased ({messages} messages, {saved} saved items, {phones} phone link). "
    "Text me anytime to start fresh."
)


# Carrier keywords Twilio acts on itself (default opt-out handling); only an exact, whole-text match
# counts. Twilio sends `OptOutType` for them only from a Messaging Service with Advanced Opt-Out,
# so they are also recognised here. "YES" opts back in only a number that opted out: to everyone
# else it is an answer for the coach.
_KEYWORDS = {
    **dict.fromkeys(("STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "REVOKE", "OPTOUT"), OptOut.STOP),
    **dict.fromkeys(("START", "UNSTOP"), OptOut.START),
    **dict.fromkeys(("HELP", "INFO"), OptOut.HELP),
}


def keyword_of(sms: InboundSms, opted_out: bool) -> OptOut | None:
    if sms.opt_out is not None:
        return sms.opt_out
    word = sms.body.strip().upper()
    if word == "YES" and opted_out:
        return OptOut.START
    return _KEYWORDS.get(word)


def _words(text: str) -> str:
    return " ".join(text.upper().split())


class SmsIntake:
    """Decides what a text needs. Returns the immediate reply to send back, if any."""

    def __init__(
        self,
        store: Repositories,
        queue: TurnQueue,
        limits: Limits,
        new_user_id: Callable[[], str] = new_sms_user_id,
        clock: Callable[[], float] = time.time,
        index: VectorIndex | None = None,
    ) -> None:
        """`index`: the recall index, whose vectors of an erased user go with them."""
        self._store = store
        self._phones = store.phones
        self._queue = queue
        self._limits = limits
        self._index = index
        self._linking = PhoneLinking(store, limits, index)
        self._new_user_id = new_user_id
        self._clock = clock

    def accept(self, sms: InboundSms) -> str | None:
        owner = self._phones.find_or_create_owner(sms.from_phone, self._new_user_id)
        if (keyword := keyword_of(sms, owner.opted_out)) is not None:
            # The provider already answered STOP/START/HELP to the person; we record the choice.
            if keyword is not OptOut.HELP:
                self._phones.set_opted_out(sms.from_phone, keyword is OptOut.STOP)
            logger.info("Opt-out keyword recorded", extra={"opt_out": keyword.value})
            return None
        if owner.opted_out:
            # Nothing can be sent to an opted-out number, so the text is not answered.
            logger.info("Text from an opted-out number not answered")
            return None
        if (link := _LINK_REQUEST.match(sms.body)) is not None and normalize_link_code(link.group(1)):
            # Only "LINK" and a code-shaped word: "link me up with a plan" is for the coach.
            return self._request_link(owner, link.group(1))
        if _words(sms.body) == LINK_CONFIRMATION and self._link_pending(owner):
            return self._link(owner)
        if (erase_reply := self._erase_request(sms, owner)) is not None:
            return erase_reply
        if is_blank(sms.body):
            return TEXT_ONLY
        self._queue_turn(sms, owner)
        return None

    def _queue_turn(self, sms: InboundSms, owner: PhoneOwner) -> None:
        """Queue the text for its number's owner, sealed with the owner's key (made with their first
        queued text). If the number was linked to another user meanwhile, the text goes to them; if
        its user was erased meanwhile, it is answered as nobody (as the worker does: responder)."""
        received_ms = int(self._clock() * 1000)
        received_at = datetime.fromtimestamp(received_ms / 1000, UTC)
        for _ in range(OWNER_CHANGES):
            key = self._store.text_keys.for_queueing(sms.from_phone, owner.user_id, received_ms)
            if key is not None:
                request = SmsTurnRequest(
                    message_id=sms.message_id,
                    user_id=owner.user_id,
                    from_phone=sms.from_phone,
                    to_phone=sms.to_phone,
                    text=sms.body,
                    received_at=received_at,
                )
                self._queue.send(request, key)
                return
            now_owner = self._phones.find_owner(sms.from_phone)
            if now_owner is None or now_owner.user_id == owner.user_id:
                logger.info("Text received as its user was erased; not answered")
                return
            owner = now_owner
        logger.warning("A text's number kept changing owners while it was queued; not answered")

    def _request_link(self, owner: PhoneOwner, code: str) -> str:
        """LINK <code>: nothing is linked yet. A valid code is kept on the phone, which is asked to
        reply YES (so a code alone cannot pull a phone's texts into an account: decision 0015). Every
        code is counted before it is checked, and a right one given back: past a few wrong ones in a
        window the phone is locked out until the window ends, even texts sent at once, and even
        after an erase (the count is not the phone's owner item)."""
        requests = self._store.link_requests
        attempt = requests.take_link_attempt(owner.phone, self._limits.link_failure_limit)
        if isinstance(attempt, LinkLockout):
            if attempt.busy:
                logger.info("Link code refused unread: other codes from this phone are still being checked")
                return LINK_BUSY
            logger.info("Link code refused unread: too many wrong codes from this phone")
            return LINK_LOCKED.format(minutes=max(1, -(-attempt.retry_after_s // 60)))
        window = self._limits.link_confirmation_window_s
        right = requests.request_link(owner.phone, code, int(self._clock()) + window)
        requests.settle_link_attempt(attempt, right)
        if not right:
            logger.info("Phone link refused: unknown, expired or used code")
            return LINK_REFUSED
        logger.info("Link code accepted; waiting for the phone's YES")
        return LINK_CONFIRM.format(minutes=max(1, window // 60))

    def _link_pending(self, owner: PhoneOwner) -> bool:
        until = owner.link_confirm_until
        return owner.link_code is not None and until is not None and until >= int(self._clock())

    def _link(self, owner: PhoneOwner) -> str:
        """YES after LINK <code>: link the phone and bring its texts (the code is used up now)."""
        if owner.link_code is None or self._linking.link(owner.phone, owner.link_code) is None:
            logger.info("Phone link refused: the code expired or was used before the YES")
            return LINK_REFUSED
        logger.info("Phone linked to an app user")
        return LINKED

    def _erase_request(self, sms: InboundSms, owner: PhoneOwner) -> str | None:
        """DELETE MY DATA asks for a confirmation; YES DELETE within the window erases the number's
        user (everything, as DELETE /me does) and answers with what was erased. Anything else:
        None (not an erase request)."""
        words, now = _words(sms.body), int(self._clock())
        if words == ERASE_KEYWORD:
            window = self._limits.erase_confirmation_window_s
            self._phones.request_erase(sms.from_phone, now + window)
            logger.info("Erase requested by text; waiting for the confirmation")
            return ERASE_ASK.format(minutes=max(1, window // 60))
        if words != ERASE_CONFIRMATION:
            return None
        if owner.erase_requested_until is None or owner.erase_requested_until < now:
            return ERASE_NOT_ASKED
        report = erase_memory(self._store, self._index, owner.user_id, Caller.function("sms:erase-by-text"))
        logger.info("Erased by text", extra={"erased_items": report.total})
        return ERASE_DONE.format(messages=report.messages, saved=report.state_items, phones=report.phone_numbers)
