"""Issue 28 item 9: a message is normalised once, where it comes in. The C0 controls other than tab
and line feed, DEL and the C1 controls, and the bidirectional overrides and isolates are removed
before anything is stored or sent to the model; a message that is then blank is refused (400), as
a blank one always was. Over the API, over SMS (the webhook's queued text), and for every input."""

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.local.twilio_emulator import webhook_form
from onboarding.model.text import normalized_text
from onboarding.persistence import Repositories
from onboarding.sms.text_requests import SmsTurnRequest
from tests.unit.test_api import client, identity  # noqa: F401  (the API client fixture)
from tests.unit.test_sms_webhook import PHONE, Handler, call, event, handler, queued  # noqa: F401

pytestmark = pytest.mark.unit

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
C0_REMOVED = "".join(chr(code) for code in range(0x20) if chr(code) not in "\t\n\r")
SENT = "Hi\x00 coach,\x1b[31m I\u202eevil\u202c run\x07 5\x7f km\x85\ttwice\r\na week"
STORED = "Hi coach,[31m Ievil run 5 km\ttwice\na week"


async def test_the_api_stores_the_message_without_its_controls(client: httpx.AsyncClient, store: Repositories) -> None:  # noqa: F811
    response = await client.post("/chat", json={"message": SENT}, headers=identity("u"))
    assert response.status_code == 200, response.text
    # (The local coach may save an answer first: tool call and result before its reply.)
    [said] = [m for m in store.conversations.load_turn("u", 20).messages if m.role == "user"]
    assert said.content == STORED


@pytest.mark.parametrize("message", ["\x00\x07\x1b", BIDI, "\u202e \x00\n\t", "\r\n\r"])
async def test_a_message_of_controls_only_is_400_and_nothing_is_stored(
    client: httpx.AsyncClient,  # noqa: F811
    store: Repositories,
    message: str,
) -> None:
    response = await client.post("/chat", json={"message": message}, headers=identity("u"))
    assert (response.status_code, response.json()["error"]) == (400, "invalid_message")
    assert store.conversations.load_turn("u", 20).messages == ()


def test_a_text_is_queued_without_its_controls(
    handler: Handler,  # noqa: F811
    queued: Callable[[], list[SmsTurnRequest]],  # noqa: F811
) -> None:
    call(handler, event(webhook_form("SM1", PHONE, SENT)))
    assert [r.text for r in queued()] == [STORED]


@given(text=st.text())
def test_no_control_or_override_survives_and_normalising_twice_changes_nothing(text: str) -> None:
    cleaned = normalized_text(text)
    assert not set(cleaned) & set(C0_REMOVED + "\r\x7f" + BIDI + "".join(map(chr, range(0x80, 0xA0))))
    assert normalized_text(cleaned) == cleaned
    # Nothing else is touched: the kept characters are the original's, in order.
    kept: Any = iter(text.replace("\r\n", "\n").replace("\r", "\n"))
    assert all(char in kept for char in cleaned)
