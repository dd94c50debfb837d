"""The local coach reads a word typed wrong or short as meant (infra/local/bedrock_emulator/spelling.py):
shorthand as the word it stands for, a misspelt word of the reader's vocabulary (a body part, a piece
of kit, an exercise) as that word, and an ordinary word near one as itself. Each test fails when its
rule is taken out.
"""

import pytest

from infra.local.bedrock_emulator.reading import SPELLER
from tests.tooling.test_reader_kinds import _read

pytestmark = pytest.mark.unit

MEANT = {
    "thru email pls": "through email please",  # shorthand ([shorthand])
    "a kettlebel and a treadmil": "a kettlebell and a treadmill",  # kit
    "tight hamstrngs": "tight hamstrings",  # a body part
    "swiming and runing": "swimming and running",  # a doubled letter left out before "-ing"
}
# Ordinary words near a word of the vocabulary: a form of a word the table reads ("lunches",
# "weighs", "plans"), a word too short to tell from one ("joins", "joints"), one not near enough
# ("shipping").
AS_SAID = ["I pack lunches", "she weighs 60 kg", "no plans", "he joins me", "free shipping"]


@pytest.mark.parametrize("said", MEANT)
def test_a_misspelt_or_short_word_is_read_as_meant(said: str) -> None:
    assert SPELLER.spelled(said) == MEANT[said]


@pytest.mark.parametrize("said", AS_SAID)
def test_an_ordinary_word_near_a_vocabulary_word_stays(said: str) -> None:
    assert SPELLER.spelled(said) == said


def test_a_misspelt_piece_of_kit_answers_the_equipment_question() -> None:
    assert _read("equipment", "a treadmil in the garage") == {"equipment": "a treadmill in the garage"}
