"""How the scripted coach reads a word typed wrong or short (reading.py applies it before reading a
message): shorthand is read as the word it stands for ("hr", "thru"), and a misspelt word as the
word of the reader's vocabulary it is closest to ("sholder" -> "shoulder", "equiptment" ->
"equipment"), by difflib's likeness (the standard library's, no list of English words needed).

Two tiers of vocabulary: the words often mistyped, read at a looser likeness (they are few and
chosen), and every plain word of the word lists an answer is read by, at a closer one (there are
more of them, so more ordinary words lie near one: "beach" is not "bench"). A word the table itself
reads, or a form of one ("lunches" of "lunch"), is no typo unless it misspells a form of that word
("swiming" of "swim" is "swimming"); a typo keeps its first letter.
"""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from difflib import SequenceMatcher, get_close_matches

_WORD = re.compile(r"[A-Za-z]{5,}")
_ITEM_WORD_FROM = 6  # an item word is read for a typo from this length: "plans" stays "plans", not "planks"
_LOOSE, _CLOSE = 0.8, 0.9
_ENDINGS = ("s", "es", "ed", "d", "ing", "er", "ers")
_DOUBLING = ("ing", "ed", "er", "ers")  # endings before which a last consonant doubles ("swimming")
_PLAIN = re.compile(r"^([a-z]+)(s\?)?$")


def plain_words(patterns: Iterable[str]) -> frozenset[str]:
    """The plain words of word lists, one alternative each ("knees?" -> "knee", "knees"); an
    alternative that is a pattern ("dumbb?ells?") names no one word and is left out."""
    words: set[str] = set()
    for pattern in patterns:
        for alternative in "".join(line.strip() for line in pattern.splitlines()).split("|"):
            if (m := _PLAIN.match(alternative)) is not None:
                words.update([m[1], m[1] + "s"] if m[2] else [m[1]])
    return frozenset(words)


@dataclass(frozen=True)
class Speller:
    often_mistyped: frozenset[str]
    item_words: frozenset[str]
    known: frozenset[str]  # the words the table reads: never a typo
    shorthand: Mapping[str, str]
    short: re.Pattern[str]  # any word of `shorthand`

    @classmethod
    def of(
        cls,
        often_mistyped: frozenset[str],
        item_words: frozenset[str],
        known: frozenset[str],
        shorthand: Mapping[str, str],
    ) -> "Speller":
        short = re.compile(rf"\b(?:{'|'.join(map(re.escape, shorthand)) or '(?!)'})\b", re.IGNORECASE)
        return cls(often_mistyped, item_words - often_mistyped, known, dict(shorthand), short)

    def _stem(self, word: str) -> str | None:
        """The word the table reads that `word` is, or is a form of ("lunches" of "lunch")."""
        if word in self.known:
            return word
        return next(
            (word[: -len(end)] for end in _ENDINGS if word.endswith(end) and word[: -len(end)] in self.known), None
        )

    def _meant(self, word: str) -> str | None:
        """The closest word of either tier, each at its likeness, that starts as `word` does."""
        close = get_close_matches(word, self.often_mistyped, n=1, cutoff=_LOOSE)
        if len(word) >= _ITEM_WORD_FROM:
            close += get_close_matches(word, self.item_words, n=1, cutoff=_CLOSE)
        close = [meant for meant in close if meant[0] == word[0]]
        return max(close, key=lambda meant: SequenceMatcher(None, word, meant).ratio(), default=None)

    def spelled(self, text: str) -> str:
        """`text` with its shorthand and its misspelt words read as meant."""
        text = self.short.sub(lambda m: self.shorthand[m[0].lower()], text)

        def fix(match: re.Match[str]) -> str:
            word = match[0].lower()
            stem = self._stem(word)
            meant = None if word in self.often_mistyped or stem == word else self._meant(word)
            # A form of a known word is no typo, unless it misspells a form of that word: a doubled
            # letter left out before an ending that doubles it ("swiming"; "weighs" stays).
            misspelt_form = (
                stem is not None and word.endswith(_DOUBLING) and meant is not None and meant.startswith(stem)
            )
            return meant if meant is not None and (stem is None or misspelt_form) else match[0]

        return _WORD.sub(fix, text)
