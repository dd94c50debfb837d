"""Mobile API: an ASGI app that Lambda Web Adapter serves with response streaming.

Thin by design: it reads the verified user from the request context API Gateway attached, maps
HTTP to `TurnService` (turns) and `AccountService` (history, phones, erase), and maps results and
errors back to HTTP through one table (`api_errors.py`). `POST /chat` streams the coach's reply as
Server-Sent Events to clients that accept `text/event-stream`, and answers one JSON body to
everyone else. See docs/decisions/0006-streaming-with-lambda-web-adapter.md.
"""

import json
from collections.abc import AsyncIterator
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools import Logger
from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPBearer
from fastapi.sse import EventSourceResponse, format_sse_event
from starlette.exceptions import HTTPException

from onboarding.account import AccountService
from onboarding.audit import Caller
from onboarding.composition import build_api
from onboarding.config import Settings
from onboarding.model.errors import StoreError
from onboarding.redaction import RedactingFormatter
from onboarding.snapstart import Primer
from onboarding.turn.service import Turn, TurnService

# The function's own modules: in Lambda (and `infra.invoke`) its folder is the import root; the
# tests import it as the package `functions.api`.
if __package__:
    from functions.api import api_errors, api_schemas
else:  # pragma: no cover  (the deployed layout)
    import api_errors  # type: ignore[import-not-found,no-redef]
    import api_schemas  # type: ignore[import-not-found,no-redef]

E, S = api_errors, api_schemas

logger = Logger(logger_formatter=RedactingFormatter())

# Lambda Web Adapter POSTs to these around a SnapStart snapshot (template.yaml names them in
# AWS_LWA_SNAPSTART_*_PATH). No API Gateway route leads here, and the adapter answers 403 to any
# outside request for them.
BEFORE_CHECKPOINT_PATH = "/_snapstart/before-checkpoint"
AFTER_RESTORE_PATH = "/_snapstart/after-restore"

# Documents the Cognito ID token API Gateway checks; the app itself never reads the token.
cognito_token = HTTPBearer(auto_error=False, description="A Cognito user pool ID token (checked by API Gateway).")


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
        raise E.ApiError(
            E.ApiFailure(HTTPStatus.UNAUTHORIZED, "unauthorized", "no verified user identity on the request")
        )
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


def _failure_response(failure: E.ApiFailure) -> JSONResponse:
    return JSONResponse(failure.body(), status_code=failure.status, headers=failure.headers())


def _log_failure(error: Exception) -> None:
    if isinstance(error, StoreError):
        logger.warning("Store failed", extra={"reason": error.reason})


async def _stream(turn: Turn) -> AsyncIterator[bytes]:
    user_message_id = turn.user_message.message_id
    try:
        async for chunk in turn:
            yield _sse("chunk", {"text": chunk})
    except Exception as error:  # the stream always ends with `done` or `error`, whatever failed
        if isinstance(error, E.HANDLED):
            _log_failure(error)
            failure = E.failure_of(error, message_kept=True)
        else:
            logger.exception("Unexpected error while streaming the reply")
            failure = E.INTERNAL_ERROR
        event = failure.body() | {"userMessageId": user_message_id}
        if failure.retry_after_s is not None:
            event["retryAfter"] = failure.retry_after_s
        yield _sse("error", event)
        return
    if turn.result is None:  # unreachable: a completed stream always has its result
        raise RuntimeError("the turn finished without a result")
    assistant = turn.result.assistant_message
    yield _sse(
        "done",
        {"userMessageId": user_message_id, "assistantMessageId": assistant.message_id if assistant else None},
    )
    # The client has the whole reply; the fold runs now, before the stream (and the invocation) ends.
    await turn.fold_summary()


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(E.ApiError)
    async def api_error(_: Request, error: E.ApiError) -> JSONResponse:
        return _failure_response(error.failure)

    for kind in E.HANDLED:

        @app.exception_handler(kind)
        async def domain_error(_: Request, error: Exception) -> JSONResponse:
            _log_failure(error)
            return _failure_response(E.failure_of(error))

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, error: HTTPException) -> JSONResponse:
        """The framework's own rejections (unparsable body, unknown route, wrong method) in our error shape."""
        status = HTTPStatus(error.status_code)
        code = "invalid_request" if status == HTTPStatus.BAD_REQUEST else status.phrase.lower().replace(" ", "_")
        failure = E.ApiFailure(status, code, str(error.detail))
        return JSONResponse(failure.body(), status_code=status, headers=error.headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> JSONResponse:
        """Anything unforeseen: logged with its trace, answered in the API's error shape."""
        logger.exception("Unexpected error", extra={"path": request.url.path})
        return _failure_response(E.INTERNAL_ERROR)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        logger.info("Rejected request", extra={"path": request.url.path})
        details = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in error.errors()]
        failure = E.ApiFailure(
            HTTPStatus.BAD_REQUEST, "invalid_request", "the request does not match the API", None, details
        )
        return _failure_response(failure)


def _install_snapstart_hooks(app: FastAPI, primer: Primer) -> None:
    @app.post(BEFORE_CHECKPOINT_PATH, include_in_schema=False)
    async def before_checkpoint() -> Response:
        await primer.prime()  # never raises: an unprimed snapshot is only slower on its first call
        return Response(status_code=HTTPStatus.NO_CONTENT)

    @app.post(AFTER_RESTORE_PATH, include_in_schema=False)
    async def after_restore() -> Response:
        primer.renew()  # a failure here fails the restore (the adapter's rule), rather than serve unrenewed
        return Response(status_code=HTTPStatus.NO_CONTENT)


def create_app(service: TurnService, account: AccountService, primer: Primer | None = None) -> FastAPI:
    """The app for `service` and `account` (tests pass their own); with `primer`, the SnapStart hooks."""
    app = FastAPI(
        title="Onboarding coach API",
        version="1.0.0",
        description="Talk to the onboarding coach and read the conversation. The user is always the caller.",
    )
    authenticated = [Depends(cognito_token)]
    User = Annotated[str, Depends(verified_user_id)]  # noqa: N806

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

    _install_error_handlers(app)

    @app.post(
        "/chat",
        dependencies=authenticated,
        response_model=S.ChatReply,
        responses={**S.ERRORS, 200: {"description": S.SSE_DESCRIPTION, "content": {"text/event-stream": {}}}},
        summary="Say something to the coach",
    )
    async def chat(request: S.ChatRequest, user_id: User, accept: Annotated[str | None, Header()] = None) -> Response:
        caller = Caller.verified_user(user_id, "POST:/chat")
        turn = await service.start_turn(user_id, request.message, request.client_message_id, caller=caller)
        if accepts_event_stream(accept):
            return EventSourceResponse(_stream(turn), headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        try:
            result = await turn.collect()
        except E.HANDLED as error:
            _log_failure(error)
            return _failure_response(E.failure_of(error, message_kept=True))
        logger.info("Turn completed", extra={"reply_chars": len(result.reply)})
        reply = S.ChatReply(
            reply=result.reply,
            user_message_id=result.user_message.message_id,
            assistant_message_id=result.assistant_message.message_id if result.assistant_message else None,
        )
        # Before the response ends: behind the adapter, the invocation (and the sandbox) stops with it.
        await turn.fold_summary()
        return JSONResponse(reply.model_dump(by_alias=True))

    @app.get("/history", dependencies=authenticated, responses=S.ERRORS, summary="The conversation, newest first")
    async def history(
        user_id: User,
        limit: Annotated[int | None, Query(ge=1, description="At most HISTORY_PAGE_MAX (default 100).")] = None,
        cursor: Annotated[str | None, Query(max_length=512)] = None,
    ) -> S.HistoryResponse:
        page = await account.history(user_id, limit, cursor, Caller.verified_user(user_id, "GET:/history"))
        return S.HistoryResponse(
            messages=[
                S.HistoryMessage(id=m.message_id, role=m.role, content=m.content, created_at=m.created_at)
                for m in page.messages
            ],
            next_cursor=page.next_cursor,
        )

    @app.post(
        "/phone-links",
        dependencies=authenticated,
        status_code=HTTPStatus.CREATED,
        responses=S.ERRORS,
        summary="Start linking a phone: text the code from it",
    )
    async def create_phone_link(user_id: User) -> S.PhoneLink:
        link = await account.create_link_code(user_id)
        return S.PhoneLink(code=link.code, expires_at=link.expires_at)

    @app.get("/phones", dependencies=authenticated, responses=S.ERRORS, summary="Phones linked to the user")
    async def phones(user_id: User) -> S.PhonesResponse:
        return S.PhonesResponse(phones=list(await account.phones(user_id)))

    @app.delete("/me", dependencies=authenticated, responses=S.ERRORS, summary="Erase everything stored for the user")
    async def erase_me(user_id: User) -> S.ErasureResponse:
        # Erasing again is safe after a failure: it deletes what is left and reports only that.
        report = await account.erase(user_id, Caller.verified_user(user_id, "DELETE:/me"))
        deleted = S.DeletedCounts(
            messages=report.messages,
            state_items=report.state_items,
            phone_numbers=report.phone_numbers,
            dedupe_records=report.dedupe_records,
            link_codes=report.link_codes,
            other_items=report.other_items,
        )
        return S.ErasureResponse(
            deleted=deleted, total=report.total, kept=S.KeptCounts(rate_counters=report.kept_rate_counters)
        )

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        """Lambda Web Adapter's readiness check."""
        return {"status": "ok"}

    if primer is not None:
        _install_snapstart_hooks(app, primer)
    return app


_parts = build_api(Settings.from_env())
app = create_app(_parts.service, _parts.account, _parts.primer)
