"""A message's text is normalised once, where every channel's turn comes in (model/normalization.py,
docs/decisions/0032-input-text.md): in Unicode normal form C, so "é" typed as one character or as
"e" and an accent is one answer; without the invisible characters (zero width space, word joiner,
BOM, soft hyphen, tag characters), which would otherwise be stored as sent; with the joiners a script or an
emoji needs. Over the API, over SMS, and through the turn service to the saved answer. The rules'
properties over drawn texts: tests/property/test_input_text.py.

Controls too: a message is normalised once, where it comes in. The C0 controls other than tab
and line feed, DEL and the C1 controls, and the bidirectional overrides and isolates are removed
before anything is stored or sent to the model; a message that is then blank is refused (400), as
a blank one always was. Over the API, over SMS (the webhook's queued text), and for every input.
"""

import unicodedata
from collections import Counter
from collections.abc import Callable

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.local.twilio_emulator import webhook_form
from onboarding.model.normalization import normalized_text
from onboarding.persistence import Repositories
from onboarding.sms.inbound import SmsTurnRequest
from onboarding.turn.service import TurnService
from tests.unit.test_api import client, identity  # noqa: F401  (the API client fixture)
from tests.unit.test_sms_webhook import PHONE, Handler, call, event, handler, queued  # noqa: F401

pytestmark = pytest.mark.unit


DECOMPOSED, COMPOSED = "cafe\u0301", "caf\u00e9"


FLAG_OF_ENGLAND = "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"


FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"


PERSIAN_I_WANT = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # می‌خواهم


SENT = (
    f"I run\u200b to the {DECOMPOSED}\u2060 twice\u00ad a week\U000e0041\U000e0042 "
    f"{FAMILY} {PERSIAN_I_WANT} {FLAG_OF_ENGLAND}"
)


STORED = f"I run to the {COMPOSED} twice a week {FAMILY} {PERSIAN_I_WANT} {FLAG_OF_ENGLAND}"


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        pytest.param(DECOMPOSED, COMPOSED, id="nfc"),
        pytest.param("fit\u200bness\ufeff", "fitness", id="zero-width-space-and-bom"),
        pytest.param("fit\u00adness", "fitness", id="soft-hyphen"),
        pytest.param("ok\U000e0001\U000e0069\U000e0067\U000e006e\U000e007f", "ok", id="tags-hiding-text"),
        pytest.param("a\u200db\u200cc", "abc", id="joiners-between-latin-letters"),
        pytest.param(FAMILY, FAMILY, id="emoji-zwj-family"),
        pytest.param(
            "\U0001f469\U0001f3fd\u200d\U0001f4bb", "\U0001f469\U0001f3fd\u200d\U0001f4bb", id="skin-tone-zwj"
        ),
        pytest.param("\U0001f3f3\ufe0f\u200d\U0001f308", "\U0001f3f3\ufe0f\u200d\U0001f308", id="rainbow-flag"),
        pytest.param(FLAG_OF_ENGLAND, FLAG_OF_ENGLAND, id="flag-tag-sequence"),
        pytest.param(PERSIAN_I_WANT, PERSIAN_I_WANT, id="persian-zwnj"),
        pytest.param("\u0915\u094d\u200d\u0937", "\u0915\u094d\u200d\u0937", id="devanagari-half-form-zwj"),
        pytest.param("\U000e0067\U000e007f", "", id="tags-without-an-emoji"),
        pytest.param("\U0001f44d\U000e0067\U000e0062", "\U0001f44d", id="tags-without-cancel"),
    ],
)
def test_what_is_kept_and_what_is_removed(sent: str, stored: str) -> None:
    assert normalized_text(sent) == stored


# Over the API and the webhook, and blank once stripped (400, the short SMS answer): the cases are
# in this module and test_sms_webhook.py, beside the controls'.
BLANK_ONCE_STRIPPED = ["\u00ad\u2060", "\U000e0041\U000e0042\U000e007f", "\u200d \u200c", "\u2061\u2064\ufeff"]


async def test_an_answer_typed_decomposed_or_composed_is_stored_identically(
    service: TurnService, store: Repositories
) -> None:
    """Two people give the same answer, one keyboard composing "é", the other sending "e" and a
    combining accent: the same message, the same saved answer, the same name in the profile."""
    for user, (cafe, name) in {"a": (DECOMPOSED, "Rene\u0301e"), "b": (COMPOSED, "Ren\u00e9e")}.items():
        for text in ("Hi", f"call me {name}", f"beginner, I run to the {cafe} twice a week"):
            await (await service.start_turn(user, text)).collect()
    said = {
        user: [m.content for m in store.conversations.load_turn(user, 20).messages if m.role == "user"] for user in "ab"
    }
    assert said["a"] == said["b"]
    memories = {user: store.conversations.load_memory(user) for user in "ab"}
    answers = {
        user: memory.state.agent_context["fitness_assessment"]["current_activity"]["value"]
        for user, memory in memories.items()
    }
    assert answers["a"] == answers["b"] == f"I run to the {COMPOSED} twice a week"
    assert memories["a"].profile.preferred_name == memories["b"].profile.preferred_name == "Ren\u00e9e"
    assert unicodedata.is_normalized("NFC", answers["a"])


pytestmark = pytest.mark.unit


BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


C0_REMOVED = "".join(chr(code) for code in range(0x20) if chr(code) not in "\t\n\r")


SENT = "Hi\x00 coach,\x1b[31m I\u202eevil\u202c run\x07 5\x7f km\x85\ttwice\r\na week"


STORED = "Hi coach,[31m Ievil run 5 km\ttwice\na week"


# Controls, and (decision 0032, above) invisible characters and NFC.
NORMALISED = [
    pytest.param(SENT, STORED, id="controls"),
    pytest.param(SENT, STORED, id="invisible-and-nfc"),
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


@pytest.mark.parametrize("message", ["\x00\x07\x1b", BIDI, "\u202e \x00\n\t", "\r\n\r", *BLANK_ONCE_STRIPPED])
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
