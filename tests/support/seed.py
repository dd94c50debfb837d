"""Writes items straight into the table for tests that need a user in a given state: the store
has no public method to overwrite state or profile (a turn commits them with its reply)."""

import time
from typing import Any

from onboarding.model.profile import UserProfile
from onboarding.model.state import OnboardingState
from onboarding.persistence.codec import profile_item, state_item


def save_state(client: Any, table: str, user_id: str, state: OnboardingState) -> None:
    client.put_item(TableName=table, Item=state_item(user_id, state, time.time()))


def save_profile(client: Any, table: str, user_id: str, profile: UserProfile) -> None:
    client.put_item(TableName=table, Item=profile_item(user_id, profile, time.time()))
