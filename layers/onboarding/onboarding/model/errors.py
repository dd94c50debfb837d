"""Owns every domain exception: what handlers map to responses (see functions/api/mobile_api/errors.py)."""


class StoreError(Exception):
    """The table could not be read or written (after botocore's own retries): a service error or
    no answer at all (connection refused, timeouts, a closed connection)."""

    @property
    def reason(self) -> str:
        """What failed, as a token for a log line (no personal data): the cause's kind and, when the
        service answered, its error code (e.g. `ClientError:AccessDeniedException`)."""
        cause = self.__cause__ or self
        response = getattr(cause, "response", None)
        code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
        return f"{type(cause).__name__}:{code}" if code else type(cause).__name__


class MemoryChangedError(Exception):
    """The state or profile changed since the turn read them (another turn saved first): re-read
    them and apply the turn's changes again."""


class UserErasedError(Exception):
    """The user's data was erased after this turn began: nothing of the turn is stored."""


class InvalidCursorError(ValueError):
    """A history cursor that this store did not hand out."""


class InvalidPageSizeError(ValueError):
    """A history page size outside 1 and the configured maximum."""


class InvalidPhoneError(ValueError):
    """Not a phone number in E.164 form (`+` and 7 to 15 digits)."""


class ClientIdConflictError(ValueError):
    """A client message id that was already used for a different message."""


class RateLimitedError(Exception):
    """The user sent more messages (or asked for more of `what`) than the rate limit allows;
    this one was not stored."""

    def __init__(self, retry_after_s: int, what: str = "messages") -> None:
        super().__init__(f"too many {what}; try again in {retry_after_s} s")
        self.retry_after_s = retry_after_s
        self.what = what


class TurnInProgressError(Exception):
    """Another delivery of the same client message id is being answered right now: this copy
    stores nothing and calls no model; it may try again after `retry_after_s` (then the stored
    reply is replayed, or, if that delivery was abandoned, this one answers it: decision 0009)."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"this message is being answered already; try again in {retry_after_s} s for its reply")
        self.retry_after_s = retry_after_s


class InvalidMessageError(ValueError):
    """The user's message cannot be accepted as it is; nothing was stored."""


class MessageTooLargeError(InvalidMessageError):
    """The user's message is over the configured size limit; nothing was stored."""


class MessageOverBudgetError(MessageTooLargeError):
    """The message does not fit the prompt's token budget (alone, or next to the instructions)."""

    def __init__(self, tokens: int, limit: int) -> None:
        super().__init__(
            f"the message is too long for the coach: about {tokens} tokens, and at most {limit} fit in "
            "one message; please send it in shorter parts"
        )
        self.tokens = tokens
        self.limit = limit


class DuplicateMessageIdError(InvalidMessageError):
    """A client message id that was already used for a different message; nothing was stored."""


class ModelUnavailableError(RuntimeError):
    """The model failed before finishing its reply. The user's message is stored; no reply is."""


class CoachUnavailableError(ModelUnavailableError):
    """The model has been failing, so this turn did not call it. The user's message is stored."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(
            "The coach is taking a short break. Your message is saved; we'll get back to you, "
            "please try again in a minute."
        )
        self.retry_after_s = retry_after_s


class RecallUnavailableError(Exception):
    """The recall index could not be read or written (after botocore's own tries). A turn goes on
    without the recalled messages; the indexer reports the record as failed, to be retried."""

    @property
    def reason(self) -> str:
        """What failed, as a log token (as `StoreError.reason`)."""
        return StoreError.reason.fget(self)  # type: ignore[attr-defined, no-any-return]


class ScheduleError(StoreError):
    """EventBridge Scheduler (the check-in schedules) refused or could not be reached: answered
    as the store's failures are (503, try again)."""
