"""The worker's side of a text: run the turn, and send the reply in SMS-sized parts."""

from aws_lambda_powertools import Logger

from onboarding.sms.messages import SmsTurnRequest
from onboarding.sms.sender import RecipientOptedOutError, SmsSender
from onboarding.sms.split import split_message
from onboarding.store import ConversationStore
from onboarding.turns import InvalidMessageError, ModelUnavailableError, TurnService

logger = Logger(child=True)

MODEL_APOLOGY = "Sorry, I couldn't answer just now. I have your message; please text me again in a minute."
TOO_LONG = "That message is too long for me to read. Could you send it in a few shorter texts?"


class SmsResponder:
    def __init__(self, service: TurnService, store: ConversationStore, sender: SmsSender) -> None:
        self._service = service
        self._store = store
        self._sender = sender

    async def respond(self, request: SmsTurnRequest) -> int:
        """Answer one queued text; returns how many SMS parts were sent.

        A model failure does not propagate: the user's turn is kept and they are told to try again,
        rather than the queue re-running the turn and storing their message twice. A store or send
        failure does propagate, and the queue's retry runs the whole turn again: if the user's
        message was already stored, it is stored twice (a known gap; see docs/decisions/0008).
        """
        owner = self._store.phone_owner(request.from_phone)
        if owner is not None and owner.opted_out:
            logger.info("Queued text from a number that opted out since; not answered")
            return 0
        try:
            turn = await self._service.start_turn(request.user_id, request.text)
        except InvalidMessageError:
            logger.info("Queued text refused")
            return self._send([TOO_LONG], request)
        try:
            reply = (await turn.collect()).reply
        except ModelUnavailableError:
            reply = MODEL_APOLOGY
        return self._send(split_message(reply) or [MODEL_APOLOGY], request)

    def _send(self, parts: list[str], request: SmsTurnRequest) -> int:
        for sent, part in enumerate(parts):
            try:
                self._sender.send(request.from_phone, request.to_phone, part)
            except RecipientOptedOutError:
                logger.info("Recipient opted out; recorded, rest of the reply not sent")
                self._store.set_opted_out(request.from_phone, True)
                return sent
        logger.info("Reply sent", extra={"parts": len(parts)})
        return len(parts)
