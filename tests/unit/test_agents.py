"""Each agent streams its reply from the model, sending exactly what _build_messages built.

The model here is the real ChatBedrockConverse talking to the Bedrock emulator over loopback.
"""

import pytest
from langchain_core.language_models import BaseChatModel

from infra.local.bedrock_emulator import BedrockEmulator
from onboarding.agents import AGENT_CLASSES
from onboarding.context import OnboardingAgentContext
from onboarding.llm.wording import STEP_PROMPTS
from onboarding.model.state import OnboardingAgentType
from tests.support.views import message_texts


@pytest.mark.parametrize("agent_type", list(OnboardingAgentType))
async def test_agent_streams_the_reply_to_its_built_messages(
    agent_type: OnboardingAgentType, llm: BaseChatModel, emulator: BedrockEmulator
) -> None:
    """Every step's agent: stream_response sends _build_messages(message) and yields the model's chunks."""
    context = OnboardingAgentContext(
        user_id="u",
        conversation_history=[
            {"role": "user", "content": "I'm a beginner"},
            {"role": "assistant", "content": "Noted."},
        ],
    )
    agent = AGENT_CLASSES[agent_type](context, llm)
    chunks = [chunk async for chunk in agent.stream_response("How many pushups should I do?")]

    assert len(chunks) > 1, "the reply should arrive in several chunks"
    (request,) = emulator.requests
    built = agent._build_messages("How many pushups should I do?")
    assert request.system_text == built[0].content
    assert [(turn.role, turn.text) for turn in request.conversation] == [
        ("user" if message.type == "human" else "assistant", "\n".join(message_texts(message))) for message in built[1:]
    ]
    first_question = STEP_PROMPTS[agent_type].fields[0].question
    assert "".join(chunks).endswith(first_question)
