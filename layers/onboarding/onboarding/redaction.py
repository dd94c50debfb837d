"""Owns defence in depth for the logs: whatever reaches a log line, phone numbers leave it masked.

The code never logs personal data on purpose (the test suite audits every log line it makes), but a
third-party exception message can quote its input. Each function's logger formats through this,
so a phone number in such a message is written as `+***` and its last two digits.
"""

import re
from typing import TYPE_CHECKING

from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

if TYPE_CHECKING:
    from aws_lambda_powertools.logging.types import LogRecord

PHONE_NUMBER = re.compile(r"\+[1-9]\d{4,12}(\d{2})(?!\d)")


def mask_phone_numbers(text: str) -> str:
    return PHONE_NUMBER.sub(r"+***\1", text)


class RedactingFormatter(LambdaPowertoolsFormatter):
    """Powertools' JSON formatter, with phone numbers masked in the finished line."""

    def serialize(self, log: "LogRecord") -> str:
        return mask_phone_numbers(super().serialize(log))
