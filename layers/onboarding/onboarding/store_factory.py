"""Builds the store from settings. Kept apart from `onboarding.wiring` so functions that never call
the model (the SMS webhook) can build a store without importing LangChain."""

import boto3
from botocore.config import Config

from onboarding.settings import Settings
from onboarding.store import ConversationStore


def build_store(settings: Settings) -> ConversationStore:
    client = boto3.client(
        "dynamodb",
        region_name=settings.region,
        config=Config(retries={"mode": "standard", "total_max_attempts": settings.dynamodb_max_attempts}),
    )
    ttl_s = settings.message_ttl_days * 24 * 3600 or None
    return ConversationStore(client, settings.table_name, message_ttl_s=ttl_s)
