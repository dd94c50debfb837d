"""More kinds of answer the local coach's reader (infra/local/bedrock_emulator/reading.py,
reading.toml) reads by rule, found by a phrase set written without reading the reader: a qualifier
after an answer, a hedge word before a bare number, a part that only compares with the one before
it, a correction that restates the answer it replaces, health words (operations, medicines, an upset
stomach). The phrasings here are not that set's; each test fails when its rule is taken out.
"""

import pytest

from infra.local.bedrock_emulator import reading
from tests.tooling.test_reader_kinds import _coach_files, _read

pytestmark = pytest.mark.unit

# What is said -> the question it answers, and the value read.
QUALIFIED = {  # a qualifier after an answer says when it holds, nothing more ([kinds] qualifier)
    "4 or 5 depending on my shifts": ("days_per_week", "4 or 5"),
    "3 normally": ("meals_per_day", "3"),
    "5 if I include the protein shakes": ("meals_per_day", "5"),
    "40 give or take": ("session_length", "40"),
}
# What is said -> the question it answers with the whole of it.
HEDGED_NUMBERS = {"probably 65": "target", "perhaps 15": "cooking", "possibly 4": "meals_per_day"}
COMPARED = {"about 20 minutes, less on weekdays": "cooking", "45 minutes, a bit more at weekends": "session_length"}


@pytest.mark.parametrize("said", QUALIFIED)
def test_a_qualifier_after_an_answer_is_left_out(said: str) -> None:
    at, value = QUALIFIED[said]
    assert _read(at, said) == {at: value}


def test_a_frequency_word_before_an_answer_stays() -> None:
    assert reading.plain("usually around 6pm") == "usually around 6pm"


# A hedge word before a bare number leaves it the answer ([words] hedge_word).
@pytest.mark.parametrize("said", HEDGED_NUMBERS)
def test_a_hedged_bare_number_answers_the_question_asked(said: str) -> None:
    assert _read(HEDGED_NUMBERS[said], said) == {HEDGED_NUMBERS[said]: said}


# A part that only compares with the part before it qualifies that answer ([words] comparative).
@pytest.mark.parametrize("said", COMPARED)
def test_a_comparison_after_an_answer_is_part_of_it(said: str) -> None:
    assert _read(COMPARED[said], said) == {COMPARED[said]: said}


# A correction that restates the old answer ("I said 85 kg but ..."): the answer is what follows,
# and only the part it changes changes ([kinds] restating).
def test_a_number_restated_before_but_is_the_answer_it_replaces() -> None:
    calls = _coach_files("primary_goal", "I said 85 kg but I'm 88 kg", {"age_and_body": "34, 180 cm, 85 kg"})
    assert calls == [("correct_answer", {"item": "fitness_assessment.age_and_body", "value": "34, 180 cm, 88 kg"})]


def test_an_age_said_with_actually_is_an_age() -> None:
    assert _read("age_and_body", "sorry, I said 29 but I'm actually 30") == {"age_and_body": "I'm actually 30"}
    calls = _coach_files("primary_goal", "I said 34 but I'm actually 35", {"age_and_body": "34, 180 cm, 85 kg"})
    assert calls == [("correct_answer", {"item": "fitness_assessment.age_and_body", "value": "35, 180 cm, 85 kg"})]


# Words that lead into a part ("actually, make it", "change it to") leave its bare answer an answer.
RESTATED = {"change it to 4": "days_per_week", "actually, make it 4": "meals_per_day"}


@pytest.mark.parametrize("said", RESTATED)
def test_a_bare_answer_after_correction_words_answers_the_question_asked(said: str) -> None:
    assert _read(RESTATED[said], said) == {RESTATED[said]: "4"}


# An operation, a medicine, a joint condition: health words, a limitation wherever said, even beside
# another answer when the injuries were "none" ([health] surgery, medication, musculoskeletal).
LIMITED_BY = {
    "kettlebells, but I had an ACL reconstruction last year": "I had an ACL reconstruction last year",
    "kettlebells, but I'm on beta blockers": "I'm on beta blockers",
    "kettlebells, but I have a labral tear": "I have a labral tear",
}


@pytest.mark.parametrize("said", LIMITED_BY)
def test_an_operation_or_a_medicine_is_a_limitation_wherever_said(said: str) -> None:
    assert _read("equipment", said) == {"limitations": LIMITED_BY[said], "equipment": "kettlebells"}


# An upset stomach or heartburn after a food is an allergic reaction ([words] reaction).
@pytest.mark.parametrize("said", ["garlic gives me a dodgy tummy", "onions give me heartburn"])
def test_an_upset_stomach_after_a_food_is_an_allergy(said: str) -> None:
    assert _read("dietary_pattern", said) == {"allergies": said}


# A piece of kit an activity names is equipment, not the activity ([items.current_activity] says),
# at whichever question it is said.
def test_kit_named_by_an_activity_is_equipment() -> None:
    said = [
        ("timezone", "I also have a rowing machine"),
        ("cooking", "I got a yoga mat"),
        ("meals_per_day", "a boxing bag"),
    ]
    assert [_read(at, kit) for at, kit in said] == [{"equipment": kit} for _, kit in said]


def test_the_activity_done_on_such_kit_is_still_an_activity() -> None:
    said = "I row on my rowing machine 3 times a week"
    assert _read("current_activity", said) == {"current_activity": said}


# A weight to lose named by where it came from is still weight to lose ([items.primary_goal] says).
@pytest.mark.parametrize("said", ["mostly I want to shed the lockdown weight", "to lose my post-pregnancy fat"])
def test_weight_named_by_where_it_came_from_is_a_goal(said: str) -> None:
    assert _read("fitness_level", said) == {"primary_goal": said}


# A duration with its limit and how often it holds is a session length of its own beside the days
# ([items.session_length] says).
def test_a_session_with_its_limit_beside_the_days_is_a_session_length() -> None:
    assert _read("days_per_week", "twice a week, half an hour at most each time") == {
        "days_per_week": "twice a week",
        "session_length": "half an hour at most each time",
    }


# A kind of movement ruled out ("no high impact", "avoid kneeling") is an exercise preference, beside
# the condition that rules it out ([words] movement).
def test_a_movement_ruled_out_is_an_exercise_preference() -> None:
    assert _read("exercise_preferences", "no high impact please, my knees are shot") == {
        "limitations": "my knees are shot",
        "exercise_preferences": "no high impact please",
    }
    assert _read("session_length", "45 min, and avoid kneeling") == {
        "session_length": "45 min",
        "exercise_preferences": "avoid kneeling",
    }


# What the client stopped is not what they do now, and a "so" that opens what they do instead starts
# a part of its own ([words] so_opens; [items.current_activity] and [items.equipment] unless).
def test_an_activity_stopped_gives_way_to_the_one_after_so() -> None:
    assert _read("current_activity", "I gave up running so it's just pilates these days") == {
        "current_activity": "I gave up running so it's just pilates these days"
    }
    said = "I quit the gym in May so now it is mostly swimming"
    assert _read("current_activity", said) == {"current_activity": said}
    assert _read("current_activity", "I stopped cycling") == {}
