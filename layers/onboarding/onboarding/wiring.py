"""The composition root: builds the turn service and its dependencies from settings.

Each dependency is passed explicitly; nothing here is a global or a singleton.
"""

from onboarding.model import build_chat_model
from onboarding.orchestrator import OnboardingAgentOrchestrator
from onboarding.resilience import CircuitBreaker, RetryPolicy
from onboarding.settings import Settings
from onboarding.store import ConversationStore, RateLimit
from onboarding.store_factory import build_store
from onboarding.turns import TurnService


def build_turn_service(settings: Settings, store: ConversationStore | None = None) -> TurnService:
    store = store or build_store(settings)
    orchestrator = OnboardingAgentOrchestrator(store, build_chat_model(settings), settings.history_load_limit)
    rate_limit = (
        RateLimit(settings.rate_limit_messages, settings.rate_limit_window_s) if settings.rate_limit_messages else None
    )
    return TurnService(
        orchestrator,
        store,
        settings.max_message_bytes,
        rate_limit=rate_limit,
        breaker=CircuitBreaker(settings.circuit_failure_threshold, settings.circuit_reset_s),
        retry_policy=RetryPolicy(attempts=settings.model_stream_attempts, budget_s=settings.model_retry_budget_s),
    )
