"""How the scripted coach reads one client message: what kind of message it is (a greeting, a
question, a request, a bare yes or no, an acknowledgement, or something that may answer an item),
which onboarding items it plausibly answers, and what a correction changes in a compound answer.

A stand-in for a model's understanding, written down as rules (docs/decisions/0024-local-coach.md):
each item has a few words or shapes an answer to it contains. Items with a closed set of answers
(a level, a number of days, a time zone) accept only those; open items (a motivation, what the
client likes) accept any message that says something. Nothing here reads the memory: the coach
gets the items and values from the prompt it is sent.
"""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_DAY = r"(?:mon|tues?|wed(?:nes)?|thu(?:rs)?|fri|sat(?:ur)?|sun)(?:day)?s?"
_NUMBER = r"(?:\d+|one|two|three|four|five|six|seven|once|twice)"


@dataclass(frozen=True)
class ItemShape:
    """What an answer to one item contains; `strict`: nothing else answers it."""

    pattern: re.Pattern[str]
    strict: bool


def _shape(pattern: str, strict: bool) -> ItemShape:
    return ItemShape(re.compile(pattern, re.IGNORECASE), strict)


# Keyed by the item's field name (the prompt's `Collect` list and the save tools use the same keys).
SHAPES: dict[str, ItemShape] = {
    "fitness_level": _shape(r"\b(?:beginner|novice|intermediate|advanced|unfit|out of shape|very fit|fit)\b", True),
    "current_activity": _shape(
        rf"\b(?:run|runs|running|jog\w*|walk\w*|gym|swim\w*|cycl\w*|bike|yoga|pilates|lift\w*|train\w*|"
        rf"sport|football|tennis|dance|hike|nothing|none|no exercise|{_NUMBER} times?|every day|daily)\b",
        False,
    ),
    "limitations": _shape(
        r"\b(?:injur\w*|pain\w*|knee|back|shoulder|ankle|hip|wrist|neck|asthma|diabet\w*|condition\w*|hurts?|"
        r"sore|surgery|pregnan\w*|heart|blood pressure|none|nothing|no)\b",
        False,
    ),
    "age_and_body": _shape(
        r"\b\d{2,3}\s*(?:kg|kgs|kilos?|lbs?|pounds|cm|years?|y/?o)\b|\b\d{2}\s*,|\b[1-2]\.\d{1,2}\s*m\b|"
        r"\b\d'\d{1,2}|\bI(?:'| a)?m \d{2}\b",
        True,
    ),
    "primary_goal": _shape(
        r"\b(?:lose|losing|build|gain|fitter|muscle|fat|strong\w*|marathon|\d+k|tone|health\w*|weight|run)\b", False
    ),
    "target": _shape(r"\d|\b(?:bodyweight|pull-?ups?|push-?ups?|marathon|size)\b", False),
    "timeline": _shape(
        r"\b(?:by|within|before|until|in (?:\d+|a|one|two|three|four|five|six|a few) \w+)\b|"
        r"\b\d+\s*(?:weeks?|months?|years?)\b|\b(?:summer|winter|spring|autumn|christmas|birthday|"
        r"january|february|march|april|may|june|july|august|september|october|november|december|asap|"
        r"next (?:week|month|year))\b",
        True,
    ),
    "motivation": _shape(r"\b(?:because|so (?:that|i)|want|wedding|kids|health|doctor|feel|confiden\w*)\b", False),
    "days_per_week": _shape(rf"\b{_NUMBER}\s*(?:days?|times?|x)\b|^\s*\d\s*$|\bevery day\b", True),
    "session_length": _shape(r"\b\d+\s*(?:min\w*|h|hours?|hrs?)\b|\b(?:half an hour|an hour|hour)\b", True),
    "equipment": _shape(
        r"\b(?:home|gym|dumbbells?|bands?|kettlebells?|barbell|bench|mat|nothing|none|bodyweight|park|garage|"
        r"outside|treadmill|bike|equipment)\b",
        False,
    ),
    "exercise_preferences": _shape(r"\b(?:love|hate|avoid|enjoy|like|prefer|no|not|never|favou?rite)\b", False),
    "dietary_pattern": _shape(
        r"\b(?:vegetarian|vegan|halal|kosher|keto|paleo|pescatarian|omnivore|flexitarian|mediterranean|"
        r"gluten|everything|anything|no particular|nothing special|normal|none|no)\b",
        True,
    ),
    "allergies": _shape(
        r"\b(?:allerg\w*|intoleran\w*|lactose|gluten|dairy|nuts?|peanuts?|shellfish|eggs?|soy|wheat|"
        r"none|nothing|no)\b",
        True,
    ),
    "meals_per_day": _shape(rf"\b{_NUMBER}\b|\bmeals?\b", True),
    "cooking": _shape(r"\b(?:cook\w*|\d+\s*min\w*|hours?|quick|little|no time|meal prep|batch)\b", False),
    "training_days": _shape(rf"\b(?:{_DAY}|weekends?|weekdays?|every day|daily)\b", True),
    "training_time": _shape(
        r"\b(?:morning|evening|afternoon|lunch\w*|noon|night|\d{1,2}\s*(?:am|pm)|\d{1,2}:\d{2}|"
        r"before work|after work|early|late)\b",
        True,
    ),
    "timezone": _shape(
        r"\b(?:utc|gmt|[a-z]+/[a-z_]+|[ecmp][sd]t|cet|cest|bst|ist|jst|aest|time ?zone|london|lisbon|paris|"
        r"berlin|madrid|new york|chicago|los angeles|tokyo|sydney|singapore|toronto)\b|[+-]\d{1,2}(?::?\d{2})?\b",
        True,
    ),
    "check_ins": _shape(
        r"\b(?:daily|weekly|every|once|twice|sms|text\w*|app|monthly|mornings?|evenings?|sundays?|mondays?)\b",
        True,
    ),
}

# Greetings and farewells in the languages most clients write in: a greeting answers no item.
_GREETING_WORDS = (
    "hi|hello|hey|hiya|howdy|yo|morning|evening|afternoon|good morning|good evening|good afternoon|"
    "hola|buenas|bonjour|salut|coucou|hallo|servus|moin|ciao|salve|olá|ola|oi|hej|hei|moi|ahoj|cześć|"
    "czesc|szia|merhaba|selam|namaste|namaskar|salaam|salam|shalom|sawubona|jambo|habari|xin chào|"
    "kamusta|halo|apa kabar|sawasdee|привет|здравствуйте|добрый день|вітаю|привіт|γεια|γειά σου|"
    "你好|您好|嗨|哈囉|こんにちは|こんばんは|おはよう|안녕|안녕하세요|مرحبا|السلام عليكم|سلام|שלום|नमस्ते|"
    "হ্যালো|வணக்கம்|สวัสดี"
)
_GREETING = re.compile(rf"(?<![\w])(?:{_GREETING_WORDS})(?![\w])", re.IGNORECASE)
_FILLER = re.compile(r"(?<![\w])(?:there|coach|again|everyone|all|guys|friend|it's me|its me|sir|madam)(?![\w])")
# What is left of a greeting once its words, names and emoji are gone: punctuation and spaces.
_NOT_WORDS = re.compile(r"[\W_]+", re.UNICODE)

_QUESTION_START = re.compile(
    r"^\s*(?:what|what's|whats|when|where|which|who|why|how|is|are|am|do|does|did|can|could|should|would|"
    r"will|may|shall)\b",
    re.IGNORECASE,
)
_REQUEST = re.compile(
    r"^\s*(?:(?:please|pls|ok|okay|so)[,\s]+)?(?:can you|could you|would you|will you|tell me|show me|remind me|"
    r"give me|help me|explain|list|repeat|let's|lets|i want you to|i'd like you to)\b",
    re.IGNORECASE,
)
_YES_NO = re.compile(
    r"^\s*(?:yes|yeah|yep|yup|sure|no|nope|nah|maybe|ok|okay)\s*[.!]*\s*$",
    re.IGNORECASE,
)
_ACKNOWLEDGEMENTS = frozenset(
    "ok okay k kk thanks thank you thx ty cheers cool great nice sure alright got it sounds good perfect awesome "  # noqa: SIM905
    "fine right".split()
)
_ACK_MAX_WORDS = 3


def is_greeting(text: str) -> bool:
    """Only a greeting (in any of the languages above, with a name, "coach" or emoji around it)."""
    if _GREETING.search(text) is None:
        return False
    left = _FILLER.sub(" ", _GREETING.sub(" ", text).lower())
    words = [w for w in _NOT_WORDS.split(left) if w]
    # What may stand beside it: a name ("Hi Sam"), "coach", emoji; not "Hi, I'm a beginner" or
    # "early morning" (a time of day that answers a question).
    names = [w for w in _NOT_WORDS.split(_GREETING.sub(" ", text)) if w[:1].isupper()]
    return not words or (len(words) == 1 and len(names) == 1)


def is_question(text: str) -> bool:
    """It asks something back ("Is coffee okay?", "what do you know about me"): not an answer."""
    return text.rstrip().endswith("?") or (_QUESTION_START.match(text) is not None and len(text.split()) > 2)


def is_request(text: str) -> bool:
    """It asks the coach to do something ("tell me my plan", "can you recap"): not an answer."""
    return _REQUEST.match(text) is not None


def is_yes_or_no(text: str) -> bool:
    return _YES_NO.match(text) is not None


def is_acknowledgement(text: str) -> bool:
    words = [word.strip(".,!?;:'\"“”‘’()").lower() for word in text.split()]
    words = [word for word in words if word]
    return len(words) <= _ACK_MAX_WORDS and all(word in _ACKNOWLEDGEMENTS for word in words)


def says_nothing(text: str) -> bool:
    """No letter or digit at all (an emoji, "...")."""
    return not any(character.isalnum() for character in text)


def yes_no_item(question: str) -> bool:
    """A question a bare "no" answers ("Do you have any injuries ...?")."""
    return re.match(r"^\s*(?:do|does|are|is|have|any)\b", question, re.IGNORECASE) is not None


def fits(field: str, text: str) -> bool:
    """`text` contains what an answer to `field` contains."""
    shape = SHAPES.get(field)
    return shape is not None and shape.pattern.search(text) is not None


def plausible(field: str, question: str, text: str) -> bool:
    """Would a person take `text` as an answer to `field` (asked as `question`)?"""
    if is_yes_or_no(text):
        return yes_no_item(question) and re.match(r"^\s*(?:no|nope|nah)\b", text, re.IGNORECASE) is not None
    if fits(field, text):
        return True
    shape = SHAPES.get(field)
    return shape is None or not shape.strict


def items_it_answers(text: str, fields: Iterable[str]) -> list[str]:
    """The fields among `fields` whose answers look like `text`, in `fields`' order."""
    return [field for field in fields if fits(field, text)]


# The parts of a compound answer a correction can change on its own, each with its shape.
_PARTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("weight", re.compile(r"\b\d{2,3}(?:[.,]\d)?\s*(?:kg|kgs|kilos?|lbs?|pounds)\b", re.IGNORECASE)),
    ("height", re.compile(r"\b\d{3}\s*cm\b|\b[1-2][.,]\d{1,2}\s*m\b|\b\d'\d{1,2}\"?", re.IGNORECASE)),
    ("age", re.compile(r"(?<![\d.])\b\d{2}\b(?!\s*(?:kg|kgs|kilos?|lbs?|pounds|cm|m\b|[.,]\d))", re.IGNORECASE)),
)
_CORRECTION_WORDS = re.compile(
    r"\b(?:actually|update:?|correction:?|instead|now|these days|anymore|no longer|change of plan:?|"
    r"i changed my mind:?)\b[,:]?",
    re.IGNORECASE,
)
_LEADING = re.compile(r"^(?:my [\w ]{1,20}? (?:is|are)|i(?:'m| am)|it's|it is|i can|i)\s+", re.IGNORECASE)


def corrected_value(field: str, old: str, said: str) -> str:
    """What the answer becomes when the client corrects it with `said`: in a compound answer
    ("34, 180 cm, 85 kg") only the parts the message gives change ("actually I'm 80 kg now" ->
    "34, 180 cm, 80 kg"); an item with a closed set of answers takes the one the message names;
    else the message without its correction words ("Actually my knee is fine now" -> "my knee is fine")."""
    changed = old
    for _, part in _PARTS:
        new, current = part.search(said), part.search(changed)
        if new is not None and current is not None:
            changed = changed[: current.start()] + new.group(0) + changed[current.end() :]
    if changed != old:
        return changed
    shape = SHAPES.get(field)
    if shape is not None and shape.strict and (match := shape.pattern.search(said)) is not None:
        return match.group(0).strip()
    core = " ".join(_CORRECTION_WORDS.sub(" ", said).split()).strip(" ,.;:!")
    return _LEADING.sub("", core) if field != "limitations" else core or said


def best_known_item(said: str, known: Mapping[str, str]) -> str | None:
    """The known `step.field` a correction is about, by what an answer to it looks like; None when
    no known item's answers look like the message."""
    matches = [item for item in known if fits(item.split(".", 1)[-1], said)]
    parts = {name for name, part in _PARTS if part.search(said)}
    if parts and any(item.endswith(".age_and_body") for item in known):
        return next(item for item in known if item.endswith(".age_and_body"))
    strict = [item for item in matches if SHAPES[item.split(".", 1)[-1]].strict]
    found = strict or matches
    # The most specific match wins: "4 days a week" is a number of days, not a "week" to a timeline.
    return max(found, key=lambda item: _match_length(item, said), default=None)


def _match_length(item: str, said: str) -> int:
    match = SHAPES[item.split(".", 1)[-1]].pattern.search(said)
    return len(match.group(0)) if match else 0
