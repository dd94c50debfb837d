"""Owns the mobile API's routes: `create_app`, the ASGI app Lambda Web Adapter serves with response
streaming (built from the settings in app.py; tests pass their own services).

Thin by design: it reads the verified user from the request context API Gateway attached, maps
HTTP to `TurnService` (turns) and `AccountService` (history, phones, erase), and maps results and
errors back to HTTP through one table (`errors.py`). `POST /chat` streams the coach's reply as
Server-Sent Events (`sse.py`) to clients that accept `text/event-stream`, and answers one JSON body
to everyone else. See docs/decisions/0006-streaming-with-lambda-web-adapter.md.
"""

import json
from http import HTTPStatus
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPBearer
from fastapi.sse import EventSourceResponse

from onboarding.account import AccountService
from onboarding.audit import Caller
from onboarding.checkins.cadence import DAY_NAMES
from onboarding.snapstart import Primer
from onboarding.turn.service import TurnService

from .errors import HANDLED, ApiError, ApiFailure, failure_of, failure_response, install_error_handlers, log_failure
from .log import logger
from .schemas import (
    ERRORS,
    SSE_DESCRIPTION,
    ChatReply,
    ChatRequest,
    CheckInsResponse,
    DeletedCounts,
    ErasureResponse,
    HistoryMessage,
    HistoryResponse,
    KeptCounts,
    PhoneLink,
    PhonesResponse,
)
from .snapstart_hooks import install_snapstart_hooks
from .sse import accepts_event_stream, stream_events

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
        raise ApiError(ApiFailure(HTTPStatus.UNAUTHORIZED, "unauthorized", "no verified user identity on the request"))
    return sub


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
        # This request's context only (a task of its own, and the tasks it starts: a streamed
        # reply's), not the logger's shared keys: a streamed reply's lines, written after the
        # response began, keep it, and no other request reads or clears it.
        logger.thread_safe_append_keys(correlation_id=request_id)
        response: Response = await call_next(request)
        return response

    install_error_handlers(app)

    @app.post(
        "/chat",
        dependencies=authenticated,
        response_model=ChatReply,
        responses={
            **ERRORS,
            200: {"description": SSE_DESCRIPTION, "content": {"text/event-stream": {}}},
        },
        summary="Say something to the coach",
    )
    async def chat(request: ChatRequest, user_id: User, accept: Annotated[str | None, Header()] = None) -> Response:
        caller = Caller.verified_user(user_id, "POST:/chat")
        turn = await service.start_turn(user_id, request.message, request.client_message_id, caller=caller)
        if accepts_event_stream(accept):
            return EventSourceResponse(
                stream_events(turn), headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
            )
        try:
            result = await turn.collect()
        except HANDLED as error:
            log_failure(error)
            return failure_response(failure_of(error, message_kept=True))
        logger.info("Turn completed", extra={"reply_chars": len(result.reply)})
        reply = ChatReply(
            reply=result.reply,
            user_message_id=result.user_message.message_id,
            assistant_message_id=result.assistant_message.message_id if result.assistant_message else None,
        )
        # Before the response ends: behind the adapter, the invocation (and the sandbox) stops with it.
        await turn.fold_summary()
        return JSONResponse(reply.model_dump(by_alias=True))

    @app.get("/history", dependencies=authenticated, responses=ERRORS, summary="The conversation, newest first")
    def history(
        user_id: User,
        limit: Annotated[int | None, Query(ge=1, description="At most HISTORY_PAGE_MAX (default 100).")] = None,
        cursor: Annotated[str | None, Query(max_length=512)] = None,
    ) -> HistoryResponse:
        page = account.history(user_id, limit, cursor, Caller.verified_user(user_id, "GET:/history"))
        return HistoryResponse(
            messages=[
                HistoryMessage(id=m.message_id, role=m.role, content=m.content, created_at=m.created_at)
                for m in page.messages
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
    def create_phone_link(user_id: User) -> PhoneLink:
        link = account.create_link_code(user_id)
        return PhoneLink(code=link.code, expires_at=link.expires_at)

    @app.get("/phones", dependencies=authenticated, responses=ERRORS, summary="Phones linked to the user")
    def phones(user_id: User) -> PhonesResponse:
        return PhonesResponse(phones=list(account.phones(user_id)))

    @app.get("/check-ins", dependencies=authenticated, responses=ERRORS, summary="The user's check-in schedule")
    def check_ins(user_id: User) -> CheckInsResponse:
        found = account.check_in_schedule(user_id)
        if found is None:
            return CheckInsResponse(scheduled=False)
        scheduled, next_at = found
        cadence = scheduled.cadence
        return CheckInsResponse(
            scheduled=True,
            days=[DAY_NAMES[day] for day in cadence.days],
            at=f"{cadence.at:%H:%M}",
            time_zone=cadence.timezone,
            channel=cadence.channel,
            paused=scheduled.paused,
            next_at=next_at.isoformat() if next_at is not None else None,
        )

    @app.delete("/me", dependencies=authenticated, responses=ERRORS, summary="Erase everything stored for the user")
    def erase_me(user_id: User) -> ErasureResponse:
        # Erasing again is safe after a failure: it deletes what is left and reports only that.
        report = account.erase(user_id, Caller.verified_user(user_id, "DELETE:/me"))
        deleted = DeletedCounts(
            messages=report.messages,
            state_items=report.state_items,
            phone_numbers=report.phone_numbers,
            dedupe_records=report.dedupe_records,
            link_codes=report.link_codes,
            other_items=report.other_items,
            check_in_schedules=report.check_in_schedules,
        )
        return ErasureResponse(
            deleted=deleted, total=report.total, kept=KeptCounts(rate_counters=report.kept_rate_counters)
        )

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        """Lambda Web Adapter's readiness check."""
        return {"status": "ok"}

    if primer is not None:
        install_snapstart_hooks(app, primer)
    return app
