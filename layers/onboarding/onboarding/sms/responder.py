"""Owns the worker's side of a text: run the turn, and send the reply in SMS-sized parts."""

import asyncio

from aws_lambda_powertools import Logger

from onboarding.linking import PhoneLinking
from onboarding.metrics import count_metric
from onboarding.model.errors import InvalidMessageError, ModelUnavailableError, RateLimitedError, UserErasedError
from onboarding.replies import MODEL_APOLOGY, SLOW_DOWN, TOO_LONG
from onboarding.sms.inbound import SmsTurnRequest
from onboarding.sms.sealing import read_queued
from onboarding.sms.sender import RecipientOptedOutError, SmsSender, UndeliverableError
from onboarding.sms.split import split_message
from onboarding.turn.service import TurnService

logger = Logger(child=True)

# How often a text's user may change while it is answered (a link's merge moves it once) before
# the text is left to the queue's retry.
ADDRESSEE_CHANGES = 3


class SmsResponder:
    """Answers queued texts. It reaches the table only through the services (the turn's and the
    phone's), and every blocking call (the phone's service, Twilio's REST API) runs in a thread, so
    the turn's own awaits are never held up."""

    def __init__(self, service: TurnService, linking: PhoneLinking, sender: SmsSender) -> None:
        self._service = service
        self._linking = linking
        self._sender = sender

    def read(self, body: str) -> SmsTurnRequest | None:
        """The text a queue message holds; None when its user was erased since it was queued (its
        key went with them, so it cannot be read: it is answered by nobody). QueuedTextError when
        the message is not a text we queued."""
        return read_queued(body, self._linking.queued_text_key)

    async def respond(self, request: SmsTurnRequest) -> int:
        """Answer one queued text; returns how many SMS parts were sent.

        The turn is keyed by the text's MessageSid, so the queue's retry after a store or send
        failure stores nothing twice: it answers the stored message, or re-sends the stored reply
        if it had not been recorded as delivered (parts sent before a failed one are sent again).
        A model failure does not propagate: the user's turn is kept and they are told to try again.

        The text is answered as its number's owner now (a phone linked while the text waited
        continues the app account). A text whose user was erased since it arrived is answered as
        nobody (a dead-lettered text redriven after an erase); but if that user's memory joined
        another's (a link's merge, even mid-turn), it is answered as that user, never dropped.
        """
        owner = await asyncio.to_thread(self._linking.find_owner, request.from_phone)
        if owner is not None and owner.opted_out:
            logger.info("Queued text from a number that opted out since; not answered")
            return 0
        received_ms = int(request.received_at.timestamp() * 1000) if request.received_at else 0
        for _ in range(ADDRESSEE_CHANGES):
            user_id = await asyncio.to_thread(self._linking.addressee, request.user_id, received_ms, owner)
            if user_id is None:
                logger.info("Text received before its user's data was erased; not answered")
                return 0
            if owner is not None and owner.merge_from is not None:
                await asyncio.to_thread(self._linking.finish_merge, owner)
            try:
                return await self._answer(request, user_id)
            except UserErasedError:
                # Erased while it was answered: by the person (then nothing is sent), or because its
                # memory joined an app user (a link): then the text is answered again, as them.
                owner = await asyncio.to_thread(self._linking.find_owner, request.from_phone)
        logger.warning("A text's user kept changing while it was answered; left for the queue to retry")
        raise UserErasedError("the text's user kept changing while it was answered")

    async def _answer(self, request: SmsTurnRequest, user_id: str) -> int:
        try:
            # Twilio's MessageSid identifies the turn: a retried text is stored and answered once.
            turn = await self._service.start_turn(
                user_id, request.text, request.message_id, request.received_at, channel="sms"
            )
        except InvalidMessageError:
            logger.info("Queued text refused")
            return await self._send([TOO_LONG], request)
        except RateLimitedError:
            return await self._refuse_for_rate(request, user_id)
        try:
            result = await turn.collect()
        except ModelUnavailableError:
            return await self._send([MODEL_APOLOGY], request)
        except InvalidMessageError:
            logger.info("Queued text does not fit the prompt's budget")
            return await self._send([TOO_LONG], request)
        if result.delivered:
            logger.info("Repeated delivery of a text already answered; nothing sent")
            return 0
        sent = await self._send(split_message(result.reply) or [MODEL_APOLOGY], request)
        await self._service.mark_delivered(user_id, request.message_id)
        await turn.fold_summary()  # after the reply went out: the person never waits for it
        return sent

    async def _refuse_for_rate(self, request: SmsTurnRequest, user_id: str) -> int:
        """Tell the person once per rate-limit window; the other refused texts get no answer,
        so a burst of texts is not answered by a burst of warnings (each of which costs an SMS)."""
        if await self._service.take_rate_notice(user_id):
            return await self._send([SLOW_DOWN], request)
        logger.info("Text refused by the rate limit; the person was already told")
        return 0

    async def _send(self, parts: list[str], request: SmsTurnRequest) -> int:
        return await asyncio.to_thread(self._send_now, parts, request)

    def _send_now(self, parts: list[str], request: SmsTurnRequest) -> int:
        for sent, part in enumerate(parts):
            try:
                self._sender.send(request.from_phone, request.to_phone, part)
            except RecipientOptedOutError:
                logger.info("Recipient opted out; recorded, rest of the reply not sent")
                self._linking.set_opted_out(request.from_phone, True)
                return sent
            except UndeliverableError as error:
                # Final: a retry meets the same answer, and would hold the person's later texts back.
                logger.warning("Reply undeliverable; not retried", extra={"twilio_error": error.code, "parts": sent})
                count_metric("SmsUndeliverable")
                return sent
        logger.info("Reply sent", extra={"parts": len(parts)})
        return len(parts)
