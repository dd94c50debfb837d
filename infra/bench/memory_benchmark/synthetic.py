"""Synthetic fitness-onboarding conversations written for the benchmark, in LoCoMo's layout.

Each conversation: a client who gives a name, answers the onboarding over the first sessions (one
of them by SMS, one interrupted by a reset), then keeps talking for weeks: small talk, asides about
their life, questions about the plan, and corrections of their weight (twice), goal, schedule and
injury. Sessions are days apart. The questions at the end ask for single facts, current values
after corrections, the first value ("when I started"), two facts at once, and things never said.

The client answers the question the local coach asks next (it asks in the steps' order), so every
statement made during onboarding is written in that order; everything else is a question ("?") or
an aside ("By the way, ..."), which the coach never takes for an answer.
"""

import random
from datetime import date, timedelta

from infra.bench.fidelity_script import SMALL_TALK as FIDELITY_SMALL_TALK
from infra.bench.memory_benchmark.dataset import Conversation, Dialog, Question, Session
from onboarding.llm.wording import STEP_PROMPTS
from onboarding.model.state import ONBOARDING_ORDER

CLIENT = "Client"
COACH = "Coach"  # speaker_b: the coach, whose lines are made by the real turn path, not stored in the data
NAMES = ("Sam", "Alex", "Jordan", "Maya", "Priya", "Tom", "Lena", "Omar", "Chloe", "Ravi", "Ines", "Kai")
GREETINGS = ("Hi again!", "Hello coach", "Hey, I'm back", "Good morning!")
SMALL_TALK = (
    *FIDELITY_SMALL_TALK,
    "Any tips for staying motivated?",
    "Is it fine to train when I'm a bit tired?",
    "Should I eat before a morning workout?",
)
# A detail said once in passing, and the question that asks for it in the client's own words (one
# question for all three read "What is my job's name or job?", which no client would ask).
ASIDES = (
    (
        "daughter",
        "By the way, my daughter {x} started school this week.",
        ("Emma", "Lucia", "Noor", "Ada"),
        "What is my daughter's name?",
    ),
    ("dog", "By the way, my dog is called {x}.", ("Biscuit", "Pepper", "Rocket", "Mango"), "What is my dog called?"),
    ("job", "By the way, I work as a {x}.", ("nurse", "teacher", "welder", "chef"), "What work do I do?"),
)

# Abstention traps: names and races that appear nowhere in what a client says (a unit test checks).
CAT_TRAPS = ("Whiskers", "Luna", "Mittens", "Oscar")
MARATHON_TRAPS = ("the Boston Marathon", "the Berlin Marathon", "the Chicago Marathon")


def _answers(rng: random.Random) -> dict[str, str]:
    return {
        "fitness_level": rng.choice(("I'm a beginner", "intermediate, I think", "pretty advanced")),
        "current_activity": rng.choice(("I walk my dog every day", "I cycle to work", "I swim on Sundays")),
        "limitations": rng.choice(("I have a left knee injury", "a sore right knee", "my knee clicks when I run")),
        "age_and_body": f"{rng.randint(25, 60)}, {rng.randint(155, 195)} cm, {rng.randint(60, 99)} kg",
        "primary_goal": rng.choice(("I want to run a 10k", "I want to lose fat", "I want to get stronger")),
        "target": rng.choice(("10k in under an hour", "lose 6 kg", "deadlift my bodyweight")),
        "timeline": rng.choice(("by June", "in four months", "before my birthday in May")),
        "motivation": rng.choice(("my sister's wedding", "keeping up with my kids", "my doctor's advice")),
        "days_per_week": rng.choice(("3 days", "2 days")),
        "session_length": rng.choice(("45 minutes", "half an hour", "an hour")),
        "equipment": rng.choice(("resistance bands at home", "a full gym", "dumbbells in the garage")),
        "exercise_preferences": rng.choice(("no burpees please", "I love kettlebells", "I hate running on treadmills")),
        "dietary_pattern": rng.choice(("vegetarian", "pescatarian", "I eat everything")),
        "allergies": rng.choice(("peanuts", "lactose", "none at all")),
        "meals_per_day": rng.choice(("three meals", "two meals and snacks")),
        "cooking": rng.choice(("20 minutes on weekdays", "I batch cook on Sundays")),
        "training_days": rng.choice(("Monday, Wednesday, Friday", "Tuesday and Thursday")),
        "training_time": rng.choice(("early morning", "after work", "lunchtime")),
        "timezone": rng.choice(("Europe/Lisbon", "America/Chicago", "Asia/Singapore")),
        "check_ins": rng.choice(("weekly by SMS", "every Sunday in the app")),
    }


class _Writer:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.sessions: list[Session] = []
        self.dialogs: list[Dialog] = []
        self.said: dict[str, str] = {}  # what a fact's dialog id is, by name

    def say(self, text: str, name: str | None = None) -> str:
        dia_id = f"D{len(self.sessions) + 1}:{len(self.dialogs) + 1}"
        self.dialogs.append(Dialog(dia_id, CLIENT, text))
        if name is not None:
            self.said[name] = dia_id
        return dia_id

    def small_talk(self, count: int) -> None:
        for _ in range(count):
            self.say(self.rng.choice(SMALL_TALK))

    def end_session(self, day: date, channel: str, turns: int) -> None:
        """Close this session (padded with small talk to `turns`); the next opens with a greeting,
        so the coach asks its question before the client answers it."""
        self.small_talk(max(0, turns - len(self.dialogs)))
        self.sessions.append(
            Session(len(self.sessions) + 1, f"10:00 am on {day:%d %B, %Y}", channel, tuple(self.dialogs))
        )
        self.dialogs = []
        self.say(self.rng.choice(GREETINGS))


def conversation(index: int, sessions: int = 10, turns_per_session: int = 30, seed: int = 18) -> Conversation:
    """One conversation of `sessions` sessions of `turns_per_session` client turns (at least 4)."""
    rng = random.Random(seed * 1000 + index)  # noqa: S311 - reproducible test data, not secrets
    answers, name = _answers(rng), rng.choice(NAMES)
    w = _Writer(rng)
    day = date(2025, 1, 6) + timedelta(days=rng.randint(0, 30))
    fields = [(step, f.key) for step in ONBOARDING_ORDER for f in STEP_PROMPTS[step].fields]
    w.say(f"Hi! Call me {name}", "name")
    for i, (_, key) in enumerate(fields):  # the onboarding, over the first three sessions
        if i in (8, 16):
            w.end_session(day, "sms" if len(w.sessions) == 1 else "app", turns_per_session)
            day += timedelta(days=rng.randint(2, 6))
        if i == 12:
            w.say("start over")  # a reset before onboarding is complete: a new conversation,
            w.say(rng.choice(GREETINGS))  # where the coach asks before the client answers
        w.small_talk(rng.randint(0, 1))
        w.say(answers[key], key)
    weight = answers["age_and_body"].rsplit(", ", 1)[1]
    new_weight, newer_weight = f"{int(weight.split()[0]) - 3} kg", f"{int(weight.split()[0]) - 5} kg"
    corrections = [
        ("weight", f"Actually my weight is {new_weight} now"),
        ("primary_goal", "Actually my main goal is now a half marathon"),
        ("days_per_week", "Actually I can train 4 days a week now instead"),
        ("limitations", "Actually my knee is fine now, but my lower back hurts"),
        ("weight2", f"Update: my weight is {newer_weight} these days"),
    ]
    aside = rng.choice(ASIDES)
    detail = rng.choice(aside[2])
    while len(w.sessions) < sessions - 1:
        w.end_session(day, "sms" if len(w.sessions) == 6 else "app", turns_per_session)
        day += timedelta(days=rng.randint(3, 10))
        w.small_talk(2)
        if corrections:
            key, text = corrections.pop(0)
            w.say(text, key)
        if len(w.sessions) == 4:
            w.say(aside[1].format(x=detail), aside[0])
        w.say("What does my plan say about my training days?")
    w.end_session(day, "app", turns_per_session)
    s = w.said
    questions = (
        Question("What is my fitness level?", answers["fitness_level"], (s["fitness_level"],), 4),
        Question("Am I allergic to anything?", answers["allergies"], (s["allergies"],), 4),
        Question("What equipment do I have?", answers["equipment"], (s["equipment"],), 4),
        Question("What should I call you? I mean, what do you call me?", name, (s["name"],), 4),
        Question(aside[3], detail, (s[aside[0]],), 4),
        Question("How much do I weigh now?", newer_weight, (s["weight2"],), 6, (answers["age_and_body"],)),
        Question("What is my main goal?", "half marathon", (s["primary_goal"],), 6, (answers["primary_goal"],)),
        Question("How many days a week do I train?", "4 days", (s["days_per_week"],), 6, (answers["days_per_week"],)),
        Question("Do I have an injury?", "lower back", (s["limitations"],), 6, (answers["limitations"],)),
        Question("What did I weigh when I started?", weight, (s["age_and_body"],), 2),
        Question(
            "Which days do I train, and at what time?",
            f"{answers['training_days']}; {answers['training_time']}",
            (s["training_days"], s["training_time"]),
            1,
        ),
        Question(
            "Given my diet, what should I eat after training?", answers["dietary_pattern"], (s["dietary_pattern"],), 3
        ),
        # Abstention: never said. Each carries a trap (LoCoMo's `adversarial_answer`), a plausible
        # value the client never gave: it must never reach the model as evidence.
        Question("What is the name of my cat?", None, (), 5, trap=rng.choice(CAT_TRAPS)),
        Question("Which marathon did I run last year?", None, (), 5, trap=rng.choice(MARATHON_TRAPS)),
    )
    return Conversation(f"fit-{index + 1:02d}", CLIENT, tuple(w.sessions), questions, COACH)


def conversations(count: int = 10, sessions: int = 10, turns_per_session: int = 30) -> list[Conversation]:
    return [conversation(i, sessions, turns_per_session) for i in range(count)]
