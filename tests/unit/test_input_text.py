"""A message's text is normalised once, where every channel's turn comes in (model/text.py,
docs/decisions/0032-input-text.md): in Unicode normal form C, so "é" typed as one character or as
"e" and an accent is one answer; without the invisible characters (zero width space, word joiner,
BOM, soft hyphen, tag characters) that used to be stored as sent; with the joiners a script or an
emoji needs. Over the API, over SMS, and through the turn service to the saved answer. The rules'
properties over drawn texts: tests/property/test_input_text.py."""

import unicodedata

import pytest

from onboarding.model.text import normalized_text
from onboarding.persistence import Repositories
from onboarding.turn.service import TurnService

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
# in test_control_characters.py and test_sms_webhook.py, beside the controls'.
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
        user: memory.state.agent_context["fitness_assessment"]["fitness_level"]["value"]
        for user, memory in memories.items()
    }
    assert answers["a"] == answers["b"] == f"beginner, I run to the {COMPOSED} twice a week"
    assert memories["a"].profile.preferred_name == memories["b"].profile.preferred_name == "Ren\u00e9e"
    assert unicodedata.is_normalized("NFC", answers["a"])
