from tests.unit.conftest import dynamodb, idempotency_table, llm, orchestrator, service, settings, sms_queue, store

__all__ = ["dynamodb", "idempotency_table", "llm", "orchestrator", "service", "settings", "sms_queue", "store"]
