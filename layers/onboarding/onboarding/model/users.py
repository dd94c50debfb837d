"""Owns who a user is: an app user is known by the verified id of their sign-in; a number that
texts before it is linked to an app account becomes an SMS-only user of its own."""

import uuid

SMS_USER_PREFIX = "sms-"


def new_sms_user_id() -> str:
    return f"{SMS_USER_PREFIX}{uuid.uuid4()}"


def is_sms_only(user_id: str) -> bool:
    """True for a user created for a number that texted first (their memory joins the app user the
    number is later linked to)."""
    return user_id.startswith(SMS_USER_PREFIX)
