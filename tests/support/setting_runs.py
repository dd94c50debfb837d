"""What the tests that change a setting share: the settings with changes, the repositories over a
test's client, the `Limit` of each Query a client sends, and one whole turn (reply, then fold)."""

import time
from collections.abc import Callable
from typing import Any

from onboarding.config import Settings
from onboarding.persistence import Repositories
from onboarding.turn.service import TurnService
from tests.unit.conftest import TABLE


def settings_with(**changes: Any) -> Settings:
    """Defaults, with backoffs short enough for tests, then `changes`."""
    return Settings(**{"table_name": TABLE, "model_first_backoff_s": 0.01, "model_max_backoff_s": 0.05, **changes})


def repositories(dynamodb: Any, settings: Settings, clock: Callable[[], float] = time.time) -> Repositories:
    return Repositories.over(dynamodb, settings.table_name, settings, clock)


def query_limits(dynamodb: Any) -> list[int]:
    """The `Limit` of every Query the client sends from now on (seen by a botocore event hook)."""
    seen: list[int] = []

    def hook(params: dict[str, Any], **_: Any) -> None:
        seen.append(params["Limit"])

    dynamodb.meta.events.register("provide-client-params.dynamodb.Query", hook)
    return seen


async def run_turn(service: TurnService, user: str, message: str) -> str:
    turn = await service.start_turn(user, message)
    result = await turn.collect()
    await turn.fold_summary()
    return result.reply
