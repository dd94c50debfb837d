"""Owns erasing a user's memory everywhere it is kept: the table's partition, and the vectors the
recall index made of their messages. Every erase goes through here (DELETE /me, YES DELETE by
text, a linked phone's merge), and writes the audit trail's erase line.

The vectors are deleted right after the partition, so a recall by the same user id (an app user
who erased and goes on chatting) finds nothing of before. If that delete fails, the erase still
stands: it is logged and counted (`RecallForgetFailed`), and the table's stream deletes each vector
again as its message's removal reaches the indexer.
"""

from aws_lambda_powertools import Logger

from onboarding.audit import Caller, erasure_counts, record_access
from onboarding.metrics import count_metric
from onboarding.model.errors import RecallUnavailableError
from onboarding.model.users import ErasureReport
from onboarding.persistence import Repositories
from onboarding.recall.vectors import VectorIndex

logger = Logger(child=True)


def forget(index: VectorIndex | None, user_id: str, message_ids: tuple[str, ...]) -> int:
    """Delete the vectors of the user's erased messages; how many were deleted (0 on a failure)."""
    if index is None or not message_ids:
        return 0
    try:
        return index.delete(user_id, message_ids)
    except RecallUnavailableError as error:
        logger.warning("Could not delete the erased messages' vectors; the stream will", extra={"reason": error.reason})
        count_metric("RecallForgetFailed")
        return 0


def erase_memory(
    store: Repositories, index: VectorIndex | None, user_id: str, caller: Caller, merged_into: str | None = None
) -> ErasureReport:
    """Erase everything stored for `user_id`, and its vectors; the audit line names `caller`, and the
    erase mark `merged_into` when the memory was erased because it joined that user (a link)."""
    report = store.erasure.erase(user_id, merged_into=merged_into)
    vectors = forget(index, user_id, report.message_ids)
    record_access(caller, user_id, {**erasure_counts(report), "vectors": vectors}, access="erase")
    return report
