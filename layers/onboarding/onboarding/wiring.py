"""The composition root: builds the turn service and its dependencies from settings.

Each dependency is passed explicitly; nothing here is a global or a singleton.
"""

from functools import partial

from langchain_core.language_models import BaseChatModel

from onboarding.agents.base import PromptLimits
from onboarding.memory import WindowPolicy, is_reset_command
from onboarding.model import build_chat_model
from onboarding.orchestrator import MemoryRules, OnboardingAgentOrchestrator
from onboarding.resilience import CircuitBreaker, RetryPolicy
from onboarding.settings import Settings
from onboarding.store import ConversationStore, RateLimit
from onboarding.store_factory import build_store
from onboarding.summary import Summarizer
from onboarding.turns import TurnService


def _limits(settings: Settings) -> PromptLimits:
    return PromptLimits(settings.token_budget, settings.system_prompt_allowance, settings.max_tool_rounds)


def _rules(settings: Settings) -> MemoryRules:
    return MemoryRules(settings.conversation_gap_s, partial(is_reset_command, keywords=settings.reset_keywords))


def build_orchestrator(
    settings: Settings, store: ConversationStore | None = None, llm: BaseChatModel | None = None
) -> OnboardingAgentOrchestrator:
    """The orchestrator alone: what the inspect command uses to show a user's prompt."""
    return OnboardingAgentOrchestrator(
        store or build_store(settings),
        llm or build_chat_model(settings),
        settings.history_load_limit,
        _limits(settings),
        _rules(settings),
    )


def build_turn_service(settings: Settings, store: ConversationStore | None = None) -> TurnService:
    store = store or build_store(settings)
    llm = build_chat_model(settings)
    policy = WindowPolicy(
        max_messages=settings.window_max_messages,
        max_tokens=settings.window_max_tokens,
        keep_messages=max(1, settings.window_max_messages // 2),
        keep_tokens=settings.window_max_tokens // 2,
    )
    rate_limit = (
        RateLimit(settings.rate_limit_messages, settings.rate_limit_window_s) if settings.rate_limit_messages else None
    )
    return TurnService(
        build_orchestrator(settings, store, llm),
        store,
        settings.max_message_bytes,
        rate_limit=rate_limit,
        breaker=CircuitBreaker(settings.circuit_failure_threshold, settings.circuit_reset_s),
        retry_policy=RetryPolicy(attempts=settings.model_stream_attempts, budget_s=settings.model_retry_budget_s),
        summarizer=Summarizer(llm, store, policy, settings.summary_max_tokens),
        rules=_rules(settings),
        limits=_limits(settings),
    )
