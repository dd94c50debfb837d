from tests.unit.conftest import (
    account,
    dynamodb,
    idempotency_table,
    llm,
    orchestrator,
    service,
    settings,
    sms_queue,
    store,
)

__all__ = [
    "account",
    "dynamodb",
    "idempotency_table",
    "llm",
    "orchestrator",
    "service",
    "settings",
    "sms_queue",
    "store",
]
