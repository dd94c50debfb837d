"""How the scripted coach reads one client message: what kind of message it is (a greeting, a
question, a request, a bare yes or no, an acknowledgement, an answer put off), and which onboarding
items it answers, each with its own part of the message (docs/decisions/0024-local-coach.md).

A stand-in for a model's understanding, written down as one table: per item, what an answer to it
contains anywhere (`says`), what answers it only when it was just asked (`asked`: a bare "no", a
bare number), what makes a match something else (`unless`), and the words that name it (for "what's
my goal?" and "change my training time"). A message is read as a careful person reads it: every
item it answers, each part under its own item; an answer to an item already known only when the
message corrects it or answers nothing else; when two readings compete for the same words, the
longer one, then the item just asked, wins; a message that answers nothing files nothing. Nothing
here reads the memory: the caller says which items are asked, open and known.
"""

import re
from bisect import bisect_right
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from difflib import get_close_matches

_N = r"(?:\d+(?:[.,]\d+)?|one|two|three|four|five|six|seven|eight|nine|ten|twelve|fifteen|twenty|thirty|forty|fifty|sixty|ninety)"
_DAYS_N = r"(?:[1-7]|one|two|three|four|five|six|seven)"
_DAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?"
_ABBR = r"(?:mon|tue|tues|wed|weds|thu|thur|thurs|fri|sat|sun)"
_DURATION = rf"(?:{_N}\s*(?:-|to|or)\s*)?{_N}\s*(?:min(?:ute)?s?|hrs?|hours?|h)\b|\b(?:half an|an|one|a)\s+hour(?:\s+and\s+a\s+half)?\b"
_AMOUNT = rf"{_N}\s*(?:kg|kgs|kilos?|lbs?|pounds|stone|%|pull-?ups?|push-?ups?|chin-?ups?|reps)\b"
_DISTANCE = rf"{_N}\s*(?:k|km|kms|miles?)\b"
_MONTH = r"january|february|march|april|june|july|august|september|october|november|december"
_SEASON = r"summer|winter|spring|autumn|fall"
_BODY = r"knees?|back|shoulders?|hips?|ankles?|wrists?|neck|elbows?|feet|foot|hamstrings?|achilles|joints?"
_ACTIVITY = (
    r"run|runs|running|jog|jogs|jogging|walk|walks|walking|hike|hikes|hiking|gym|swim|swims|swimming|cycle|cycles|"
    r"cycling|bike|biking|spin|spinning|yoga|pilates|lift|lifts|lifting|weights|crossfit|football|soccer|tennis|"
    r"basketball|netball|rugby|golf|padel|squash|badminton|volleyball|dance|dancing|zumba|boxing|kickboxing|"
    r"martial arts|karate|judo|climb|climbing|bouldering|rowing|skating|skiing|surfing|sports?|class|classes|hiit|"
    r"cardio|peloton"
)
_EXERCISE = (
    r"running|runs|jogging|burpees|squats?|lunges|kettlebells?|deadlifts?|bench(?:ing| press)?|swimming|cycling|"
    r"spinning|boxing|treadmills?|jumping|skipping|weights|lifting|yoga|pilates|cardio|hiit|push-?ups?|pull-?ups?|"
    r"planks?|rowing|crunch(?:es)?|sit-?ups|stretching|classes|machines|sprints?|climbing|dancing|team sports|sports|"
    r"exercises?|barbells?|dumbb?ells?|core work|abs|circuits|stairs|box jumps|mountain climbers"
)
_CITY = (
    r"london|lisbon|porto|paris|berlin|madrid|barcelona|rome|milan|amsterdam|brussels|dublin|edinburgh|manchester|"
    r"vienna|zurich|stockholm|oslo|copenhagen|helsinki|warsaw|prague|athens|istanbul|moscow|kyiv|new york|boston|"
    r"chicago|denver|los angeles|san francisco|seattle|toronto|vancouver|montreal|mexico city|sao paulo|"
    r"buenos aires|tokyo|seoul|beijing|shanghai|hong kong|singapore|bangkok|mumbai|delhi|dubai|sydney|melbourne|"
    r"brisbane|perth|auckland|cape town|johannesburg|nairobi|lagos|cairo"
)
_NEGATIVE = r"^\W*(?:no|nope|nah|none|nothing)\b(?!\s+(?:idea|clue))"
# The words "and", "but" ... start a new part of a message; so do punctuation and "by the way".
_CLAUSE_BREAK = re.compile(
    r"[,.;!?]+\s*|\s+(?:and|but|though|although|plus|also|btw|by the way|except)\b\s*|\s*(?:—|–|\s-\s)\s*", re.I
)


@dataclass(frozen=True)
class Item:
    """What an answer to one item looks like. `closed`: its answers come from a small set (a level,
    a time zone), so a correction keeps only the words that name the new one. `owns_clause`: a
    match takes its whole part of the message ("yoga on Sundays" is an activity, not training
    days). `group`: items of one kind of plan detail ("3 days a week, about 45 minutes"), which a
    part answers together; a part that answers another item keeps them as its own detail."""

    says: re.Pattern[str]
    names: re.Pattern[str]
    asked: re.Pattern[str] | None = None
    unless: re.Pattern[str] | None = None
    closed: bool = False
    owns_clause: bool = False
    group: str | None = None


def _item(says: str, names: str, asked: str | None = None, unless: str | None = None, **options: object) -> Item:
    def rx(pattern: str | None) -> re.Pattern[str] | None:
        return None if pattern is None else re.compile(pattern, re.IGNORECASE)

    return Item(rx(says), rx(names), rx(asked), rx(unless), **options)  # type: ignore[arg-type]


# Keyed by the item's field name (the prompt's `Collect` list and the save tools use the same keys).
ITEMS: dict[str, Item] = {
    "fitness_level": _item(
        r"\b(?:(?:complete|total|absolute)\s+)?(?:beginner|novice|newbie|intermediate|advanced|unfit)\b|\bout of shape\b"
        r"|\bmid[- ]?level\b|\b(?:very|fairly|pretty|quite|reasonably|not very|not that|not too|super)\s+fit\b"
        r"|\bin (?:good|decent|great|ok|okay|bad|poor) shape\b",
        r"fitness(?: level)?|\blevel\b",
        r"\b(?:fit|average|decent|so-so|rusty)\b",
        closed=True,
    ),
    "current_activity": _item(
        rf"\b(?:{_ACTIVITY})\b",
        r"current (?:activity|exercise)|\bactivity\b|exercise (?:do )?i do|weekly exercise",
        rf"\b(?:nothing|none|not much|not a lot|very little|no exercise|sedentary|desk|couch|train\w*|exercis\w*"
        rf"|work(?:ing)? ?outs?|twice|once|{_N}\s*(?:x|times))\b",
        r"\b(?:want|wanna|goal|aim|hope|hoping|would|can|could|able|manage|free|available|will|going to|prefer"
        r"|rather|love|hate|enjoy|like|fan|avoid|bore|used to|injur\w*|hurt\w*|pain|broke|torn|surgery|accident)\b|\b\w+'d\b",
        owns_clause=True,
    ),
    "limitations": _item(
        rf"\binjur\w*|\bpain\w*|\bhurts?\b|\bhurting\b|\bsore\b|\bach(?:e|es|ing|y)\b|\bsurgery\b|\boperation\b|\bbroke\b"
        rf"|\bbroken\b|\btorn\b|\bsprain\w*|\bfractur\w*|\barthritis\b|\basthma\w*|\bdiabet\w*|\bpregnan\w*"
        rf"|\bblood pressure\b|\bhypertension\b|\bheart (?:condition|problem|issue)s?\b|\bdisabilit\w*|\bhernia\b"
        rf"|\bsciatica\b|\bpulled (?:a )?(?:muscle|hamstring)\b|\b(?:bad|dodgy|weak|stiff|sore|wonky)\s+(?:\w+\s+)?(?:{_BODY})\b"
        rf"|\b(?:{_BODY})\s+(?:is|are|gets?|feels?)\s+(?:\w+\s+){{0,2}}?(?:sore|weak|stiff|bad|dodgy|fine|better|ok)\b",
        r"injur\w*|limitations?|health conditions?|\bconditions?\b|\bpain\b",
        rf"{_NEGATIVE}|^\W*(?:not really|all good|i'?m fine|fine|healthy)\b|\b(?:{_BODY})\b",
    ),
    "age_and_body": _item(
        r"\b\d{2,3}(?:[.,]\d)?\s*(?:kg|kgs|kilos?|kilograms?|lbs?|pounds|stone|st)\b|\b\d{3}\s*cm\b|\b[12][.,]\d{1,2}\s*m\b"
        r"|\b\d\s*(?:'|’|ft|foot|feet)\s*(?:\d{1,2}\s*(?:\"|”|in(?:ches)?)?)?|\b\d{2}\s*(?:years?(?: old)?|yrs?|y/?o)\b"
        r"|\bi(?:'|’| a)?m\s+(?:\d{2}|(?:twenty|thirty|forty|fifty|sixty|seventy)(?:-\w+)?)\b(?!\s*(?:min|%|k\b|days?))"
        r"|\b(?:age|aged)\s*:?\s*\d{2}\b|\bweigh\w*\s+(?:about\s+|around\s+)?\d{2,3}"
        r"|\b\d{2}\s*,\s*(?=\d{3}\s*cm|\d\s*(?:'|ft)|[12][.,]\d|\d{2,3}\s*(?:kg|lb|pound|kilo))",
        r"\bage\b|how old|height|how tall|weight|weigh|\bbody\b",
        r"^\W*\d{2}(?:\s*[/,]\s*\d{2,3}){0,2}\W*$|\b(?:twenty|thirty|forty|fifty|sixty|seventy)(?:-\w+)?\b",
        closed=True,
    ),
    "primary_goal": _item(
        rf"\b(?:lose|losing|loose|drop|shed|burn|trim)\s+(?:(?:some|the|my|a|bit|of|little|few|about|around|roughly"
        rf"|extra)\s+){{0,3}}(?:fat|weight|belly|gut|pounds|kilos|{_AMOUNT})|\b(?:weight|fat) loss\b"
        rf"|\b(?:build|gain|put on|bulk|add)\s+(?:(?:some|more|lean)\s+)?(?:muscle|mass|size|strength)\b|\bmuscles?\b"
        rf"|\btone(?:d| up)?\b|\btoning\b|\bget (?:fit|fitter|stronger|strong|lean|leaner|healthier|in shape|back in shape"
        rf"|toned|faster)\b|\bfitter\b|\bstronger\b|\bstrength\b|\b(?:run|do|finish|complete)\s+(?:a |an |my first |the )?"
        rf"(?:half[- ])?(?:marathon|triathlon|ironman|{_DISTANCE})|\b(?:half[- ])?marathon\b|\btriathlon\b|\benergy\b"
        rf"|\bendurance\b|\bstamina\b|\bmobility\b|\bflexib\w*|\bhealthier\b|\b(?:a|one|do|proper)\s+(?:proper\s+)?"
        rf"(?:push|pull|chin)-?ups?\b",
        r"\bgoals?\b|\baim\b",
        r"\b(?:lose|gain|health\w*|fit|shape|look good|feel better|weight|abs|six pack|lean|slim\w*|active)\b",
    ),
    "target": _item(
        rf"\b(?:lose|losing|loose|drop|shed|gain|put on|get (?:down )?to|down to|reach|hit|ideally|aim\w*|target\w*"
        rf"|goal\w*)\b(?:(?!\b(?:by|before|until|within|in)\b)[^,.;!?])*?\b{_AMOUNT}"
        rf"|\b(?:bench|deadlift|squat|press|lift)\w*\s+(?:\w+\s+){{0,2}}?{_N}\s*(?:kg|kgs|kilos?|lbs?|pounds)\b"
        rf"|\b{_DISTANCE}\s+in\s+(?:under\s+|less than\s+|below\s+)?(?:{_DURATION})"
        rf"|\b(?:target|goal)(?:\s+weight)?\s*(?:is|of|:)?\s*(?:about\s+|around\s+)?\d+|\bsize \d+\b",
        r"\btarget\b|success",
        rf"\b{_AMOUNT}|\b{_DISTANCE}|\b\d+\s*%|\bbody fat\b|\b{_N}\b",
    ),
    "timeline": _item(
        rf"\b(?:by|before|until|in time for|around)\s+(?:the\s+)?(?:end of\s+(?:the\s+)?)?(?:{_MONTH}|may|{_SEASON}"
        rf"|christmas|xmas|new year|easter|my (?:wedding|holidays?|birthday|vacation|trip)|next (?:week|month|year)|year)\b"
        rf"|\b(?:in|within)\s+(?:about\s+|around\s+|roughly\s+|the next\s+)?(?:{_N}|a|a few|a couple of)\s+"
        rf"(?:weeks?|months?|years?)\b|\b(?:{_MONTH})\b|\b(?:next|this)\s+(?:{_SEASON}|year)\b|\b(?:christmas|xmas)\b"
        rf"|\basap\b|\bas soon as possible\b|\bend of (?:the|this) year\b",
        r"timeline|deadline|target date|by when",
        rf"\b(?:{_N}|a|a few|a couple of)\s+(?:weeks?|months?|years?)\b|\bno rush\b|\bwhenever\b|\bsoon\b",
        closed=True,
    ),
    "motivation": _item(
        r"\b(?:because|'?cause|so that|so i can)\b.*|\bfor (?:my|the)\s+(?:wedding|kids|children|family|health|wife"
        r"|husband|partner|son|daughter|grandkids|doctor|holiday|self)\b|\b(?:my )?doctor\b|\b(?:keep up|play|keep pace)"
        r" with (?:my )?(?:kids|children|grandkids|son|daughter)\b|\bwedding\b|\bgetting married\b",
        r"motivation|why (?:does|is) (?:this|my goal)",
        r"\b(?:want\w*|wanna|feel\w*|health\w*|confiden\w*|energy|look\w*|life|live|kids|children|family|myself"
        r"|happ\w*|stress\w*|mental|mood|sluggish|tired|sick of|fed up|shape|better|proud|prove|example|older)\b",
    ),
    "days_per_week": _item(
        rf"\b{_DAYS_N}(?:\s*(?:-|to|or)\s*{_DAYS_N})?\s*days?\b(?:\s*(?:a|per|each|every)\s+week)?|\bevery other day\b",
        r"days (?:a|per) week|how many days|training days a week",
        rf"^\W*{_DAYS_N}\W*$|\b(?:{_DAYS_N}|once|twice)\s*(?:x|times?)?\s*(?:(?:a|per)\s+week)?\b|\bevery ?day\b|\bdaily\b",
        closed=True,
        group="week",
    ),
    "session_length": _item(
        rf"\b(?:(?:about|around|roughly|maybe|up to|no more than)\s+)?(?:{_DURATION})",
        r"session(?: length)?s?|how long",
        r"\b(?:longer|shorter|quick|short|long|tops|max)\b",
        closed=True,
        group="week",
    ),
    "equipment": _item(
        r"\b(?:gym|home|house|flat|apartment|garage|garden|park|outdoors?|outside|dumbb?e?ll?s?|kettlebells?|barbells?"
        r"|bench|squat rack|rack|(?:resistance )?bands?|(?:yoga )?mat|pull-?up bar|treadmill|exercise bike|rower"
        r"|rowing machine|weights|equipment|kit|machines?|bodyweight|body weight)\b",
        r"equipment|where (?:do )?i train|\bkit\b",
        r"^\W*(?:nothing|none)\b|\bno (?:equipment|kit)\b",
    ),
    "exercise_preferences": _item(
        rf"\b(?:love|loves|like|likes|enjoy\w*|hate|hates|can'?t stand|dislike|avoid|not a fan of|fan of|prefer|rather"
        rf"|favou?rite|anything but|no more|no)\s+(?:(?:doing|to do|the|any|all|some|a lot of|so much)\s+)?"
        rf"(?:{_EXERCISE})\b|\b(?:{_EXERCISE})\s+(?:bores?|kills?)\b",
        r"(?:exercise )?preferences|exercises i (?:love|like|hate|avoid)",
        r"\bno (?:real )?preferences?\b|\bnot really\b|\bi'?m easy\b|\banything(?: goes| is fine)?\b"
        r"|\bnothing in particular\b|\bwhatever\b|\b(?:love|like|enjoy|hate|avoid|prefer)\b",
        owns_clause=True,
    ),
    "dietary_pattern": _item(
        r"\b(?:vegetarian|vegan|veggie|halal|kosher|keto\w*|paleo|pescatarian|pescetarian|plant[- ]based|low[- ]carb"
        r"|high[- ]protein|intermittent fasting|mediterranean|flexitarian|omnivore|carnivore|gluten[- ]free"
        r"|dairy[- ]free|(?:no|don'?t eat|do not eat) (?:meat|fish|pork|beef)|eat (?:pretty much |basically |just about )?"
        r"(?:everything|anything)|no (?:particular|special|specific) diet|normal diet|(?:a |on a )?diet)\b",
        r"\bdiet\b",
        rf"{_NEGATIVE}|^\W*not really\b|\b(?:normal|everything|anything|nothing special|no particular)\b",
        closed=True,
    ),
    "allergies": _item(
        r"\b(?:allerg\w*|intoleran\w*|lactose|coeliac|celiac|anaphyla\w*|hives|epipen)\b",
        r"allerg\w*|intoleran\w*",
        rf"{_NEGATIVE}|^\W*not that i know\b|\b(?:nuts?|peanuts?|tree nuts|shellfish|fish|eggs?|soy|soya|wheat|gluten"
        rf"|dairy|milk|sesame|strawberr\w*|shrimp|prawns|mustard|celery)\b",
    ),
    "meals_per_day": _item(
        rf"\b{_N}\s*(?:(?:small|big|main|proper|square|decent)\s+)?meals?\b|\bskip (?:breakfast|lunch|dinner)\b",
        r"\bmeals?\b",
        rf"^\W*{_N}\W*$|\b{_N}\s*(?:or|-|to)\s*{_N}\b|\b(?:once|twice|{_N} times) a day\b|\b(?:breakfast|lunch|dinner"
        rf"|snacks?)\b|\b{_N}\b",
        closed=True,
    ),
    "cooking": _item(
        r"\b(?:cook\w*|meal ?prep\w*|microwave\w*|ready meals|takeaways?|kitchen|batch cook\w*)\b",
        r"cooking|\bcook\b",
        rf"{_DURATION}|\b(?:plenty|very little|little|not much|no time|hardly any|lots|a lot|loads)\b",
        owns_clause=True,
    ),
    "training_days": _item(
        rf"\b{_DAY}\b(?:\s+(?:morning|afternoon|evening|night)\b(?!s))?|\b(?<!this )(?<!next )(?<!last )"
        rf"week(?:end|day)s?\b|\b{_ABBR}\b(?:\s*(?:,|/|&|and|or)?\s*\b{_ABBR}\b)+",
        r"training days|which days|what days|days do i train",
        rf"\b{_ABBR}\b|\bevery ?day\b|\bdaily\b",
        closed=True,
        group="schedule",
    ),
    "training_time": _item(
        r"\b(?:(?:early|late|in the|every)\s+)?(?:mornings?|evenings?|afternoons?|nights?|lunchtimes?|lunch ?breaks?"
        r"|midday|noon)\b|\b(?:before|after)\s+(?:work|school|the kids\b|dinner|breakfast|the school run)"
        r"|\b\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)|\b(?:[01]?\d|2[0-3]):[0-5]\d\b|\b(?:at|over) lunch\b",
        r"training time|what time|time of day|when do i train",
        r"\b(?:early|late|anytime|any time|whenever)\b",
        closed=True,
        group="schedule",
    ),
    "timezone": _item(
        rf"\b(?:utc|gmt)(?:\s*[+-]\s*\d{{1,2}}(?::?\d{{2}})?)?|\b(?:europe|america|asia|africa|australia|pacific|atlantic"
        rf"|indian)/[a-z_]+|\b[ecmpa][sd]t\b|\b(?:cet|cest|bst|ist|jst|aest|aedt|nzst|sgt|hkt|wet|eet)\b|\b(?:pacific"
        rf"|eastern|central|mountain|atlantic|central european|eastern european|western european|greenwich"
        rf"|british summer|india|japan)(?: standard)? time\b|\btime ?zone\b|\b(?:i'?m|i am|i live|we'?re|we live|based"
        rf"|living)\s+(?:in|at|near)\s+(?:{_CITY})\b|\b(?:{_CITY}) time\b",
        r"time ?zone",
        rf"\b(?:{_CITY})\b|[+-]\d{{1,2}}\b",
        closed=True,
    ),
    "check_ins": _item(
        r"\b(?:sms|texts?|texting|app|whatsapp|e-?mails?|notifications?|messages?|ping|check[- ]?ins?|check in)\b",
        r"check[- ]?ins?",
        r"\b(?:daily|weekly|monthly|fortnightly|every|once|twice|biweekly)\b",
        owns_clause=True,
    ),
}
# A goal with an amount also gives the target ("lose 5 kg"); named days also give how many.
_NESTED = {("primary_goal", "target"), ("target", "primary_goal")}

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
_YES_NO = re.compile(r"^\s*(?:yes|yeah|yep|yup|sure|no|nope|nah|maybe|ok|okay)\s*[.!]*\s*$", re.IGNORECASE)
_ACKNOWLEDGEMENTS = frozenset(
    "ok okay k kk thanks thank you thx ty cheers cool great nice sure alright got it sounds good perfect awesome "  # noqa: SIM905
    "fine right".split()
)
# Answers that put a question off rather than answer it (the app then waits for the item).
EVASIVE = re.compile(
    r"\b(?:not sure|unsure|don['’]?t know|dunno|idk|no idea|no clue|let me (?:check|think)|later|rather not"
    r"|prefer not|pass|depends|it varies|whatever you think|up to you|hard to say|give me a (?:sec|second|minute)"
    r"|hang on|hold on|brb|one sec)\b",
    re.IGNORECASE,
)
# What says an earlier answer changes ("actually", "sorry, my goal is ...", "I'm 80 kg now").
CORRECTION = re.compile(
    r"\b(?:actually|sorry|i meant|correction|change|changed|update|instead|no longer|anymore|these days|now|wait)\b",
    re.IGNORECASE,
)
# What leads into an answer without being part of it ("sorry, ...", "oh and actually ...").
_LEAD = re.compile(
    r"^(?:\W*(?:oh|and|so|well|um+|honestly|sorry|actually|wait|correction|update|i meant|i changed my mind"
    r"|change of plan)\b[\s,:!.-]*)+",
    re.IGNORECASE,
)
_CHANGE_WORDS = re.compile(r"\s*\b(?:now|these days|anymore|any more|instead|no longer)\b", re.IGNORECASE)
_NOT_PART = re.compile(r",?\s+not\s+[^,.;]*$", re.IGNORECASE)
# The words a message names an item with, around its answer ("my goal is X", "X is my injury").
_NAMED_FIRST = r"^\W*(?:my\s+)?(?:{names})\s*(?:is|are|was|:|=|to)\s+(?:to\s+)?(?P<value>.+)$"
_NAMED_LAST = r"^\W*(?P<value>.+?)\s+(?:is|are)\s+my\s+(?:{names})\W*$"
# The body parts a correction can change on their own, each with its shape.
_PARTS = (
    re.compile(r"\b\d{2,3}(?:[.,]\d)?\s*(?:kg|kgs|kilos?|lbs?|pounds|stone)\b", re.IGNORECASE),
    re.compile(r"\b\d{3}\s*cm\b|\b[1-2][.,]\d{1,2}\s*m\b|\b\d'\d{1,2}\"?", re.IGNORECASE),
    re.compile(r"(?<![\d.])\b\d{2}\b(?!\s*(?:kg|kgs|kilos?|lbs?|pounds|stone|cm|m\b|[.,]\d))", re.IGNORECASE),
)
# Words typed wrong often enough to matter, read as meant ("begginer", "mornigns", "vegitarian").
_SPELLINGS = frozenset(
    "beginner intermediate advanced injury injuries vegetarian gluten christmas morning mornings evening "  # noqa: SIM905
    "evenings minutes pacific monday tuesday wednesday thursday friday saturday sunday because family meals "
    "weekly dumbbells kettlebells allergic allergy allergies intolerance intolerant injured muscle muscles build".split()
)
_WORD = re.compile(r"[A-Za-z]{5,}")
_READ_CHARS = 1000  # a pasted page is read by its beginning (where its answers are), and read fast


def is_greeting(text: str) -> bool:
    """Only a greeting (in any of the languages above, with a name, "coach" or emoji around it)."""
    if _GREETING.search(text) is None:
        return False
    left = _FILLER.sub(" ", _GREETING.sub(" ", text).lower())
    words = [w for w in _NOT_WORDS.split(left) if w]
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
    return 0 < len(words) <= 3 and all(word in _ACKNOWLEDGEMENTS for word in words)


def says_nothing(text: str) -> bool:
    """No letter or digit at all (an emoji, "...")."""
    return not any(character.isalnum() for character in text)


def _spelled(text: str) -> str:
    def fix(match: re.Match[str]) -> str:
        word = match.group(0)
        close = get_close_matches(word.lower(), _SPELLINGS, n=1, cutoff=0.8)
        return close[0] if close and close[0][0] == word[0].lower() and close[0] != word.lower() else word

    return _WORD.sub(fix, text)


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


def _candidates(text: str, fields: Collection[str], asked: str | None) -> list[_Span]:
    clauses = _clauses(text)
    starts = [a for a, _ in clauses]
    spans: set[_Span] = set()
    blocked: dict[tuple[str, int], bool] = {}  # per item and part: a long message is read once
    for field in fields:
        item = ITEMS[field]
        for pattern in [item.says] + ([item.asked] if field == asked and item.asked is not None else []):
            for m in pattern.finditer(text, 0, _READ_CHARS):
                a, b = clauses[bisect_right(starts, m.start()) - 1] if starts else (m.start(), m.end())
                if m.end() == m.start() or not a <= m.start() < b:
                    continue
                if item.unless is not None and (field, a) not in blocked:
                    blocked[field, a] = item.unless.search(text[a:b]) is not None
                if blocked.get((field, a)):
                    continue
                spans.add(_Span(field, a, b) if item.owns_clause else _Span(field, m.start(), m.end()))
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
    value = _LEAD.sub("", text).strip(" ,;:-.!")
    pattern = ITEMS[field].names.pattern
    for form in (_NAMED_FIRST, _NAMED_LAST):
        if (m := re.match(form.format(names=pattern), value, re.IGNORECASE)) is not None:
            return m["value"].strip(" ,;:-.!")
    return value


def read(text: str, asked: str | None, open_items: Collection[str], known: Collection[str]) -> dict[str, str]:
    """The items `text` answers, each with its part of the message (the whole message when it
    answers one). An item in `known` is answered again only when the message says it changes
    (CORRECTION) or answers nothing else; when the message names items, only those."""
    text = _spelled(text)
    fresh = [f for f in {*open_items, *([asked] if asked else [])} if f in ITEMS]
    spans = _candidates(text, fresh, asked)
    if CORRECTION.search(text) is not None or not spans:
        old = [f for f in known if f in ITEMS and f not in fresh]
        spans += _candidates(text, named_items(text, old) or old, None)
    spans = _absorbed(_resolve(spans, asked, known), text, asked)
    fields = list(dict.fromkeys(s.field for s in spans))
    values = {fields[0]: _value(fields[0], text)} if len(fields) == 1 else _parts(spans, text)
    if "training_days" in values and "days_per_week" in open_items and "days_per_week" not in values:
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
        amount = re.search(_AMOUNT, text[span.start : span.end], re.IGNORECASE)
        values.setdefault("target", amount.group(0) if amount else text[span.start : span.end])
    return {field: value for field, value in values.items() if value}


def corrected_value(field: str, old: str, said: str) -> str:
    """What the answer becomes when the client corrects it with `said`: in a compound answer
    ("34, 180 cm, 85 kg") only the parts the message gives change ("actually I'm 80 kg now" ->
    "34, 180 cm, 80 kg"); an item with a small set of answers takes the one the message names
    (not one it rules out: "vegan not vegetarian"); else the message without its correction words."""
    changed = old
    for part in _PARTS:
        new, current = part.search(said), part.search(changed)
        if new is not None and current is not None:
            changed = changed[: current.start()] + new.group(0) + changed[current.end() :]
    if changed != old:
        return changed
    item = ITEMS[field]
    if item.closed:
        for m in item.says.finditer(said):
            if not re.search(r"\bnot\s+(?:\w+\s+)?$", said[: m.start()], re.IGNORECASE):
                return m.group(0).strip()
    return _value(field, " ".join(_CHANGE_WORDS.sub(" ", _NOT_PART.sub("", said)).split())) or said
