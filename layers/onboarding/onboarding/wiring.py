"""The composition root: builds the turn service and its dependencies from settings.

Each dependency is passed explicitly; nothing here is a global or a singleton.
"""

import boto3
from botocore.config import Config

from onboarding.model import build_chat_model
from onboarding.orchestrator import OnboardingAgentOrchestrator
from onboarding.settings import Settings
from onboarding.store import ConversationStore
from onboarding.turns import TurnService


def build_store(settings: Settings) -> ConversationStore:
    client = boto3.client(
        "dynamodb",
        region_name=settings.region,
        config=Config(retries={"mode": "standard", "total_max_attempts": settings.dynamodb_max_attempts}),
    )
    return ConversationStore(client, settings.table_name)


def build_turn_service(settings: Settings) -> TurnService:
    store = build_store(settings)
    orchestrator = OnboardingAgentOrchestrator(store, build_chat_model(settings), settings.history_load_limit)
    return TurnService(orchestrator, store, settings.max_message_bytes)
