"""Owns the table's key schema: one partition per user, plus phone owners and link codes.

Layout of a user's partition (`pk = USER#<user id>`), in sort-key order:

    CLIENT#<client message id>         which messages a client's (or Twilio's) message id produced
    CONTACT#<E.164 phone>              a phone number linked to this user (sorts before messages)
    KEY#<user id>                      the key that seals that user's queued texts: their own, or
                                       an SMS-only user's whose memory joined this one (a link)
    LIMIT#<window number>              how many messages the user sent in one rate-limit window
    LINKCODE#<code>                    a link code this user created (expires with it), so erase finds it
    MSG#<13-digit epoch ms>#<random>   one item per message (user, assistant or tool), immutable
    ~PROFILE                           what the user told about themself (outlives conversations)
    ~STATE                             onboarding state (current agent, agent_context, waiting field)
    ~SUMMARY                           rolling summary of the messages that left the prompt window

Items a turn does not need sort before `MSG#`, so the newest-first Query never meets them.
Outside the user partitions:

    pk = PHONE#<E.164>, sk = ~OWNER    which user a phone number belongs to, and its SMS opt-out
    pk = LINK#<code>,   sk = ~LINK     a one-time code that links a phone to a user (expires)
    pk = ERASED#<user>, sk = ~ERASED   when the user was last erased (expires): a turn that began
                                       before it stores nothing (outside the partition it guards)
    pk = LINKTRIES#<sha256 of E.164>,  the link codes a number texted in one fixed window, and how
         sk = WINDOW#<window number>   many were wrong (expires when the window ends); outside every
                                       user's data, so an erase does not reset a lockout

Sort keys starting with `~` sort after every message, so ONE descending Query with
`Limit = messages + len(HEAD_ITEMS)` returns the per-user head items and the newest messages
together. The random suffix makes two messages written in the same millisecond distinct.
"""

import base64
import binascii
import hashlib
import json
import re
import secrets
from typing import Any

from onboarding.model.errors import InvalidCursorError, InvalidPhoneError

USER_PREFIX = "USER#"
MESSAGE_PREFIX = "MSG#"
STATE_SORT_KEY = "~STATE"
PROFILE_SORT_KEY = "~PROFILE"
SUMMARY_SORT_KEY = "~SUMMARY"
HEAD_ITEMS = (PROFILE_SORT_KEY, STATE_SORT_KEY, SUMMARY_SORT_KEY)
CONTACT_PREFIX = "CONTACT#"
CLIENT_PREFIX = "CLIENT#"
CLIENT_ID_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
RATE_PREFIX = "LIMIT#"
TEXT_KEY_PREFIX = "KEY#"
PHONE_PREFIX = "PHONE#"
PHONE_OWNER_SORT_KEY = "~OWNER"
LINK_PREFIX = "LINK#"
LINK_SORT_KEY = "~LINK"
LINK_POINTER_PREFIX = "LINKCODE#"
ERASED_PREFIX = "ERASED#"
ERASED_SORT_KEY = "~ERASED"
LINK_TRIES_PREFIX = "LINKTRIES#"

_MESSAGE_SORT_KEY = re.compile(r"^MSG#\d{13}#[0-9a-f]{12}$")
_E164 = re.compile(r"^\+[1-9]\d{6,14}$")

Key = dict[str, Any]


def partition(user_id: str) -> dict[str, str]:
    return {"S": f"{USER_PREFIX}{user_id}"}


def user_key(user_id: str, sort_key: str) -> Key:
    return {"pk": partition(user_id), "sk": {"S": sort_key}}


def message_sort_key(message_id: str) -> str:
    created_ms, suffix = message_id.split("-", 1)
    return f"{MESSAGE_PREFIX}{created_ms}#{suffix}"


def message_id_of(sort_key: str) -> str:
    created_ms, suffix = sort_key.removeprefix(MESSAGE_PREFIX).split("#", 1)
    return f"{created_ms}-{suffix}"


def new_message_id(created_ms: int) -> str:
    return f"{created_ms:013d}-{secrets.token_hex(6)}"


def client_key(user_id: str, client_id: str) -> Key:
    return user_key(user_id, f"{CLIENT_PREFIX}{client_id}")


def check_in_id(fire_key: str) -> str:
    """The client id a check-in's firing is recorded under: its schedule's fire time, so every
    delivery of one firing finds the same record (characters outside the id pattern dropped)."""
    return "checkin." + re.sub(r"[^A-Za-z0-9_.:-]", "", fire_key)[:100]


def contact_key(user_id: str, phone: str) -> Key:
    return user_key(user_id, f"{CONTACT_PREFIX}{phone}")


def text_key(holder: str, made_for: str) -> Key:
    """Where `holder`'s partition keeps the key that seals `made_for`'s queued texts."""
    return user_key(holder, f"{TEXT_KEY_PREFIX}{made_for}")


def phone_key(phone: str) -> Key:
    """The owner item's key of an E.164 number; InvalidPhoneError for anything else."""
    if not _E164.match(phone):
        raise InvalidPhoneError("a phone number must be in E.164 form, like +15551234567")
    return stored_phone_key(phone)


def stored_phone_key(phone: str) -> Key:
    """The owner item's key of a number as stored (not checked: erasure must not stop at a bad one)."""
    return {"pk": {"S": f"{PHONE_PREFIX}{phone}"}, "sk": {"S": PHONE_OWNER_SORT_KEY}}


def erased_key(user_id: str) -> Key:
    return {"pk": {"S": f"{ERASED_PREFIX}{user_id}"}, "sk": {"S": ERASED_SORT_KEY}}


def link_key(code: str) -> Key:
    return {"pk": {"S": f"{LINK_PREFIX}{code}"}, "sk": {"S": LINK_SORT_KEY}}


def link_tries_key(phone: str, window: int) -> Key:
    """The count of link codes `phone` texted in fixed window number `window`. Keyed by a hash of
    the number so the key does not spell it out; a hash of a phone number is no secret (anyone
    with a number can hash it), which is why the item holds counts only and expires with its window."""
    phone_key(phone)  # an E.164 number, or InvalidPhoneError
    digest = hashlib.sha256(phone.encode()).hexdigest()
    return {"pk": {"S": f"{LINK_TRIES_PREFIX}{digest}"}, "sk": {"S": f"WINDOW#{window}"}}


def encode_cursor(sort_key: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"v": 1, "after": sort_key}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The message sort key a cursor continues after. Only a message key is accepted; the
    partition always comes from the caller's user id, so a cursor cannot reach another user."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        sort_key = decoded.get("after") if isinstance(decoded, dict) and decoded.get("v") == 1 else None
    except (binascii.Error, UnicodeDecodeError, ValueError) as error:
        raise InvalidCursorError("the cursor is not one this API handed out") from error
    if not isinstance(sort_key, str) or not _MESSAGE_SORT_KEY.match(sort_key):
        raise InvalidCursorError("the cursor is not one this API handed out")
    return sort_key
