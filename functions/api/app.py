"""Mobile API: an ASGI app that Lambda Web Adapter serves with response streaming.

Thin by design: it reads the verified user from the request context API Gateway attached,
maps HTTP to `onboarding` calls, and maps results and errors back to HTTP. `POST /chat`
streams the coach's reply as Server-Sent Events to clients that accept `text/event-stream`,
and answers one JSON body to everyone else. See docs/decisions/0006-streaming-with-lambda-web-adapter.md.
"""

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import datetime
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools import Logger
from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPBearer
from fastapi.sse import EventSourceResponse, format_sse_event
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException

from onboarding.redaction import RedactingFormatter
from onboarding.settings import Settings
from onboarding.store import ConversationStore, InvalidCursorError, StoreError
from onboarding.store_factory import build_store
from onboarding.turns import (
    CoachUnavailableError,
    DuplicateMessageIdError,
    InvalidMessageError,
    MessageTooLargeError,
    ModelUnavailableError,
    RateLimitedError,
    Turn,
    TurnService,
)
from onboarding.wiring import build_turn_service

logger = Logger(logger_formatter=RedactingFormatter())

# Documents the Cognito ID token API Gateway checks; the app itself never reads the token.
cognito_token = HTTPBearer(auto_error=False, description="A Cognito user pool ID token (checked by API Gateway).")


class ApiError(Exception):
    def __init__(
        self,
        status: HTTPStatus,
        code: str,
        message: str,
        details: list[dict[str, Any]] | None = None,
        retry_after_s: int | None = None,
    ):
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details
        self.retry_after_s = retry_after_s


class ErrorBody(BaseModel):
    error: str = Field(description="A stable, machine-readable code.")
    message: str = Field(description="What went wrong, for people.")
    details: list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    message: str = Field(description="What the user said.")
    client_message_id: str | None = Field(
        default=None,
        alias="clientMessageId",
        pattern=r"^[A-Za-z0-9_.:-]{1,128}$",
        description=(
            "The app's own id for this message. Sending the same id again (a retry) stores nothing new: "
            "the stored reply is returned, or the stored message is answered if the first try did not finish."
        ),
    )


class CamelModel(BaseModel):
    """The API's JSON is camelCase; the code stays snake_case."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class ChatReply(CamelModel):
    reply: str
    user_message_id: str
    assistant_message_id: str | None = Field(description="None when the model's reply was empty (nothing stored).")


class HistoryMessage(CamelModel):
    id: str
    role: str
    content: str
    created_at: datetime


class HistoryResponse(CamelModel):
    messages: list[HistoryMessage] = Field(description="Newest first.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; absent on the last page.")


class PhoneLink(CamelModel):
    code: str = Field(description="Text `LINK <code>` from the phone to link it; works once.")
    expires_at: datetime


class PhonesResponse(BaseModel):
    phones: list[str] = Field(description="E.164 numbers whose texts continue this user's conversation.")


class DeletedCounts(CamelModel):
    messages: int
    state_items: int = Field(description="Onboarding state, profile and conversation summary.")
    phone_numbers: int = Field(description="Phone numbers unlinked (a number re-linked to someone else stays).")
    dedupe_records: int = Field(description="Records of which message a client or SMS message id produced.")
    rate_counters: int
    link_codes: int = Field(description="Phone-link codes not used yet.")
    other_items: int


class ErasureResponse(CamelModel):
    deleted: DeletedCounts
    total: int


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody} for status in (400, 401, 409, 413, 429, 502, 503)
}
SSE_DESCRIPTION = (
    'With `Accept: text/event-stream`: one `chunk` event per piece of the reply (`{"text": ...}`), then '
    '`done` (`{"userMessageId", "assistantMessageId"}`), or `error` (`{"error", "message", '
    '"userMessageId"}`) if the model fails mid-reply; the error `coach_unavailable` (with `retryAfter`, in '
    "seconds) means the model has been failing and was not called: the message is saved."
)


REPLY_NOT_SAVED = "the coach's reply could not be saved; your message was kept, please try again"


def verified_user_id(
    x_amzn_request_context: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> str:
    """The Cognito `sub` from the request context Lambda Web Adapter attaches; never from the body or path."""
    try:
        context = json.loads(x_amzn_request_context or "null")
        sub = context["authorizer"]["claims"]["sub"]
    except (ValueError, TypeError, KeyError):
        sub = None
    if not isinstance(sub, str) or not sub:
        raise ApiError(HTTPStatus.UNAUTHORIZED, "unauthorized", "no verified user identity on the request")
    return sub


def accepts_event_stream(accept: str | None) -> bool:
    """True when the Accept header names text/event-stream with a non-zero quality."""
    for media_range in (accept or "").split(","):
        media_type, *params = (part.strip() for part in media_range.split(";"))
        if media_type.lower() == "text/event-stream":
            q = next((p.split("=", 1)[1] for p in params if p.replace(" ", "").lower().startswith("q=")), "1")
            try:
                return float(q) > 0
            except ValueError:
                return False
    return False


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return format_sse_event(event=event, data_str=json.dumps(data, ensure_ascii=False))


async def _stream(turn: Turn) -> AsyncIterator[bytes]:
    user_message_id = turn.user_message.message_id
    try:
        async for chunk in turn:
            yield _sse("chunk", {"text": chunk})
    except CoachUnavailableError as error:
        yield _sse(
            "error",
            {
                "error": "coach_unavailable",
                "message": str(error),
                "userMessageId": user_message_id,
                "retryAfter": error.retry_after_s,
            },
        )
        return
    except ModelUnavailableError as error:
        yield _sse("error", {"error": "model_unavailable", "message": str(error), "userMessageId": user_message_id})
        return
    except MessageTooLargeError as error:
        yield _sse("error", {"error": "message_too_large", "message": str(error), "userMessageId": user_message_id})
        return
    except StoreError:
        logger.exception("Could not store the coach's reply")
        yield _sse(
            "error", {"error": "store_unavailable", "message": REPLY_NOT_SAVED, "userMessageId": user_message_id}
        )
        return
    if turn.result is None:  # unreachable: a completed stream always has its result
        raise RuntimeError("the turn finished without a result")
    assistant = turn.result.assistant_message
    yield _sse(
        "done",
        {"userMessageId": user_message_id, "assistantMessageId": assistant.message_id if assistant else None},
    )
    # The client has the whole reply; only now fold what left the window into the summary.
    await turn.fold_summary()


def create_app(service: TurnService, store: ConversationStore) -> FastAPI:
    """The app for `service` and `store` (tests pass their own)."""
    app = FastAPI(
        title="Onboarding coach API",
        version="1.0.0",
        description="Talk to the onboarding coach and read the conversation. The user is always the caller.",
    )
    authenticated = [Depends(cognito_token)]

    @app.middleware("http")
    async def correlate(request: Request, call_next: Any) -> Response:
        try:
            request_id = json.loads(request.headers.get("x-amzn-request-context") or "{}").get("requestId")
        except (ValueError, AttributeError):
            request_id = None
        logger.set_correlation_id(request_id)
        try:
            response: Response = await call_next(request)
            return response
        finally:
            logger.set_correlation_id(None)

    @app.exception_handler(ApiError)
    async def api_error(_: Request, error: ApiError) -> JSONResponse:
        body = ErrorBody(error=error.code, message=error.message, details=error.details)
        retry_after = error.retry_after_s
        if retry_after is None and error.status == HTTPStatus.SERVICE_UNAVAILABLE:
            retry_after = 2
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
        return JSONResponse(body.model_dump(exclude_none=True), status_code=error.status, headers=headers)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, error: HTTPException) -> JSONResponse:
        """The framework's own rejections (unparsable body, unknown route, wrong method) in our error shape."""
        status = HTTPStatus(error.status_code)
        code = "invalid_request" if status == HTTPStatus.BAD_REQUEST else status.phrase.lower().replace(" ", "_")
        body = ErrorBody(error=code, message=str(error.detail))
        return JSONResponse(body.model_dump(exclude_none=True), status_code=status, headers=error.headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> JSONResponse:
        """Anything unforeseen: logged with its trace, answered in the API's error shape."""
        logger.exception("Unexpected error", extra={"path": request.url.path})
        body = ErrorBody(error="internal_error", message="something went wrong on our side; please try again")
        return JSONResponse(body.model_dump(exclude_none=True), status_code=HTTPStatus.INTERNAL_SERVER_ERROR)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        logger.info("Rejected request", extra={"path": request.url.path})
        details = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in error.errors()]
        body = ErrorBody(error="invalid_request", message="the request does not match the API", details=details)
        return JSONResponse(body.model_dump(), status_code=HTTPStatus.BAD_REQUEST)

    @app.post(
        "/chat",
        dependencies=authenticated,
        response_model=ChatReply,
        responses={**ERRORS, 200: {"description": SSE_DESCRIPTION, "content": {"text/event-stream": {}}}},
        summary="Say something to the coach",
    )
    async def chat(
        request: ChatRequest,
        user_id: Annotated[str, Depends(verified_user_id)],
        accept: Annotated[str | None, Header()] = None,
    ) -> Response:
        try:
            turn = await service.start_turn(user_id, request.message, request.client_message_id)
        except DuplicateMessageIdError as error:
            raise ApiError(HTTPStatus.CONFLICT, "duplicate_message_id", str(error)) from error
        except RateLimitedError as error:
            raise ApiError(
                HTTPStatus.TOO_MANY_REQUESTS,
                "rate_limited",
                f"you are sending messages faster than the coach can answer; try again in {error.retry_after_s} s",
                retry_after_s=error.retry_after_s,
            ) from error
        except MessageTooLargeError as error:
            raise ApiError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "message_too_large", str(error)) from error
        except InvalidMessageError as error:
            raise ApiError(HTTPStatus.BAD_REQUEST, "invalid_message", str(error)) from error
        except StoreError as error:
            logger.exception("Could not store the user's message")
            raise ApiError(
                HTTPStatus.SERVICE_UNAVAILABLE, "store_unavailable", "your message could not be saved; please try again"
            ) from error
        if accepts_event_stream(accept):
            return EventSourceResponse(_stream(turn), headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        try:
            result = await turn.collect()
        except CoachUnavailableError as error:
            raise ApiError(
                HTTPStatus.SERVICE_UNAVAILABLE, "coach_unavailable", str(error), retry_after_s=error.retry_after_s
            ) from error
        except ModelUnavailableError as error:
            raise ApiError(HTTPStatus.BAD_GATEWAY, "model_unavailable", str(error)) from error
        except MessageTooLargeError as error:
            raise ApiError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "message_too_large", str(error)) from error
        except StoreError as error:
            logger.exception("Could not store the coach's reply")
            raise ApiError(HTTPStatus.SERVICE_UNAVAILABLE, "store_unavailable", REPLY_NOT_SAVED) from error
        logger.info("Turn completed", extra={"reply_chars": len(result.reply)})
        reply = ChatReply(
            reply=result.reply,
            user_message_id=result.user_message.message_id,
            assistant_message_id=result.assistant_message.message_id if result.assistant_message else None,
        )
        # The summary fold runs after the response is sent (a background task), not before it.
        return JSONResponse(reply.model_dump(by_alias=True), background=BackgroundTask(turn.fold_summary))

    @app.get("/history", dependencies=authenticated, responses=ERRORS, summary="The conversation, newest first")
    async def history(
        user_id: Annotated[str, Depends(verified_user_id)],
        limit: Annotated[int, Query(ge=1, le=100)] = 20,
        cursor: Annotated[str | None, Query(max_length=512)] = None,
    ) -> HistoryResponse:
        try:
            page = await asyncio.to_thread(store.history_page, user_id, limit, cursor)
        except InvalidCursorError as error:
            raise ApiError(HTTPStatus.BAD_REQUEST, "invalid_cursor", str(error)) from error
        except StoreError as error:
            raise ApiError(HTTPStatus.SERVICE_UNAVAILABLE, "store_unavailable", "please try again") from error
        return HistoryResponse(
            messages=[
                HistoryMessage(id=m.message_id, role=m.role, content=m.content, created_at=m.created_at)
                for m in page.messages
                # Tool calls and results are the coach's bookkeeping, not part of what was said.
                if m.role != "tool" and m.content.strip()
            ],
            next_cursor=page.next_cursor,
        )

    @app.post(
        "/phone-links",
        dependencies=authenticated,
        status_code=HTTPStatus.CREATED,
        responses=ERRORS,
        summary="Start linking a phone: text the code from it",
    )
    async def create_phone_link(user_id: Annotated[str, Depends(verified_user_id)]) -> PhoneLink:
        try:
            link = await asyncio.to_thread(store.create_link_code, user_id)
        except StoreError as error:
            raise ApiError(HTTPStatus.SERVICE_UNAVAILABLE, "store_unavailable", "please try again") from error
        return PhoneLink(code=link.code, expires_at=link.expires_at)

    @app.get("/phones", dependencies=authenticated, responses=ERRORS, summary="Phones linked to the user")
    async def phones(user_id: Annotated[str, Depends(verified_user_id)]) -> PhonesResponse:
        try:
            numbers = await asyncio.to_thread(store.phones_of, user_id)
        except StoreError as error:
            raise ApiError(HTTPStatus.SERVICE_UNAVAILABLE, "store_unavailable", "please try again") from error
        return PhonesResponse(phones=sorted(numbers))

    @app.delete(
        "/me",
        dependencies=authenticated,
        responses=ERRORS,
        summary="Erase everything stored for the user",
    )
    async def erase_me(user_id: Annotated[str, Depends(verified_user_id)]) -> ErasureResponse:
        try:
            report = await asyncio.to_thread(store.erase_user, user_id)
        except StoreError as error:
            # Erasing again is safe: it deletes what is left and reports only that.
            raise ApiError(HTTPStatus.SERVICE_UNAVAILABLE, "store_unavailable", "please try again") from error
        return ErasureResponse(
            deleted=DeletedCounts(
                messages=report.messages,
                state_items=report.state_items,
                phone_numbers=report.phone_numbers,
                dedupe_records=report.dedupe_records,
                rate_counters=report.rate_counters,
                link_codes=report.link_codes,
                other_items=report.other_items,
            ),
            total=report.total,
        )

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        """Lambda Web Adapter's readiness check."""
        return {"status": "ok"}

    return app


def _app_from_env() -> FastAPI:
    settings = Settings.from_env()
    store = build_store(settings)
    return create_app(build_turn_service(settings, store), store)


app = _app_from_env()
