"""Owns the mobile API's logger: one Powertools Logger, whose formatter redacts personal data."""

from aws_lambda_powertools import Logger

from onboarding.redaction import RedactingFormatter

logger = Logger(logger_formatter=RedactingFormatter())
