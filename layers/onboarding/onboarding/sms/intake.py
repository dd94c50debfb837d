"""Owns what the webhook does with a text, without the model: opt-outs, phone links, erasing by
text, and queueing the turn: the decisions and the words of each answer. The phone's service
(`PhoneLinking`) and the account's do the table's part."""

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime

from aws_lambda_powertools import Logger

from onboarding.account import AccountService
from onboarding.audit import Caller
from onboarding.config import Limits
from onboarding.linking import PhoneLinking
from onboarding.model.normalization import is_blank
from onboarding.model.users import PhoneOwner, normalize_link_code
from onboarding.replies import (
    ERASE_ASK,
    ERASE_DONE,
    ERASE_NOT_ASKED,
    LINK_BUSY,
    LINK_CONFIRM,
    LINK_LOCKED,
    LINK_REFUSED,
    LINKED,
    TEXT_ONLY,
)
from onboarding.sms.inbound import InboundSms, OptOut, SmsTurnRequest
from onboarding.sms.queue import TurnQueue

logger = Logger(child=True)

_LINK_REQUEST = re.compile(r"^\s*LINK\s+(.+?)\s*$", re.IGNORECASE | re.DOTALL)

LINK_CONFIRMATION = "YES"
# What a LINK <code> text is answered, by what the phone's service made of it.
_LINK_ANSWERS = {"ask_yes": LINK_CONFIRM, "refused": LINK_REFUSED, "locked": LINK_LOCKED, "busy": LINK_BUSY}
ERASE_KEYWORD, ERASE_CONFIRMATION = "DELETE MY DATA", "YES DELETE"


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
    """Decides what a text needs. Returns the immediate reply to send back, if any. It reaches the
    table only through the services: the phone's (`PhoneLinking`) and the account's."""

    def __init__(
        self,
        linking: PhoneLinking,
        account: AccountService,
        queue: TurnQueue,
        limits: Limits,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._linking = linking
        self._account = account
        self._queue = queue
        self._limits = limits
        self._clock = clock

    def accept(self, sms: InboundSms) -> str | None:
        owner = self._linking.owner_of(sms.from_phone)
        if (keyword := keyword_of(sms, owner.opted_out)) is not None:
            # The provider already answered STOP/START/HELP to the person; we record the choice.
            if keyword is not OptOut.HELP:
                self._linking.set_opted_out(sms.from_phone, keyword is OptOut.STOP)
            logger.info("Opt-out keyword recorded", extra={"opt_out": keyword.value})
            return None
        if owner.opted_out:
            # Nothing can be sent to an opted-out number, so the text is not answered.
            logger.info("Text from an opted-out number not answered")
            return None
        if (link := _LINK_REQUEST.match(sms.body)) is not None and normalize_link_code(link.group(1)):
            # Only "LINK" and a code-shaped word: "link me up with a plan" is for the coach.
            answer = self._linking.request_link(owner, link.group(1))
            return _LINK_ANSWERS[answer.outcome].format(minutes=answer.minutes)
        if _words(sms.body) == LINK_CONFIRMATION and self._linking.link_pending(owner):
            return LINKED if self._linking.confirm_link(owner) else LINK_REFUSED
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
        found = self._linking.text_key_for(owner, received_ms)
        if found is None:
            return
        owner, key = found
        request = SmsTurnRequest(
            message_id=sms.message_id,
            user_id=owner.user_id,
            from_phone=sms.from_phone,
            to_phone=sms.to_phone,
            text=sms.body,
            received_at=datetime.fromtimestamp(received_ms / 1000, UTC),
        )
        self._queue.send(request, key)

    def _erase_request(self, sms: InboundSms, owner: PhoneOwner) -> str | None:
        """DELETE MY DATA asks for a confirmation; YES DELETE within the window erases the number's
        user (everything, as DELETE /me does) and answers with what was erased. Anything else:
        None (not an erase request)."""
        words, now = _words(sms.body), int(self._clock())
        if words == ERASE_KEYWORD:
            window = self._limits.erase_confirmation_window_s
            self._linking.request_erase(sms.from_phone, now + window)
            logger.info("Erase requested by text; waiting for the confirmation")
            return ERASE_ASK.format(minutes=max(1, window // 60))
        if words != ERASE_CONFIRMATION:
            return None
        if owner.erase_requested_until is None or owner.erase_requested_until < now:
            return ERASE_NOT_ASKED
        report = self._account.erase(owner.user_id, Caller.function("sms:erase-by-text"))
        logger.info("Erased by text", extra={"erased_items": report.total})
        return ERASE_DONE.format(messages=report.messages, saved=report.state_items, phones=report.phone_numbers)
