"""Issue 28 item 9: a message is normalised once, where it comes in. The C0 controls other than tab
and line feed, DEL and the C1 controls, and the bidirectional overrides and isolates are removed
before anything is stored or sent to the model; a message that is then blank is refused (400), as
a blank one always was. Over the API, over SMS (the webhook's queued text), and for every input."""

import unicodedata
from collections import Counter
from collections.abc import Callable

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.local.twilio_emulator import webhook_form
from onboarding.model.text import normalized_text
from onboarding.persistence import Repositories
from onboarding.sms.inbound import SmsTurnRequest
from tests.unit import test_input_text as input_text
from tests.unit.test_api import client, identity  # noqa: F401  (the API client fixture)
from tests.unit.test_sms_webhook import PHONE, Handler, call, event, handler, queued  # noqa: F401

pytestmark = pytest.mark.unit

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
C0_REMOVED = "".join(chr(code) for code in range(0x20) if chr(code) not in "\t\n\r")
SENT = "Hi\x00 coach,\x1b[31m I\u202eevil\u202c run\x07 5\x7f km\x85\ttwice\r\na week"
STORED = "Hi coach,[31m Ievil run 5 km\ttwice\na week"


# Controls, and (decision 0032, tests/unit/test_input_text.py) invisible characters and NFC.
NORMALISED = [
    pytest.param(SENT, STORED, id="controls"),
    pytest.param(input_text.SENT, input_text.STORED, id="invisible-and-nfc"),
]


@pytest.mark.parametrize(("sent", "stored"), NORMALISED)
async def test_the_api_stores_the_message_without_its_controls(
    client: httpx.AsyncClient,  # noqa: F811
    store: Repositories,
    sent: str,
    stored: str,
) -> None:
    response = await client.post("/chat", json={"message": sent}, headers=identity("u"))
    assert response.status_code == 200, response.text
    # (The local coach may save an answer first: tool call and result before its reply.)
    [said] = [m for m in store.conversations.load_turn("u", 20).messages if m.role == "user"]
    assert said.content == stored


@pytest.mark.parametrize(
    "message", ["\x00\x07\x1b", BIDI, "\u202e \x00\n\t", "\r\n\r", *input_text.BLANK_ONCE_STRIPPED]
)
async def test_a_message_of_controls_only_is_400_and_nothing_is_stored(
    client: httpx.AsyncClient,  # noqa: F811
    store: Repositories,
    message: str,
) -> None:
    response = await client.post("/chat", json={"message": message}, headers=identity("u"))
    assert response.status_code == 400
    assert response.json() == {"error": "invalid_message", "message": "message must contain some text"}  # one line
    assert store.conversations.load_turn("u", 20).messages == ()


@pytest.mark.parametrize(("sent", "stored"), NORMALISED)
def test_a_text_is_queued_without_its_controls(
    handler: Handler,  # noqa: F811
    queued: Callable[[], list[SmsTurnRequest]],  # noqa: F811
    sent: str,
    stored: str,
) -> None:
    call(handler, event(webhook_form("SM1", PHONE, sent)))
    assert [r.text for r in queued()] == [stored]


@given(text=st.text())
def test_no_control_or_override_survives_and_normalising_twice_changes_nothing(text: str) -> None:
    cleaned = normalized_text(text)
    assert not set(cleaned) & set(C0_REMOVED + "\r\x7f" + BIDI + "".join(map(chr, range(0x80, 0xA0))))
    assert normalized_text(cleaned) == cleaned
    # Nothing is added: what is kept is the original's characters (compared decomposed, since the
    # result is in normal form C: decision 0032).
    original = Counter(unicodedata.normalize("NFD", text.replace("\r\n", "\n").replace("\r", "\n")))
    assert Counter(unicodedata.normalize("NFD", cleaned)) <= original
