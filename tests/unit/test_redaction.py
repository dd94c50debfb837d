"""Phone numbers are masked in every line the functions' loggers write."""

import json
import logging

import pytest
from aws_lambda_powertools import Logger

from onboarding.redaction import RedactingFormatter, mask_phone_numbers

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("+15551234567", "+***67"),
        ("from +447700900123 to +15550000000", "from +***23 to +***00"),
        ("order 12345678", "order 12345678"),  # digits without a + are not a phone number here
        ("2026-11-22 10:00:00,000+0000", "2026-11-22 10:00:00,000+0000"),  # a timestamp's offset
    ],
)
def test_phone_numbers_are_masked(text: str, masked: str) -> None:
    assert mask_phone_numbers(text) == masked


def test_the_functions_logger_masks_numbers_even_in_tracebacks(capsys: pytest.CaptureFixture[str]) -> None:
    logger = Logger(service="redaction-test", logger_formatter=RedactingFormatter())
    # Powertools filters its service out of every root handler but pytest's own capture handler, so
    # only here would this deliberately unmasked exception reach a second, unmasking formatter.
    logging.getLogger("redaction-test").propagate = False
    try:
        raise ValueError("could not send to +15551234567")
    except ValueError:
        logger.exception("Reply could not be sent")
    out = capsys.readouterr().out
    assert "+15551234567" not in out
    record = json.loads(out)
    assert record["exception_name"] == "ValueError"
    assert "+***67" in record["exception"]
