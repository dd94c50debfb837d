"""The memory console's views: the system prompt by section, the window, what was left out and why,
the memory with where each value came from, and redaction."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from infra.console.views import PromptSplitError, changed_paths, memory_view, plan_view, split_system_prompt
from onboarding.config import Settings
from onboarding.llm.prompt import PromptFacts, render_system_prompt
from onboarding.model.history import ConversationSummary, TurnContext
from onboarding.model.messages import Message, Role, ToolCall
from onboarding.model.profile import UserProfile
from onboarding.model.state import OnboardingAgentType, OnboardingState, WaitingFor
from onboarding.persistence import Repositories
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator
from onboarding.turn.service import TurnService
from tests.support.views import system_prompt_sections

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
T1 = T0 + timedelta(hours=3)  # after the conversation gap: a new conversation


def _message(index: int, at: datetime, text: str, **extra: Any) -> Message:
    role: Role = "user" if index % 2 == 1 else "assistant"
    return Message(role, text, message_id=f"{index:04d}", created_at=at, **extra)


def _history() -> TurnContext:
    """Two summarized messages, two unsummarized of an earlier conversation, six of the current one."""
    old = [_message(i, T0 + timedelta(seconds=i), f"old message {i}") for i in range(1, 5)]
    current = [_message(i, T1 + timedelta(seconds=i), f"current message {i} " + "x" * 30) for i in range(5, 11)]
    return TurnContext(
        state=OnboardingState(
            agent_context={"fitness_assessment": {"fitness_level": "beginner"}},
            waiting_for=WaitingFor(step=OnboardingAgentType.FITNESS_ASSESSMENT, field="limitations"),
        ),
        messages=(*old, *current),
        profile=UserProfile(name="Alexandra"),
        summary=ConversationSummary("- The client is called Alexandra\n- She walks her dog", "0002"),
    )


def _prepared(settings: Settings, loaded: TurnContext, message: str = "what next?") -> Any:
    orchestrator = OnboardingAgentOrchestrator(
        None,  # type: ignore[arg-type]  # prepare never reads
        FakeListChatModel(responses=[]),
        settings,
        clock=lambda: T1 + timedelta(seconds=30),
    )
    prepared = orchestrator.prepare("u", loaded)
    return prepared, prepared.agent.prompt_plan(message)


def test_every_left_out_message_has_the_reason_the_library_left_it_out() -> None:
    settings = Settings(table_name="tbl", window_max_messages=4)
    prepared, plan = _prepared(settings, _history())
    view = plan_view(prepared, plan, personal=True)
    reasons = {item.message_id: item.reason for item in view.left_out}
    assert reasons == {
        "0001": "folded_into_summary",
        "0002": "folded_into_summary",
        "0003": "before_conversation_start",
        "0004": "before_conversation_start",
        "0005": "over_budget",
        "0006": "over_budget",
    }
    assert [m.message_id for m in view.window] == ["0007", "0008", "0009", "0010"]
    assert view.left_out_by_budget == plan.left_out == 2


def test_the_numbers_are_the_plans_own_and_the_window_adds_up() -> None:
    prepared, plan = _prepared(Settings(table_name="tbl"), _history())
    view = plan_view(prepared, plan, personal=True)
    assert (view.total_tokens, view.system_tokens, view.window_tokens, view.current_tokens, view.budget) == (
        plan.total_tokens,
        plan.system_tokens,
        plan.window_tokens,
        plan.current_tokens,
        plan.budget,
    )
    assert sum(message.tokens for message in view.window) == plan.window_tokens
    assert view.system == plan.system


def test_the_sections_are_the_system_prompt_with_the_recap_apart() -> None:
    prepared, plan = _prepared(Settings(table_name="tbl"), _history())
    view = plan_view(prepared, plan, personal=True)
    kinds = [section.kind for section in view.sections]
    for kind in ("instructions", "profile", "collected_answers", "summary", "recap", "waiting_for"):
        assert kind in kinds
    recap = next(section for section in view.sections if section.kind == "recap")
    assert recap.text.split("\n") == ["- Client: old message 3", "- Coach: old message 4"]
    summary = next(section for section in view.sections if section.kind == "summary")
    assert "She walks her dog" in summary.text
    assert "old message" not in summary.text
    # Every section's text is in the prompt, in order, and nothing else is.
    joined = "\n\n".join(s.text for s in view.sections if s.kind != "recap")
    assert joined.replace("her dog", "her dog\n" + recap.text) == plan.system


def test_summary_lines_cut_by_the_allowance_are_counted() -> None:
    loaded = _history()
    long_summary = "\n".join(f"- fact number {i} about the client, kept in the summary" for i in range(200))
    loaded = TurnContext(
        state=loaded.state, messages=loaded.messages, summary=ConversationSummary(long_summary, "0002")
    )
    prepared, plan = _prepared(Settings(table_name="tbl", system_prompt_allowance=1700, profile_value_chars=20), loaded)
    view = plan_view(prepared, plan, personal=True)
    assert view.summary_lines_dropped > 0
    assert "fact number 199" in plan.system
    assert "fact number 0 " not in plan.system
    assert any(section.kind == "recap" for section in view.sections)  # the newest lines survive


def test_a_prompt_that_is_not_the_join_of_its_sections_is_refused() -> None:
    prepared, plan = _prepared(Settings(table_name="tbl"), _history())
    altered = type(plan)(**{**plan.__dict__, "system": plan.system + "\n\nsomething the library never wrote"})
    with pytest.raises(PromptSplitError):
        split_system_prompt(prepared, altered)


@pytest.mark.parametrize("complete", [False, True])
@pytest.mark.parametrize("unavailable", [False, True])
def test_render_system_prompt_is_the_join_of_its_sections(complete: bool, unavailable: bool) -> None:
    facts = PromptFacts(
        profile_lines=["- Name: Ana"],
        address_as="Ana",
        summary="- a\n- b",
        waiting_for="limitations",
        waiting_attempts=2,
        skipped=("fitness_assessment.age_and_body",),
        onboarding_complete=complete,
        memory_unavailable=unavailable,
    )
    for step in OnboardingAgentType:
        sections = system_prompt_sections(step, {"goal_setting": {"target": "10k"}}, facts)
        assert "\n\n".join(s.text for s in sections) == render_system_prompt(
            step, {"goal_setting": {"target": "10k"}}, facts
        )


def test_redacted_views_show_lengths_only_with_the_same_counts() -> None:
    prepared, plan = _prepared(Settings(table_name="tbl"), _history())
    shown, hidden = plan_view(prepared, plan, personal=True), plan_view(prepared, plan, personal=False)
    text = hidden.model_dump_json()
    for personal in (
        "Alexandra",
        "walks her dog",
        "old message",
        "current message",
        "fitness_level: beginner",
        "what next?",
    ):
        assert personal not in text
    assert "Current step: Fitness assessment" in text  # our own instructions are not personal
    assert [s.tokens for s in hidden.sections] == [s.tokens for s in shown.sections]
    assert hidden.total_tokens == shown.total_tokens


async def test_each_answer_and_profile_value_names_the_message_it_came_from(
    service: TurnService, store: Repositories
) -> None:
    for text in ["Hi! My name is Alexandra", "I am a total beginner"]:
        await (await service.start_turn("u", text)).collect()
    view = memory_view(store, "u", personal=True)
    level = next(a for a in view.answers if a.field == "fitness_level")
    assert level.value
    assert level.provenance is not None
    assert level.provenance.tool == "save_fitness_assessment"
    assert level.provenance.user_said == "I am a total beginner"
    name = next(p for p in view.profile if p.field == "name")
    assert name.provenance is not None
    assert name.provenance.user_said == "Hi! My name is Alexandra"
    assert next(a for a in view.answers if a.field == "limitations").provenance is None
    hidden = memory_view(store, "u", personal=False).model_dump_json()
    assert "Alexandra" not in hidden
    assert "total beginner" not in hidden


def test_a_failed_tool_call_is_no_provenance(store: Repositories) -> None:
    from tests.support.seed import commit

    call = ToolCall("c1", "save_fitness_assessment", {"fitness_level": "advanced"})
    commit(store, "u", [Message("user", "I'm advanced"), Message("assistant", "", tool_calls=(call,))])
    commit(store, "u", [Message("tool", '{"error": "invalid arguments for this tool"}', tool_call_id="c1")])
    view = memory_view(store, "u", personal=True)
    assert all(answer.provenance is None for answer in view.answers)


def test_changed_paths_name_what_a_turn_changed(service: TurnService, store: Repositories) -> None:
    before = memory_view(store, "u", personal=True)
    after = before.model_copy(
        update={"summary": "new", "answers": [a.model_copy(update={"value": "x"}) for a in before.answers[:1]]}
    )
    changed = changed_paths(before, after)
    assert "summary" in changed
    assert "answers.fitness_assessment.fitness_level" in changed
    assert "step" not in changed


def test_an_answer_reads_as_its_value_with_its_time_and_earlier_values(
    dynamodb: Any, settings: Settings, store: Repositories
) -> None:
    """The answer record the library stores ({value, said_in, said_at, previous}) reaches the page
    as its parts, never as the record's text (the console once showed `{'value': ...}`)."""
    from onboarding.model.answers import Answer, PreviousValue
    from tests.support.seed import save_state

    corrected = Answer("80 kg", "m2", T1, (PreviousValue("85 kg", "m1", T0, T1),))
    saved = {
        "fitness_assessment": {
            "fitness_level": Answer("beginner", "m0", T0).stored(),
            "age_and_body": corrected.stored(),
        }
    }
    save_state(dynamodb, settings.table_name, "u", OnboardingState(agent_context=saved))
    view = memory_view(store, "u", personal=True)
    level = next(a for a in view.answers if a.field == "fitness_level")
    assert (level.value, level.said_at, level.said_in, level.earlier) == ("beginner", T0, "m0", [])
    body = next(a for a in view.answers if a.field == "age_and_body")
    assert body.value == "80 kg"
    assert [(e.value, e.said_at, e.replaced_at) for e in body.earlier] == [("85 kg", T0, T1)]
    hidden = memory_view(store, "u", personal=False)
    assert "85 kg" not in hidden.model_dump_json()
    assert "mappingproxy" not in view.model_dump_json()
    assert "'value'" not in view.model_dump_json()
