"""The tooling's tests (infra/: the local stack's stand-ins, the console, the cost ledger, the
terminal helpers) use the unit tests' fixtures: moto in process and the service on the emulator."""

from tests.unit.conftest import (
    dynamodb,
    llm,
    orchestrator,
    service,
    settings,
    store,
)

__all__ = ["dynamodb", "llm", "orchestrator", "service", "settings", "store"]
