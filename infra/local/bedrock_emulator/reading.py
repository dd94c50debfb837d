"""How the scripted coach reads one client message: what kind of message it is (a greeting, a
question, a request, a bare yes or no, an acknowledgement, an answer put off), and which onboarding
items it answers, each with its own part of the message (docs/decisions/0024-local-coach.md).

A stand-in for a model's understanding, written down as one table (reading.toml): per item, what an
answer to it contains anywhere, what answers it only right after it was asked (a bare "no", a bare
number), what makes a match something else, and the words that name it. A message is read as a
careful person reads it: every item it answers, each part under its own item; an item already known
only when the message corrects it or answers nothing else; where two readings claim the same words,
the longer one wins, then the item just asked; a message that answers nothing files nothing.
Nothing here reads the memory: the caller says which items are asked, open and known.
"""

import re
import tomllib
from bisect import bisect_right
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from infra.local.bedrock_emulator import quantities
from infra.local.bedrock_emulator.spelling import Speller, plain_words

_TABLE = tomllib.loads(Path(__file__).with_name("reading.toml").read_text(encoding="utf-8"))
_WORDS: dict[str, str] = {}


def _pattern(written: str) -> str:
    """A pattern of the table: its lines joined, each <name> replaced by that word list."""
    joined = "".join(line.strip() for line in written.splitlines())
    return re.sub(r"<([a-z_]+)>", lambda m: f"(?:{_WORDS[m[1]]})", joined)


for _name, _written in _TABLE["words"].items():
    _WORDS[_name] = _pattern(_written)
# Health words ([health]): every category but the allergic reactions is a limitation (<health>);
# an allergic reaction is an allergy (<allergic_reaction>), wherever it is said.
_WORDS["allergic_reaction"] = _pattern(_TABLE["health"]["allergic_reaction"])
_WORDS["health"] = "|".join(
    f"(?:{_pattern(written)})" for category, written in _TABLE["health"].items() if category != "allergic_reaction"
)


@dataclass(frozen=True)
class Item:
    """What an answer to one item looks like (reading.toml says what each part means)."""

    says: re.Pattern[str]
    names: re.Pattern[str]
    asked: re.Pattern[str] | None = None
    unless: re.Pattern[str] | None = None
    closed: bool = False
    owns_clause: bool = False
    alone: bool = False
    group: str | None = None


def _compiled(written: str | None) -> re.Pattern[str] | None:
    return None if written is None else re.compile(_pattern(written), re.IGNORECASE)


# Keyed by the item's field name (the prompt's `Collect` list and the save tools use the same keys).
ITEMS: dict[str, Item] = {
    field: Item(
        re.compile(_pattern(spec["says"]), re.IGNORECASE),
        re.compile(_pattern(spec["names"]), re.IGNORECASE),
        _compiled(spec.get("asked")),
        _compiled(spec.get("unless")),
        closed=spec.get("closed", False),
        owns_clause=spec.get("owns_clause", False),
        alone=spec.get("alone", False),
        group=spec.get("group"),
    )
    for field, spec in _TABLE["items"].items()
}
# A goal with an amount also gives the target ("lose 5 kg"): the two may share words.
_NESTED = {("primary_goal", "target"), ("target", "primary_goal")}
_AMOUNT = re.compile(_WORDS["amount"], re.IGNORECASE)
# Health words are news wherever they are said: a condition of the [health] table, or an allergic
# reaction, is filed even when its item is known and the message answers something else ("gym, but
# I have a frozen shoulder" when the injuries were "none").
_NEWS = {
    "limitations": re.compile(rf"\b(?:{_WORDS['health']})\b", re.IGNORECASE),
    "allergies": re.compile(_WORDS["allergic_reaction"], re.IGNORECASE),
}
# What kind of message it is (a question, an answer put off, a correction ...), and word lists.
KINDS = {name: re.compile(_pattern(written), re.IGNORECASE) for name, written in _TABLE["kinds"].items()}
SETS = {name: frozenset(words.split()) for name, words in _TABLE["sets"].items()}


def _strings(value: object) -> list[str]:
    if isinstance(value, dict):
        return [text for inner in value.values() for text in _strings(inner)]
    return [value] if isinstance(value, str) else []


# Typos and shorthand (spelling.py): the words often mistyped, every plain word of the word lists
# an answer names things by, and the words the table reads, which are no typo.
SPELLER = Speller.of(
    SETS["spellings"],
    plain_words(_TABLE["words"][name] for name in ("body", "kit", "exercise")),
    frozenset(re.findall(r"[a-z]{3,}", " ".join(_strings(_TABLE)).lower())),
    _TABLE["shorthand"],
)


# Where a message is cut into parts; not before a part that only compares with the one before it
# ("30-45 mins, more on sundays" is one cooking time, not a cooking time and training days). A "so"
# that opens what follows from the part before starts a part ("I stopped spin so it's just yoga now").
_CLAUSE_BREAK = re.compile(
    rf"[,.;!?]+(?!\s*(?:{_WORDS['comparative']})\b)\s*"
    r"|\s+(?:and|but|though|although|plus|also|btw|by the way|except)\b\s*|\s*(?:—|–|\s-\s)\s*"
    rf"|\s+so\s+(?=(?:{_WORDS['so_opens']})\b)",
    re.I,
)
_GREETING = re.compile(rf"(?<![\w])(?:{_WORDS['greeting']})(?![\w])", re.IGNORECASE)
_NOT_WORDS = re.compile(r"[\W_]+", re.UNICODE)
_NOT_PART = re.compile(r",?\s+not\s+[^,.;]*$", re.IGNORECASE)
# The words a message names an item with, around its answer ("my goal is X", "X is my injury").
_NAMED_FIRST = (
    r"^\W*(?:my\s+)?(?:(?:main|new|primary|real|biggest|only)\s+)?(?:{names})\s*(?:is|are|was|:|=|to)\s+"
    r"(?:now\s+)?(?:to\s+)?(?P<value>.+)$"
)
_NAMED_LAST = r"^\W*(?P<value>.+?)\s+(?:is|are)\s+my\s+(?:{names})\W*$"
_NAMED = {  # per item, compiled once: a message is read part by part
    field: tuple(re.compile(form.format(names=item.names.pattern), re.I) for form in (_NAMED_FIRST, _NAMED_LAST))
    for field, item in ITEMS.items()
}
# The items whose answer is several quantities, each known by its unit (quantities.py): a
# correction changes the parts it gives and adds those the answer lacks.
_PARTS = frozenset({"age_and_body"})
_READ_CHARS = 1000  # a pasted page is read by its beginning (where its answers are), and read fast


def is_greeting(text: str) -> bool:
    """Only a greeting (in any of the languages above, with a name, "coach" or emoji around it)."""
    if _GREETING.search(text) is None:
        return False
    left = KINDS["filler"].sub(" ", _GREETING.sub(" ", text).lower())
    words = [w for w in _NOT_WORDS.split(left) if w]
    names = [w for w in _NOT_WORDS.split(_GREETING.sub(" ", text)) if w[:1].isupper()]
    return not words or (len(words) == 1 and len(names) == 1)


def is_question(text: str) -> bool:
    """It asks something back ("Is coffee okay?", "what do you know about me"): not an answer. Its
    last sentence decides: "how do you want reminders? whatever, text me" answers. A hedged answer
    is no question for its "?" ("intermediate-ish?", "maybe 3 or 4?", "Berlin?")."""
    said = plain(text).strip()
    last = _sentences(said)[-1] if said else said
    if not last.endswith("?"):
        return KINDS["question_start"].match(last) is not None and len(last.split()) > 2
    return _asks(last)


# Sentences, each with its "?" ("how do you want reminders? whatever, text me").
_AFTER_QUESTION_MARK = re.compile(r"(?<=\?)\s+")


def _sentences(text: str) -> list[str]:
    return [sentence for sentence in _AFTER_QUESTION_MARK.split(text) if sentence.strip()] or [text]


def _asks(sentence: str) -> bool:
    """A sentence ending in "?" asks something, unless it is a hedged answer: one that does not
    open as a question ("what", "is", "can you"), does not say "you", and reads as an answer to
    some item ("the gym at work?", "3-4?"); "as many as I need?" reads as none, so it asks."""
    body = sentence.rstrip(" ?")
    if KINDS["question_start"].match(body) or KINDS["request"].match(body) or KINDS["to_the_coach"].search(body):
        return True
    return not _answer_shaped(body)


def _answer_shaped(text: str) -> bool:
    parts = [text[a:b] for a, b in _clauses(text)]
    return any(
        item.says.search(text) is not None or (item.asked is not None and any(item.asked.search(p) for p in parts))
        for item in ITEMS.values()
    )


def plain(text: str) -> str:
    """The message as it is read, each rule a kind of answer ([kinds] in reading.toml): a range is
    one range whatever its dash ("5–6" -> "5-6"), hedge marks and filler words are left out
    ("kinda beginner tbh lol" -> "beginner", "intermediate-ish" -> "intermediate"), a qualifier after
    an answer too ("3 or 4 depending on work" -> "3 or 4"), and "like" where it is no verb ("I jog
    like twice a week" -> "I jog twice a week"; "I like running" stays)."""
    text = KINDS["range_dash"].sub("-", text)
    text = KINDS["hedge_mark"].sub("", text)
    text = KINDS["qualifier"].sub("", text)
    text = KINDS["filler_words"].sub("", text)
    return " ".join(_LIKE.sub(lambda m: "" if _filler_like(text, m) else m[0], text).split())


_LIKE = re.compile(r"[,\s]*\blike\b(?P<comma>\s*,)?", re.IGNORECASE)
_LAST_WORD = re.compile(r"([\w'’]+)\W*$")


def _filler_like(text: str, like: re.Match[str]) -> bool:
    """Filler words: "like" said to fill, not to like ([kinds] like_before, like_object)."""
    before, after = text[: like.start()], text[like.end() :]
    last = _LAST_WORD.search(before)
    if last is not None and last[1].lower().replace("’", "'") in SETS["like_verb_before"]:
        return False  # "I like running", "I'd really like to"
    if like["comma"] or "," in like[0] or KINDS["like_before"].match(after):
        return True  # "like 3", "like twice", "I'm, like, a beginner"
    opens = not before.strip() or before.rstrip()[-1] in ",.;:!?"
    return opens and KINDS["like_object"].match(after) is None  # "like intermediate", not "like swimming"


def is_request(text: str) -> bool:
    """It asks the coach to do something ("tell me my plan", "can you recap"): not an answer."""
    return KINDS["request"].match(text) is not None


def is_yes_or_no(text: str) -> bool:
    return KINDS["yes_no"].match(text) is not None


def is_acknowledgement(text: str) -> bool:
    words = [word.strip(".,!?;:'\"“”‘’()").lower() for word in text.split()]
    words = [word for word in words if word]
    return 0 < len(words) <= 3 and all(word in SETS["acknowledgements"] for word in words)


def says_nothing(text: str) -> bool:
    """No letter or digit at all (an emoji, "...")."""
    return not any(character.isalnum() for character in text)


def named_items(text: str, among: Collection[str]) -> list[str]:
    """The items among `among` that `text` names ("my training time", "what's my goal?"), the
    longest naming first ("training days" over "days")."""
    found = [(len(m.group(0)), field) for field in among if (m := ITEMS[field].names.search(text)) is not None]
    return [field for _, field in sorted(found, key=lambda pair: -pair[0])]


@dataclass(frozen=True)
class _Span:
    field: str
    start: int
    end: int

    def overlaps(self, other: "_Span") -> bool:
        return self.start < other.end and other.start < self.end


def _clauses(text: str) -> list[tuple[int, int]]:
    bounds, start = [], 0
    for brk in _CLAUSE_BREAK.finditer(text):
        bounds.append((start, brk.start()))
        start = brk.end()
    return [(a, b) for a, b in [*bounds, (start, len(text))] if b > a]


def _after_leads(text: str, clauses: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Each part without the words that lead into it: "actually make that 5" answers as "5" does."""
    return [(a + (m.end() if (m := KINDS["lead"].match(text[a:b])) else 0), b) for a, b in clauses]


def _candidates(text: str, fields: Collection[str], asked: str | None) -> list[_Span]:
    clauses = _clauses(text)
    starts = [a for a, _ in clauses]
    spans: set[_Span] = set()
    blocked: dict[tuple[str, int], bool] = {}  # per item and part: a long message is read once
    for field in fields:
        item = ITEMS[field]
        found = [(m.start(), m.end(), m[0]) for m in item.says.finditer(text, 0, _READ_CHARS)]
        if field == asked and item.asked is not None:  # part by part: ^ and $ are a part's ends, after its lead
            found += [
                (a + m.start(), a + m.end(), m[0])
                for a, b in _after_leads(text, clauses[:50])
                for m in item.asked.finditer(text[a:b])
            ]
        for a, b in clauses[:50]:  # a part that names the item answers it ("my main goal is now a half marathon"),
            if any(a <= start < b for start, _, _ in found):  # when nothing in it reads as an answer already
                continue
            named = _NAMED[field][0].match(KINDS["lead"].sub("", text[a:b]))
            if named is not None:
                found.append((b - len(named["value"]), b, named["value"]))
        for start, end, said in found:
            a, b = clauses[bisect_right(starts, start) - 1] if starts else (start, end)
            if end == start or not a <= start < b:
                continue
            if (field, a) not in blocked:  # about someone else, or made something else by its words
                other = KINDS["someone_else"].match(text[a:b]) is not None
                blocked[field, a] = other or (item.unless is not None and item.unless.search(text[a:b]) is not None)
            if blocked[field, a] or (item.alone and field != asked and said != text[a:b].strip()):
                continue
            spans.add(_Span(field, a, b) if item.owns_clause else _Span(field, start, end))
    return sorted(spans, key=lambda s: (s.start, s.end, s.field))


def _resolve(spans: list[_Span], asked: str | None, known: Collection[str]) -> list[_Span]:
    """Where two readings claim the same words: the longer one, then the item asked, then an
    open item over a known one; a goal and its target may share words."""
    order = sorted(spans, key=lambda s: (-(s.end - s.start), s.field != asked, s.field in known, s.start))
    kept: list[_Span] = []
    for span in order:
        rivals = [k for k in kept if k.overlaps(span) and k.field != span.field]
        if all((k.field, span.field) in _NESTED for k in rivals):
            kept.append(span)
    return sorted(kept, key=lambda s: s.start)


def _absorbed(spans: list[_Span], text: str, asked: str | None) -> list[_Span]:
    """In a part of the message that answers the item asked, or an item that is no plan detail, a
    plan detail of another kind qualifies that answer ("20 minutes on weekdays" is cooking time)."""
    kept: list[_Span] = []
    for a, b in _clauses(text):
        inside = [s for s in spans if a <= s.start < b]
        fields = {s.field for s in inside}
        anchor = asked if asked in fields else next((f for f in fields if ITEMS[f].group is None), None)
        group = ITEMS[anchor].group if anchor is not None else None
        kept += [s for s in inside if anchor is None or s.field == asked or ITEMS[s.field].group in (None, group)]
    return kept


def _value(field: str, text: str) -> str:
    """The part's words, without what only names the item ("my goal is to lose fat" -> "lose fat")."""
    greeting = next((a for a, b in _clauses(text) if not is_greeting(text[a:b])), 0)  # "Hi! I'm a beginner"
    value = KINDS["lead"].sub("", text[greeting:]).strip(" ,;:-.!?")  # "?": a hedge's ("Berlin?")
    for named in _NAMED[field]:
        if (m := named.match(value)) is not None:
            return m["value"].strip(" ,;:-.!?")
    return value


def read(text: str, asked: str | None, open_items: Collection[str], known: Collection[str]) -> dict[str, str]:
    """The items `text` answers, each with its part of the message (the whole message when it
    answers one). An item in `known` is answered again only when the message says it changes
    (a correction), answers nothing else, or names a condition or an allergic reaction (health
    words are news); when the message names items, only those. It is read
    plain (hedge marks and filler words left out), and a question it asks before its answer is
    set aside ("how do you want reminders? whatever, text me" -> "whatever, text me")."""
    text = " ".join(s for s in _sentences(SPELLER.spelled(plain(text))) if not (s.endswith("?") and _asks(s)))
    fresh = [f for f in {*open_items, *([asked] if asked else [])} if f in ITEMS]
    spans = _candidates(text, fresh, asked)
    if KINDS["correction"].search(text) is not None or not spans:
        old = [f for f in known if f in ITEMS and f not in fresh]
        spans += _candidates(text, named_items(text, old) or old, None)
    news = [field for field, said in _NEWS.items() if field in known and field not in fresh and said.search(text)]
    spans += [
        s for s in _candidates(text, news, None) if _NEWS[s.field].search(text, s.start, s.end) and s not in spans
    ]
    spans = _absorbed(_resolve(spans, asked, known), text, asked)
    fields = list(dict.fromkeys(s.field for s in spans))
    values = {fields[0]: _value(fields[0], text)} if len(fields) == 1 else _parts(spans, text)
    if "training_days" in values and asked == "days_per_week" and "days_per_week" not in values:
        values["days_per_week"] = values["training_days"]  # "only weekends": which days, and how many
    return {field: values[field] for field in ITEMS if field in values}


def _parts(spans: list[_Span], text: str) -> dict[str, str]:
    """Each item's own part of a message that answers several: from where its part of the message
    starts (or its words, when something before them there answers another item) to where the next
    item's starts; a target inside a goal ("lose 5 kg") is its amount alone."""
    clauses = _clauses(text)
    nested = [
        s for s in spans if s.field == "target" and any(o.field == "primary_goal" and o.overlaps(s) for o in spans)
    ]
    own = [s for s in spans if s not in nested]
    starts: list[tuple[int, str]] = []
    for span in own:
        clause = next((a for a, b in clauses if a <= span.start < b), span.start)
        earlier = any(clause <= s.start < span.start and s.field != span.field for s in own)
        if not starts or starts[-1][1] != span.field:
            starts.append((0 if not starts else span.start if earlier else clause, span.field))
    values: dict[str, str] = {}
    for position, (begin, field) in enumerate(starts):
        end = starts[position + 1][0] if position + 1 < len(starts) else len(text)
        if not any(a < end < b for a, b in clauses):  # a part ends where its clause does, before "and"
            end = max((b for a, b in clauses if b <= end), default=end)
        part = _value(field, text[begin:end])
        values[field] = f"{values[field]}, {part}" if values.get(field) else part
    for span in nested:
        amount = _AMOUNT.search(text, span.start, span.end)
        values.setdefault("target", amount.group(0) if amount else text[span.start : span.end])
    return {field: value for field, value in values.items() if value}


def corrected_value(field: str, old: str, said: str) -> str:
    """What the answer becomes when the client corrects it with `said`: in a compound answer
    ("34, 180 cm, 85 kg") only the parts the message gives change ("actually I'm 80 kg now" ->
    "34, 180 cm, 80 kg") and a part it lacks is added; a quantity of another answer changes by its
    unit ("lose 10 kg" -> "lose 12 kg"); an item with a small set of answers takes the one the
    message names (not one it rules out: "vegan not vegetarian"); else the message without its
    correction words."""
    changed = quantities.corrected(old, said, compound=field in _PARTS)
    if changed != old:
        return changed
    item = ITEMS[field]
    if item.closed:
        for m in item.says.finditer(said):
            if not re.search(r"\bnot\s+(?:\w+\s+)?$", said[: m.start()], re.IGNORECASE):
                return m.group(0).strip()
    return _value(field, " ".join(KINDS["change_words"].sub(" ", _NOT_PART.sub("", said)).split())) or said
