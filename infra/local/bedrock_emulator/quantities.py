"""What a number in a client's message is, by its unit: a weight (kg, lb, stone), a height (cm,
m, ft, in, ' and "), an age (years, y/o, "I'm 34" with no unit, "age 34"). The compound answer
`age_and_body` ("34, 180 cm, 85 kg") is read part by part with it, so a correction changes only
the part it names and a part the answer lacks is added; a history of that answer can be told by
one part ("what did I weigh?") (docs/decisions/0024-local-coach.md).

A number a target leads into ("get to 75", "down to 70") is never an age: a message is read for an
age only where an age is said as one.
"""

import re
from dataclasses import dataclass

KINDS = ("age", "height", "weight")  # the order a compound answer says them in
_WEIGHT_UNIT = r"(?:kg|kgs|kilos?|kilograms?|lbs?|pounds?|stones?|st)\b"
_HEIGHT_UNIT = r"(?:cm|m|ft|foot|feet|inches)\b|['’\"”]"
_TENS = (
    r"(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)"
    r"(?:[- ](?:one|two|three|four|five|six|seven|eight|nine)\b)?"
)
_AGE_NUMBER = rf"(?:\d{{2}}|{_TENS})"
# What may follow an age said with no unit: not a unit, a decimal, a share, a distance or a count.
_NO_UNIT = rf"(?![.,]\d|\s*(?:{_WEIGHT_UNIT}|{_HEIGHT_UNIT}|%|k\b|km|mins?\b|minutes|days?\b|times\b|reps\b))"
# The words that lead a number into a goal or a range: what follows them is the client's target, not
# their age, height or weight now.
_LEADS_ELSEWHERE = re.compile(
    r"\b(?:to|get to|down to|reach|hit|from|lose|drop|shed|gain|under|below|over|target|goal|aim(?:ing)? for)"
    r"\s+(?:about\s+|around\s+|roughly\s+|maybe\s+)?$",
    re.IGNORECASE,
)
_SAID_AS_AGE = (
    r"\b(?:i(?:'|’| a)?m|age[d:]?|age is|turning|turned)\s*"
    r"(?:now\s+|turning\s+|only\s+|just\s+|actually\s+|really\s+|:\s*)?"  # "I'm actually 35"
)
# Per kind, the shapes of its quantity; the group `q` is the part's words.
PATTERNS: dict[str, tuple[re.Pattern[str], ...]] = {
    kind: tuple(re.compile(shape, re.IGNORECASE) for shape in shapes)
    for kind, shapes in {
        "weight": (
            r"\b(?P<q>\d{1,3}(?:[.,]\d+)?\s*(?:stones?|st)\b(?:\s*\d{1,2}\s*(?:lbs?|pounds?)?\b)?)",
            rf"\b(?P<q>\d{{2,3}}(?:[.,]\d+)?\s*{_WEIGHT_UNIT})",
            r"\bweigh(?:t|ing)?\s*(?:is\s+|of\s+|:\s*)?(?:about\s+|around\s+|roughly\s+)?(?P<q>\d{2,3}(?:[.,]\d+)?)\b",
        ),
        "height": (
            r"\b(?P<q>\d{3}\s*cm)\b",
            r"\b(?P<q>[12][.,]\d{1,2}\s*m)\b",
            r"\b(?P<q>\d\s*(?:'|’|ft\b|foot\b|feet\b)(?:\s*\d{1,2}\b(?:\s*(?:\"|”|in\b|inches\b))?)?)",
            r"\b(?P<q>\d{2}\s*(?:\"|”|inches\b))",
            r"\bheight\s*(?:is\s+|of\s+|:\s*)?(?P<q>\d{3})\b",
            r"\b(?P<q>\d{3})\s+tall\b",
        ),
        "age": (
            rf"\b(?P<q>{_AGE_NUMBER}\s*(?:years?(?:\s+old)?|yrs?|y/?o)\b)",
            rf"{_SAID_AS_AGE}(?P<q>{_AGE_NUMBER})\b{_NO_UNIT}",
        ),
    }.items()
}
# A compound answer's age said first with no unit ("34, 180 cm, 85 kg", "34", "23 / 182 / 77").
_LEADING_AGE = re.compile(rf"^\W*(?P<age>{_AGE_NUMBER})\b{_NO_UNIT}(?=\s*(?:[,/;]|$))", re.IGNORECASE)
_BY_POSITION = re.compile(r"^\W*(\d{2})\s*[/,]\s*(\d{3})\s*[/,]\s*(\d{2,3})\W*$")
_NUMBER = re.compile(rf"\d+(?:[.,]\d+)?|{_TENS}", re.IGNORECASE)
_BARE_AGE = re.compile(rf"\b(?P<age>{_AGE_NUMBER})\b{_NO_UNIT}", re.IGNORECASE)


@dataclass(frozen=True)
class Part:
    """One quantity of a text: its kind, where it is and its words ("85 kg", "34 years old")."""

    kind: str
    start: int
    end: int
    text: str

    @property
    def number(self) -> str:
        found = _NUMBER.search(self.text)
        return found.group(0) if found else self.text

    @property
    def has_unit(self) -> bool:
        return self.text.strip() != self.number


def parts(text: str, stored: bool = False, body: bool = True) -> dict[str, Part]:
    """The age, height and weight `text` says, each by its unit (the first of each kind). A
    message gives an age only as an age ("34 years old", "I'm 34", "age 34", a compound answer
    that starts with it); a `stored` age_and_body answer also by a number no unit claims, or by
    position ("23 / 182 / 77"). Of the client's `body`, a number a goal leads into is none."""
    if stored and (m := _BY_POSITION.match(text)) is not None:
        return {kind: Part(kind, m.start(i), m.end(i), m[i]) for i, kind in enumerate(KINDS, start=1)}
    found: dict[str, Part] = {}
    for kind in ("weight", "height", "age"):  # units first: "I'm 84 kg" is a weight, never an age
        matches = sorted(
            (m for pattern in PATTERNS[kind] for m in pattern.finditer(text)), key=lambda m: (m.start("q"), -m.end("q"))
        )
        for m in matches:
            if not _claimed(found, m.start("q"), m.end("q"), text, body):
                found[kind] = Part(kind, m.start("q"), m.end("q"), m["q"].strip())
                break
    if "age" not in found:
        leading = _LEADING_AGE.match(text)
        bare = [leading] if leading is not None else list(_BARE_AGE.finditer(text)) if stored else []
        for m in bare:
            if not _claimed(found, m.start("age"), m.end("age"), text, body):
                found["age"] = Part("age", m.start("age"), m.end("age"), m["age"])
                break
    return found


def _claimed(found: dict[str, Part], start: int, end: int, text: str, body: bool) -> bool:
    """The words are another part's, or (of the body now) a goal's ("get to 75", "lose 5 kg")."""
    taken = any(p.start < end and start < p.end for p in found.values())
    return taken or (body and _LEADS_ELSEWHERE.search(text[:start]) is not None)


def _replacement(old: Part, new: Part) -> str:
    """The new part in the old one's words: an age keeps how it was said ("I'm 34" -> "I'm 35"); a
    height or weight takes the new unit, or the old one when the message gives none."""
    if old.kind == "age" or not new.has_unit:
        return old.text.replace(old.number, new.number, 1)
    return new.text


def _added(new: Part) -> str:
    return new.text if new.has_unit or new.kind != "age" else f"{new.number} years old"


def corrected(old: str, said: str, compound: bool) -> str:
    """`old` with the parts `said` gives changed, each kept in place; in a `compound` answer a
    part `old` lacks is added after the others ("I'm 34 years old" + "I'm 84 kg now" -> "I'm 34
    years old, 84 kg")."""
    given = parts(said, body=compound)
    held = parts(old, stored=compound, body=compound)
    changed = old
    for kind in sorted(given, key=lambda k: -held[k].start if k in held else 0):
        if kind in held and held[kind].number != given[kind].number:
            part = held[kind]
            changed = changed[: part.start] + _replacement(part, given[kind]) + changed[part.end :]
    if compound:
        extra = [_added(given[kind]) for kind in KINDS if kind in given and kind not in held]
        if extra:
            changed = ", ".join([changed.rstrip(" .,;!"), *extra])
    return changed


def part_of(kind: str, value: str) -> str | None:
    """The words of a stored age_and_body answer that say `kind` ("80 kg" of "I'm 34, 80 kg")."""
    part = parts(value, stored=True).get(kind)
    return part.text if part is not None else None


# What a question about one part of the body answer asks about ("what did I weigh?").
_ASKS = {
    "weight": re.compile(r"\b(?:weigh\w*|weight|heav\w*|kilos?|kg|pounds|lbs?|stones?)\b", re.IGNORECASE),
    "height": re.compile(r"\b(?:height|tall|short)\b", re.IGNORECASE),
    "age": re.compile(r"\b(?:age|old|years?|birthdays?)\b", re.IGNORECASE),
}


def kind_asked(question: str) -> str | None:
    """Which part of the body answer `question` asks about, if one: its age, height or weight."""
    asked = [kind for kind, pattern in _ASKS.items() if pattern.search(question)]
    return asked[0] if len(asked) == 1 else None


_BARE_TARGET = re.compile(
    r"\b(?:get (?:down )?to|down to|reach|hit)\s+(?:about\s+|around\s+)?(?P<n>\d{2,3}(?:[.,]\d+)?)\W*$", re.IGNORECASE
)


def target_in_units(value: str, message: str) -> str:
    """A target said as a bare number to reach ("would love to get to 75"), in the weight unit the
    same message gives the client's weight in ("I'm 84 kg now" -> "75 kg"); else `value`."""
    target = _BARE_TARGET.search(value)
    weight = parts(message).get("weight")
    unit = re.search(_WEIGHT_UNIT, weight.text, re.IGNORECASE) if weight is not None else None
    return f"{target['n']} {unit.group(0)}" if target is not None and unit is not None else value
