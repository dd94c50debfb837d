"""SMS worker: answers the texts the webhook queued (SQS FIFO, one message group per user).

Thin by design: `SmsResponder` reads each record's sealed text (onboarding.sms.sealing: a text of
a user erased since cannot be read, and is answered by nobody), runs the turn and sends the reply
through Twilio. Failures are reported per record (Powertools Batch), and a
failed record holds back only the later texts of the same user, so each user's texts are answered
in order. Each text is answered once (Powertools Idempotency on its `MessageSid`).
"""

import asyncio
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.typing import LambdaContext

from onboarding.composition import build_worker
from onboarding.config import Settings, WorkerSettings
from onboarding.redaction import RedactingFormatter
from onboarding.sms.inbound import SmsTurnRequest
from onboarding.sms.responder import SmsResponder
from onboarding.snapstart import register_runtime_hooks

logger = Logger(logger_formatter=RedactingFormatter())

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def make_handler(
    responder: SmsResponder, persistence: BasePersistenceLayer, dedupe_window_s: int = 24 * 3600
) -> Handler:
    """The Lambda handler (tests pass their own responder and persistence layer)."""
    config = IdempotencyConfig(event_key_jmespath="message_id", expires_after_seconds=dedupe_window_s)

    @idempotent_function(data_keyword_argument="request", persistence_store=persistence, config=config)  # type: ignore[untyped-decorator]
    def answer_once(request: SmsTurnRequest) -> dict[str, int]:
        return {"parts_sent": asyncio.run(responder.respond(request))}

    def answer(record: SQSRecord) -> None:
        # A message that is not a text we queued raises QueuedTextError: it fails every attempt and
        # ends in the dead-letter queue.
        request = responder.read(record.body)
        if request is None:
            logger.info("Queued text of a user erased since; its key is gone, so it is answered by nobody")
            return
        answer_once(request=request)

    @logger.inject_lambda_context
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        config.register_lambda_context(context)
        processor = SqsFifoPartialProcessor(skip_group_on_error=True)
        # Every record failing is reported like any partial failure (the same retries), rather than
        # raised as one exception whose text would carry each record's error into the logs.
        processor.raise_on_entire_batch_failure = False
        return dict(process_partial_response(event=event, record_handler=answer, processor=processor, context=context))

    return handler


_sms = WorkerSettings.from_env()
_parts = build_worker(Settings.from_env(), _sms)
# SnapStart: primed before the snapshot, renewed after each restore (where the runtime has hooks).
register_runtime_hooks(_parts.primer)
lambda_handler = make_handler(
    _parts.responder,
    _parts.idempotency,
    _sms.dedupe_window_s,
)
