"""Owns building the product from its settings: the one composition root.

Every dependency is built here and passed explicitly; nothing is a global or a singleton. Every
AWS client comes from boto3's default session (a new session reads botocore's endpoint data
again, about 0.1 s of a cold start apiece), and no endpoint is ever passed: botocore reads the
standard `AWS_ENDPOINT_URL_*` variables itself. The builders of what calls the model import
LangChain inside themselves, so the SMS webhook, which never calls the model, never loads it.
"""

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import boto3
from botocore.config import Config

from onboarding.account import AccountService
from onboarding.config import CheckInSettings, Limits, Settings, WebhookSettings, WorkerSettings
from onboarding.model.users import new_sms_user_id
from onboarding.persistence import Repositories
from onboarding.recall.vectors import VectorIndex

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
    from aws_lambda_powertools.utilities.parameters import SSMProvider
    from langchain_core.language_models import BaseChatModel
    from mypy_boto3_appconfigdata import AppConfigDataClient
    from mypy_boto3_dynamodb import DynamoDBClient

    from onboarding.checkins.outreach import CheckInService
    from onboarding.checkins.timetable import CheckInTimetable
    from onboarding.flags.rollout import Rollout
    from onboarding.recall.indexer import MessageIndexer
    from onboarding.recall.recaller import Recaller
    from onboarding.sms.intake import SmsIntake
    from onboarding.sms.queue import TurnQueue
    from onboarding.sms.responder import SmsResponder
    from onboarding.sms.sender import SmsSender
    from onboarding.snapstart import Primer
    from onboarding.turn.orchestrator import OnboardingAgentOrchestrator
    from onboarding.turn.service import TurnService


def _table_client(settings: Settings) -> "DynamoDBClient":
    return boto3.client(
        "dynamodb",
        region_name=settings.region,
        config=Config(
            retries={"mode": "standard", "total_max_attempts": settings.dynamodb_max_attempts},
            connect_timeout=settings.dynamodb_connect_timeout_s,
            read_timeout=settings.dynamodb_read_timeout_s,
        ),
    )


def build_repositories(settings: Settings) -> Repositories:
    return Repositories.over(_table_client(settings), settings.table_name, settings)


def build_vector_index(settings: Settings, hot_path: bool = False) -> VectorIndex | None:
    """The recall index (None when the settings name none). On a turn's hot path its client makes
    one try, cut at RECALL_TIMEOUT_S, and is made now (SnapStart primes it); elsewhere (erase, the
    indexer) botocore's standard tries, and the client is made at the first call: the webhook uses
    it only for an erase by text, and its cold start does not build it (decision 0016)."""
    if not settings.recall_index_arn:
        return None
    from onboarding.recall.embeddings import embeddings_client_config

    def connect() -> Any:
        config = embeddings_client_config(settings, hot_path)
        return boto3.client("s3vectors", region_name=settings.region, config=config)

    if hot_path:
        return VectorIndex(connect(), settings.recall_index_arn, settings.embedding_max_chars)
    return VectorIndex.connecting_when_used(connect, settings.recall_index_arn, settings.embedding_max_chars)


def build_recaller(settings: Settings, model_client: Any = None) -> "Recaller | None":
    """A turn's recall: the index (a hot-path client) and the embedding model, on `model_client`
    (the chat model's bedrock-runtime client: one such client a function)."""
    index = build_vector_index(settings, hot_path=True)
    if index is None:
        return None
    from onboarding.recall.embeddings import build_embeddings
    from onboarding.recall.recaller import Recaller

    return Recaller(build_embeddings(settings, model_client), index, settings.recall)


def build_indexer(settings: Settings) -> "MessageIndexer":
    """The recall indexer's: the index, the embedding model and the table (what a message answers)."""
    index = build_vector_index(settings)
    if index is None:
        raise ValueError("RECALL_INDEX_ARN is not set: the indexer has no index to keep")
    from onboarding.recall.embeddings import build_embeddings
    from onboarding.recall.indexer import MessageIndexer

    store = build_repositories(settings)
    return MessageIndexer(build_embeddings(settings), index, store.conversations, settings.recall)


def build_timetable(settings: Settings) -> "CheckInTimetable | None":
    """The users' check-in schedules (EventBridge Scheduler), or None when the settings name no
    schedule group. The client is made at the first schedule change, not on the cold path."""
    group, target, role = settings.check_in_schedule_group, settings.check_in_function_arn, settings.check_in_role_arn
    if not group:
        return None
    if not (target and role):
        raise ValueError("CHECK_IN_SCHEDULE_GROUP needs CHECK_IN_FUNCTION_ARN and CHECK_IN_ROLE_ARN")
    from onboarding.checkins.timetable import CheckInTimetable

    def connect() -> Any:
        config = Config(
            retries={"mode": "standard", "total_max_attempts": settings.dynamodb_max_attempts},
            connect_timeout=settings.dynamodb_connect_timeout_s,
            read_timeout=settings.dynamodb_read_timeout_s,
        )
        return boto3.client("scheduler", region_name=settings.region, config=config)

    return CheckInTimetable(connect, group, target, role, settings.check_in_window_minutes)


def build_check_ins(
    settings: Settings,
    store: Repositories,
    llm: "BaseChatModel | None" = None,
    sender: "SmsSender | None" = None,
    from_number: str | None = None,
) -> "CheckInService":
    """The check-ins: with `llm`, one that writes them (the CheckInFunction); without, one that
    keeps the schedules only (the functions that save answers, erase and link)."""
    from onboarding.checkins.outreach import CheckInService

    agent = None
    if llm is not None:
        from onboarding.agents.check_in import CheckInAgent

        agent = CheckInAgent(llm, settings.check_in_max_chars)
    return CheckInService(store, agent, settings, build_timetable(settings), sender, from_number)


def build_orchestrator(
    settings: Settings, store: Repositories, llm: "BaseChatModel | None" = None
) -> "OnboardingAgentOrchestrator":
    from onboarding.llm.bedrock import build_chat_model
    from onboarding.turn.orchestrator import OnboardingAgentOrchestrator

    return OnboardingAgentOrchestrator(store.conversations, llm or build_chat_model(settings), settings)


def build_rollout(settings: Settings, client: "AppConfigDataClient | None" = None) -> "Rollout":
    """The memory's feature flags (docs/rollout.md): from AppConfig when the settings name it,
    from FEATURE_FLAGS_FILE when set, else the documented defaults. Either store is cached for
    FEATURE_FLAGS_MAX_AGE_S; a fetch waits at most FEATURE_FLAGS_TIMEOUT_S, once, since the last
    known flags stay in force when it fails."""
    from pathlib import Path

    from aws_lambda_powertools.utilities.feature_flags import AppConfigStore, StoreProvider

    from onboarding.flags.rollout import FileStore, Rollout

    max_age = settings.feature_flags_max_age_s
    store: StoreProvider | None = None
    if settings.feature_flags_application:
        client = client or boto3.client(
            "appconfigdata",
            region_name=settings.region,
            config=Config(
                retries={"mode": "standard", "total_max_attempts": 1},
                connect_timeout=settings.feature_flags_timeout_s,
                read_timeout=settings.feature_flags_timeout_s,
            ),
        )
        store = AppConfigStore(
            environment=str(settings.feature_flags_environment),
            application=settings.feature_flags_application,
            name=str(settings.feature_flags_profile),
            max_age=max_age,
            boto3_client=client,
        )
    elif settings.feature_flags_file:
        store = FileStore(Path(settings.feature_flags_file), max_age)
    return Rollout(store, retry_after_s=max_age)


def build_turn_service(
    settings: Settings,
    store: Repositories | None = None,
    llm: "BaseChatModel | None" = None,
    recaller: "Recaller | None" = None,
) -> "TurnService":
    """`recaller`: None builds one from the settings (none when they name no recall index)."""
    from onboarding.breaker import CircuitBreaker
    from onboarding.llm.bedrock import build_chat_model
    from onboarding.summary import Summarizer
    from onboarding.turn.service import TurnService

    store = store or build_repositories(settings)
    llm = llm or build_chat_model(settings)
    return TurnService(
        build_orchestrator(settings, store, llm),
        store,
        breaker=CircuitBreaker(settings.breaker),
        summarizer=Summarizer(llm, settings.summary_max_tokens),
        store_breaker=CircuitBreaker(settings.store_breaker, name="store"),
        flags=build_rollout(settings).for_user,
        recaller=recaller or build_recaller(settings, getattr(llm, "client", None)),
        check_ins=build_check_ins(settings, store) if settings.check_in_schedule_group else None,
    )


def build_account(settings: Settings, store: Repositories) -> AccountService:
    return AccountService(store, settings, build_vector_index(settings), _schedules(settings, store))


def _schedules(settings: Settings, store: Repositories) -> "CheckInService | None":
    """What an erase, a link or a STOP changes of the user's check-in schedule (None: no schedules)."""
    return build_check_ins(settings, store) if settings.check_in_schedule_group else None


def sms_intake(
    store: Repositories,
    queue: "TurnQueue",
    limits: Limits,
    index: VectorIndex | None = None,
    clock: Callable[[], float] = time.time,
    new_user_id: Callable[[], str] = new_sms_user_id,
    check_ins: "CheckInService | None" = None,
) -> "SmsIntake":
    """The webhook's intake over `store`, wired as the webhook runs it: the phone's service and the
    account's (whose erase takes the user's vectors from `index` too, and their check-in schedule
    from `check_ins`, which STOP pauses and a link moves)."""
    from onboarding.linking import PhoneLinking
    from onboarding.sms.intake import SmsIntake

    account = AccountService(store, limits, index, check_ins)
    linking = PhoneLinking(store, limits, account, new_user_id, clock)
    return SmsIntake(linking, account, queue, limits, clock)


def sms_responder(
    service: "TurnService",
    store: Repositories,
    sender: "SmsSender",
    index: VectorIndex | None = None,
    check_ins: "CheckInService | None" = None,
) -> "SmsResponder":
    """The worker's responder, wired as the worker runs it: the turn service, the phone's service
    (and the account's, for a pending merge's erase) and Twilio's sender."""
    from onboarding.linking import PhoneLinking
    from onboarding.sms.responder import SmsResponder

    linking = PhoneLinking(store, service.limits, AccountService(store, service.limits, index, check_ins))
    return SmsResponder(service, linking, sender)


class ApiParts(NamedTuple):
    service: "TurnService"
    account: "AccountService"
    primer: "Primer"


class ModelParts(NamedTuple):
    client: "DynamoDBClient"
    store: Repositories
    llm: "BaseChatModel"
    recaller: "Recaller | None"
    primer: "Primer"


def _model_parts(settings: Settings, also: Callable[[], None] | None = None) -> ModelParts:
    """The table's client and repositories, the model, recall, and a SnapStart primer over the very
    clients they use."""
    from onboarding.llm.bedrock import build_chat_model
    from onboarding.snapstart import Primer

    client = _table_client(settings)
    store = Repositories.over(client, settings.table_name, settings)
    llm = build_chat_model(settings)
    recaller = build_recaller(settings, llm.client)  # type: ignore[attr-defined]
    clients = [client, llm.client]  # type: ignore[attr-defined]
    if recaller is not None:
        clients += [c for c in recaller.clients if c not in clients]
    primer = Primer(settings, llm, clients, lambda offline: build_turn_service(offline, store, llm, recaller), also)
    return ModelParts(client, store, llm, recaller, primer)


def build_api(settings: Settings) -> ApiParts:
    """What the mobile API needs: the turn service and the account service, over one client, and
    the primer its SnapStart hooks call."""
    _, store, llm, recaller, primer = _model_parts(settings)
    return ApiParts(build_turn_service(settings, store, llm, recaller), build_account(settings, store), primer)


def build_parameters() -> "SSMProvider":
    """SSM parameters, cached by Powertools per name."""
    from aws_lambda_powertools.utilities.parameters import SSMProvider

    return SSMProvider(boto3_client=boto3.client("ssm"))


def twilio_auth_token(parameters: "SSMProvider", parameter_name: str, max_age_s: int) -> str:
    """The Twilio auth token, from an SSM SecureString (cached `max_age_s`, so a rotation needs no redeploy)."""
    return str(parameters.get(parameter_name, decrypt=True, max_age=max_age_s))


def webhook_url(settings: WebhookSettings, parameters: "SSMProvider") -> Callable[[], str]:
    """Where the webhook's public URL comes from: the setting, or its SSM parameter (cached)."""
    if settings.twilio_webhook_url is not None:
        return lambda: str(settings.twilio_webhook_url)
    name = str(settings.twilio_webhook_url_parameter)
    return lambda: str(parameters.get(name, max_age=settings.parameter_max_age_s))


def _idempotency_layer(table_name: str, client: "DynamoDBClient") -> "DynamoDBPersistenceLayer":
    """Powertools Idempotency's store, on the function's own DynamoDB client (a second client would
    cost a cold start its construction and a connection of its own), whose retried in-progress
    write is recognised as its own (persistence/idempotency.py)."""
    from onboarding.persistence.idempotency import CallMarkingIdempotencyLayer

    return CallMarkingIdempotencyLayer(table_name, client)


class WebhookParts(NamedTuple):
    intake: "SmsIntake"
    idempotency: "DynamoDBPersistenceLayer"


def build_webhook(settings: Settings, sms: WebhookSettings) -> WebhookParts:
    """The webhook's intake (phone owners, opt-outs, links, erasing by text, and the queue) and its
    idempotency store, over one DynamoDB client. No LangChain."""
    from onboarding.sms.queue import TurnQueue

    client = _table_client(settings)
    queue = TurnQueue(boto3.client("sqs", region_name=settings.region), sms.queue_url)
    repositories = Repositories.over(client, settings.table_name, settings)
    intake = sms_intake(
        repositories, queue, settings, build_vector_index(settings), check_ins=_schedules(settings, repositories)
    )
    return WebhookParts(intake, _idempotency_layer(sms.idempotency_table_name, client))


class WorkerParts(NamedTuple):
    responder: "SmsResponder"
    primer: "Primer"
    idempotency: "DynamoDBPersistenceLayer"


def build_worker(settings: Settings, sms: WorkerSettings) -> WorkerParts:
    """The worker's responder (the turn service, the phone directory and Twilio's sender) and the
    primer its SnapStart hooks call."""
    from onboarding.sms.sender import prime_twilio

    client, store, llm, recaller, primer = _model_parts(settings, also=prime_twilio)
    sender = _twilio_sender(sms.twilio_account_sid, sms.twilio_auth_token_parameter, sms)
    service = build_turn_service(settings, store, llm, recaller)
    responder = sms_responder(service, store, sender, build_vector_index(settings), _schedules(settings, store))
    return WorkerParts(responder, primer, _idempotency_layer(sms.idempotency_table_name, client))


def _twilio_sender(account_sid: str, token_parameter: str, sms: "WorkerSettings | CheckInSettings") -> "SmsSender":
    """Twilio's sender, its auth token read from SSM (cached, so a rotation needs no redeploy)."""
    from onboarding.sms.sender import TwilioSender

    parameters = build_parameters()
    return TwilioSender(
        account_sid,
        lambda: twilio_auth_token(parameters, token_parameter, sms.parameter_max_age_s),
        sms.twilio_api_base_url,
        sms.twilio_send_attempts,
        sms.twilio_timeout_s,
    )


def build_check_in_function(settings: Settings, sms: CheckInSettings) -> "CheckInService":
    """The CheckInFunction's service: the table, the model (the check-in agent's) and, when the
    settings name a Twilio account, its sender. It changes no schedule itself."""
    from onboarding.llm.bedrock import build_chat_model

    sender = None
    if sms.twilio_account_sid and sms.twilio_auth_token_parameter:
        sender = _twilio_sender(sms.twilio_account_sid, sms.twilio_auth_token_parameter, sms)
    store = build_repositories(settings)
    llm = build_chat_model(settings)
    return build_check_ins(
        settings.model_copy(update={"check_in_schedule_group": None}), store, llm, sender, sms.twilio_from_number
    )
