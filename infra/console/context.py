"""What the console's routes share: the settings, its own table client, the orchestrator that plans
turns as the functions do, and the turns it recorded."""

import asyncio
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

from infra.console.schemas import MemoryView, PlanView, TurnRecord
from infra.console.views import memory_view, plan_view
from infra.inspect_prompt import load_plan
from onboarding.audit import Caller, record_access
from onboarding.composition import build_check_ins, build_turn_service
from onboarding.config import Settings
from onboarding.model.errors import InvalidMessageError
from onboarding.persistence import Repositories
from onboarding.turn.service import TurnService

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from infra.local.stack import LocalStack

KEPT_TURNS = 500


def console_client(settings: Settings) -> "DynamoDBClient":
    """The console's own table client, on a session of its own: the turn meters count the functions'
    requests (on the default session), never the console's reads."""
    return boto3.Session().client(
        "dynamodb",
        region_name=settings.region,
        config=Config(retries={"mode": "standard", "total_max_attempts": settings.dynamodb_max_attempts}),
    )


class TurnBook:
    """The turns this console recorded (newest kept), and a wait for one to finish."""

    def __init__(self) -> None:
        self._records: OrderedDict[str, TurnRecord] = OrderedDict()
        self._finished: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def put(self, record: TurnRecord) -> None:
        with self._lock:
            self._records[record.turn_id] = record
            self._records.move_to_end(record.turn_id)
            done = self._finished.setdefault(record.turn_id, threading.Event())
            if record.finished:
                done.set()
            while len(self._records) > KEPT_TURNS:
                oldest, _ = self._records.popitem(last=False)
                self._finished.pop(oldest, None)

    def get(self, turn_id: str) -> TurnRecord | None:
        with self._lock:
            return self._records.get(turn_id)

    async def finished(self, turn_id: str, timeout_s: float) -> TurnRecord | None:
        """The turn once it finished (or as it is after `timeout_s`); None if never recorded (a turn
        is recorded before its request is handed on, so one its client saw is always there)."""
        with self._lock:
            done = self._finished.get(turn_id)
        if done is None:
            return None
        await asyncio.to_thread(done.wait, timeout_s)
        return self.get(turn_id)

    def of_user(self, user_id: str) -> list[TurnRecord]:
        with self._lock:
            return [record for record in self._records.values() if record.user_id == user_id]


@dataclass
class ConsoleContext:
    settings: Settings
    personal_data: bool
    stack: "LocalStack | None" = None  # None against AWS: read only
    client: "DynamoDBClient" = field(init=False)
    store: Repositories = field(init=False)
    service: TurnService = field(init=False)  # for its preview: what a turn would send, storing nothing
    book: TurnBook = field(default_factory=TurnBook)

    def __post_init__(self) -> None:
        self.client = console_client(self.settings)
        self.store = Repositories.over(self.client, self.settings.table_name, self.settings)
        self.service = build_turn_service(self.settings, self.store)
        # The schedules, read as the API reads them (GET /check-ins); none without a schedule group.
        self.check_ins = build_check_ins(self.settings, self.store) if self.settings.check_in_schedule_group else None

    @property
    def read_only(self) -> bool:
        return self.stack is None

    async def memory(self, user_id: str) -> MemoryView:
        view = await asyncio.to_thread(memory_view, self.store, user_id, self.personal_data, 500, self.check_ins)
        what = {
            "messages": view.messages_read,
            "answers": sum(answer.value is not None for answer in view.answers),
            "profile_fields": len(view.profile),
            "summary": int(view.summary is not None),
            "phones": len(view.phones),
        }
        record_access(Caller.command("infra.console", "console:memory"), user_id, what)
        return view

    async def plan(self, user_id: str, message: str) -> PlanView | None:
        """What the model would get for `message` now; None when no plan can be made (the message
        alone is over the budget: the turn refuses it the same way)."""
        try:
            caller = Caller.command("infra.console", "console:prompt")
            prepared, plan = await load_plan(self.service, user_id, message, caller)
        except InvalidMessageError:
            return None
        return plan_view(prepared, plan, self.personal_data)
