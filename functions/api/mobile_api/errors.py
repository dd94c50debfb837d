"""Owns how the API answers a failure: one table from domain exception to (status, code, message),
used by the JSON responses and the SSE `error` events alike, and the app's handlers that answer
with it (domain errors, the framework's own rejections, anything unforeseen)."""

from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from onboarding.model.errors import (
    CoachUnavailableError,
    DuplicateMessageIdError,
    InvalidCursorError,
    InvalidMessageError,
    InvalidPageSizeError,
    MessageTooLargeError,
    ModelUnavailableError,
    RateLimitedError,
    StoreError,
    TurnInProgressError,
    UserErasedError,
)

from .log import logger

STORE_RETRY_AFTER_S = 2  # a store failure is usually over in seconds (botocore already retried)


@dataclass(frozen=True)
class ApiFailure:
    """A failure as the API reports it: `{"error": code, "message": message}` with `status`."""

    status: HTTPStatus
    code: str
    message: str
    retry_after_s: int | None = None
    details: list[dict[str, Any]] | None = None

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.details is not None:
            body["details"] = self.details
        return body

    def headers(self) -> dict[str, str] | None:
        return {"Retry-After": str(self.retry_after_s)} if self.retry_after_s is not None else None


INTERNAL_ERROR = ApiFailure(
    HTTPStatus.INTERNAL_SERVER_ERROR, "internal_error", "something went wrong on our side; please try again"
)


class ApiError(Exception):
    """A failure raised by the API itself (no verified user, a framework rejection)."""

    def __init__(self, failure: ApiFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def _retry_after(error: Exception) -> int | None:
    return getattr(error, "retry_after_s", None)


# Most specific first: the first matching row answers.
_TABLE: tuple[tuple[type[Exception], HTTPStatus, str], ...] = (
    (DuplicateMessageIdError, HTTPStatus.CONFLICT, "duplicate_message_id"),
    (TurnInProgressError, HTTPStatus.CONFLICT, "in_progress"),
    (UserErasedError, HTTPStatus.CONFLICT, "user_erased"),
    (RateLimitedError, HTTPStatus.TOO_MANY_REQUESTS, "rate_limited"),
    (MessageTooLargeError, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "message_too_large"),
    (InvalidCursorError, HTTPStatus.BAD_REQUEST, "invalid_cursor"),
    (InvalidPageSizeError, HTTPStatus.BAD_REQUEST, "invalid_request"),
    (InvalidMessageError, HTTPStatus.BAD_REQUEST, "invalid_message"),
    (CoachUnavailableError, HTTPStatus.SERVICE_UNAVAILABLE, "coach_unavailable"),
    (ModelUnavailableError, HTTPStatus.BAD_GATEWAY, "model_unavailable"),
    (StoreError, HTTPStatus.SERVICE_UNAVAILABLE, "store_unavailable"),
)
HANDLED: tuple[type[Exception], ...] = tuple(kind for kind, _, _ in _TABLE)


def failure_of(error: Exception, message_kept: bool = False) -> ApiFailure:
    """How the API reports `error` (one of HANDLED). `message_kept`: the user's message is stored
    already, which a store failure's message then says."""
    row = next((row for row in _TABLE if isinstance(error, row[0])), None)
    if row is None:
        raise TypeError(f"no API answer for {type(error).__name__}") from error
    _, status, code = row
    message = str(error)
    retry_after = _retry_after(error)
    if isinstance(error, RateLimitedError) and error.what == "messages":
        message = f"you are sending messages faster than the coach can answer; try again in {retry_after} s"
    elif isinstance(error, StoreError):
        # The store's own text names internals; the person needs to know what happened to their message.
        message = (
            "the coach's reply could not be saved; your message was kept, please try again"
            if message_kept
            else "the conversation could not be saved or read; please try again"
        )
        retry_after = STORE_RETRY_AFTER_S
    return ApiFailure(status, code, message, retry_after)


def failure_response(failure: ApiFailure) -> JSONResponse:
    return JSONResponse(failure.body(), status_code=failure.status, headers=failure.headers())


def log_failure(error: Exception) -> None:
    if isinstance(error, StoreError):
        logger.warning("Store failed", extra={"reason": error.reason})


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, error: ApiError) -> JSONResponse:
        return failure_response(error.failure)

    for kind in HANDLED:

        @app.exception_handler(kind)
        async def domain_error(_: Request, error: Exception) -> JSONResponse:
            log_failure(error)
            return failure_response(failure_of(error))

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, error: HTTPException) -> JSONResponse:
        """The framework's own rejections (unparsable body, unknown route, wrong method) in our error shape."""
        status = HTTPStatus(error.status_code)
        code = "invalid_request" if status == HTTPStatus.BAD_REQUEST else status.phrase.lower().replace(" ", "_")
        failure = ApiFailure(status, code, str(error.detail))
        return JSONResponse(failure.body(), status_code=status, headers=error.headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> JSONResponse:
        """Anything unforeseen: logged with its trace, answered in the API's error shape."""
        logger.exception("Unexpected error", extra={"path": request.url.path})
        return failure_response(INTERNAL_ERROR)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        logger.info("Rejected request", extra={"path": request.url.path})
        details = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in error.errors()]
        failure = ApiFailure(
            HTTPStatus.BAD_REQUEST, "invalid_request", "the request does not match the API", None, details
        )
        return failure_response(failure)
