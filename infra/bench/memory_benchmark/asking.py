"""Owns asking a question the way the benchmark must: against the memory as it stands, without
writing the question into it.

The product's own preview builds the prompt a turn would send (the same read, recall and agent;
`TurnService.preview`), and the agent then answers it, its tools working on the turn's copy of the
memory: the model sees exactly what a turn's model would (tool rounds included), and nothing is
stored, so one question never becomes another's history or summary. Asked as the API function,
so the local stack checks its policy as for a turn. Each question is asked twice: with recall and
without (the recall flag off), which is the comparison the benchmark reports.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from infra.local.bedrock_emulator.recorded import RecordedRequest
from infra.local.iam.identity import acting_as
from onboarding.audit import Caller
from onboarding.config.flags import MemoryFeatures
from onboarding.recall.recaller import Recall
from onboarding.summary import SUMMARY_SYSTEM_PROMPT
from onboarding.turn.service import TurnService

CALLER = Caller.command("infra.memory_benchmark", "benchmark:question")
WITH_RECALL, WITHOUT_RECALL = MemoryFeatures(), MemoryFeatures(recall=False)


@dataclass(frozen=True)
class Asked:
    requests: tuple[RecordedRequest, ...]  # the coach's requests: the prompt, then each tool round
    reply: str
    recall: Recall


class Recorded:
    """What records the model's requests: the emulator, or (--aws) the recorder on boto3's session."""

    def __init__(self, source: object) -> None:
        self._source = source

    @property
    def requests(self) -> list[RecordedRequest]:
        return list(getattr(self._source, "requests"))  # noqa: B009 - either recorder's property


def coach_requests(requests: Sequence[RecordedRequest]) -> tuple[RecordedRequest, ...]:
    summary = SUMMARY_SYSTEM_PROMPT[:30]
    return tuple(r for r in requests if not r.system_text.startswith(summary))


async def ask(service: TurnService, model: Recorded, user_id: str, question: str, recall: bool) -> Asked:
    """The coach's answer to `question` from `user_id`'s memory as it stands; nothing stored."""
    since = len(model.requests)
    with acting_as("ApiFunction"):
        preview = await service.preview(user_id, question, CALLER, WITH_RECALL if recall else WITHOUT_RECALL)
        reply = "".join([chunk async for chunk in preview.prepared.agent.stream_response(question)])
    return Asked(coach_requests(model.requests[since:]), reply, preview.recall)
