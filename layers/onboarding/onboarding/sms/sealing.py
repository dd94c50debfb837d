"""Owns sealing a queued text and reading it back (decision 0031). The queue message carries the
user it was queued for and the name of their key in the clear, and everything else (the number,
the text, the MessageSid, when it came in) sealed with AES-GCM under the user's key (kept where
the erase deletes it; `PhoneLinking` finds it). With the key gone, a text of an erased user left
in the queue or the dead-letter queue, even one that ends there after the erase, cannot be read
by anyone. The user id and key name are bound to the sealed part as associated data, so a sealed
text cannot be passed off as another user's.

AES-GCM is `cryptography`'s (the Python Cryptographic Authority's), never written here; each
text gets a fresh random 96-bit nonce, as the algorithm requires."""

import base64
import os
from collections.abc import Callable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from onboarding.model.users import TextKey
from onboarding.sms.inbound import SmsTurnRequest

NONCE_BYTES = 12  # GCM's 96-bit nonce
KeyLookup = Callable[[str, str], TextKey | None]


class SealedText(BaseModel):
    """The body of a queued text: whose it is and which key sealed it, and the sealed request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: str = Field(min_length=1)
    key_id: str = Field(min_length=1)
    sealed: str = Field(min_length=1)  # base64 of the nonce and AES-GCM's ciphertext and tag


def _bound(user_id: str, key_id: str) -> bytes:
    return f"{user_id}\n{key_id}".encode()


def seal(request: SmsTurnRequest, key: TextKey) -> str:
    """The queue message body of `request`, sealed with `key` (the key of `request.user_id`)."""
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(key.secret).encrypt(nonce, request.model_dump_json().encode(), _bound(request.user_id, key.key_id))
    body = SealedText(user_id=request.user_id, key_id=key.key_id, sealed=base64.b64encode(nonce + sealed).decode())
    return body.model_dump_json()


class QueuedTextError(ValueError):
    """A queue message that is not a text we queued (it fails every try and ends in the
    dead-letter queue). Its text never says what the message held."""


def read_queued(body: str, key_of: KeyLookup) -> SmsTurnRequest | None:
    """The text a queue message holds; None when its key is gone (its user was erased: the text
    cannot be read, and is answered by nobody). A body queued before texts were sealed is
    read as it is. QueuedTextError for anything else. `key_of(user_id, key_id)` finds the key
    that sealed a text queued for `user_id` (`PhoneLinking.queued_text_key`)."""
    try:
        envelope = SealedText.model_validate_json(body)
    except ValidationError:
        try:
            return SmsTurnRequest.model_validate_json(body)
        except ValidationError:
            # `from None`: pydantic's error quotes the input, which may hold a person's text and number.
            raise QueuedTextError("the queue message is not a turn request") from None
    key = key_of(envelope.user_id, envelope.key_id)
    if key is None:
        return None
    try:
        sealed = base64.b64decode(envelope.sealed, validate=True)
        opened = AESGCM(key.secret).decrypt(
            sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], _bound(envelope.user_id, envelope.key_id)
        )
        return SmsTurnRequest.model_validate_json(opened)
    except (InvalidTag, ValueError):  # ValueError: bad base64, a nonce cut short, a request that fails validation
        raise QueuedTextError("the queue message's sealed text does not open with its key") from None
