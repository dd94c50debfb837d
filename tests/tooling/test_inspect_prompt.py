"""The inspect command: what the model would get for a user, redacted unless asked for."""

import io
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel

from infra.inspect_prompt import inspect, redact_system_prompt
from onboarding.config import Settings
from onboarding.persistence import Repositories
from onboarding.turn.service import TurnService

pytestmark = pytest.mark.unit


async def _conversation(service: TurnService) -> None:
    for text in ["Hi! My name is Alexandra", "I am a total beginner", "I walk my dog daily"]:
        await (await service.start_turn("u", text)).collect()


async def test_it_shows_the_prompt_window_and_budget_with_personal_data_redacted(
    service: TurnService, settings: Settings, dynamodb: Any, llm: BaseChatModel, store: Repositories
) -> None:
    await _conversation(service)
    out = io.StringIO()
    plan = await inspect(settings, "u", "what next?", personal_data=False, out=out)
    shown = out.getvalue()
    assert f"Budget: {plan.total_tokens} of {plan.budget} tokens" in shown
    assert "=== system prompt ===" in shown
    assert "Current step: Fitness assessment" in shown
    assert "Collect, one question at a time:" in shown  # our instructions are not personal
    for personal in ("Alexandra", "total beginner", "walk my dog", "what next?"):
        assert personal not in shown
    assert "[redacted:" in shown
    assert plan.window  # the texts are in the plan, only the printout hides them
    assert plan.total_tokens <= plan.budget


async def test_personal_data_is_shown_when_asked_for(service: TurnService, settings: Settings) -> None:
    await _conversation(service)
    out = io.StringIO()
    await inspect(settings, "u", "what next?", personal_data=True, out=out)
    shown = out.getvalue()
    for personal in ("Alexandra", "total beginner", "I walk my dog daily", "what next?"):
        assert personal in shown
    assert "save_fitness_assessment(" in shown  # tool calls in the window, with their arguments


def test_redaction_covers_every_personal_section() -> None:
    system = (
        "You are Coach.\n\nAddress the client as Alex.\n\nAlready known:\n- fitness_assessment.limitations: knee\n\n"
        "About the client (remembered across conversations):\n- Name: Alexandra\n\n"
        "Summary of the earlier conversation:\n- Client said: I love rowing\n\nRules:\n- be kind"
    )
    redacted = redact_system_prompt(system)
    for personal in ("Alex", "knee", "Alexandra", "rowing"):
        assert personal not in redacted
    assert "- be kind" in redacted
    assert "- fitness_assessment.limitations: [redacted: 4 characters]" in redacted
