from tests.unit.conftest import dynamodb, llm, orchestrator, settings, store

__all__ = ["dynamodb", "llm", "orchestrator", "settings", "store"]
