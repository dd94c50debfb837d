"""Owns every limit and default of the product, and the policies derived from them.

`Limits` holds each tunable number once, with its default and its environment variable;
`Settings` adds where things are (table, region, model). The policies the rest of the code uses
(window, fold, prompt budget, retries, breaker, rate limit, conversation rules) are built from
`Limits` here and nowhere else, so no other module holds a default that could drift from these.
Pydantic only: the SMS webhook imports this on its cold path.
"""

from onboarding.config.policies import (
    BreakerPolicy,
    ConversationRules,
    FoldPolicy,
    PromptLimits,
    QuietHours,
    RateLimit,
    RecallPolicy,
    RetryPolicy,
)
from onboarding.config.settings import (
    DEFAULT_LIMITS,
    DEFAULT_MODEL_ID,
    CheckInSettings,
    Limits,
    Settings,
    WebhookSettings,
    WorkerSettings,
)

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_MODEL_ID",
    "BreakerPolicy",
    "CheckInSettings",
    "ConversationRules",
    "FoldPolicy",
    "Limits",
    "PromptLimits",
    "QuietHours",
    "RateLimit",
    "RecallPolicy",
    "RetryPolicy",
    "Settings",
    "WebhookSettings",
    "WorkerSettings",
]
