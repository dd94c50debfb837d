"""The console's web app: the page (static HTML, CSS and a small script, all local) and its JSON
routes under `/console/api`, described by the OpenAPI document at `/console/openapi.json`.

The chat, the phone link and the erase go to the app's own routes (`POST /chat` streamed as SSE,
`POST /phone-links`, `DELETE /me`); only what the app has no route for is here.
"""

from http import HTTPStatus
from pathlib import Path
from typing import Annotated

from fastapi import FastAPI, HTTPException, Query
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from infra.chat import DEFAULT_USER
from infra.console.context import ConsoleContext
from infra.console.recorder import send_text
from infra.console.schemas import (
    MemoryView,
    PlanView,
    SessionInfo,
    SmsRequest,
    SmsResult,
    TurnList,
    TurnRecord,
    UserList,
)
from onboarding.persistence.schema import USER_PREFIX

STATIC = Path(__file__).parent / "static"
UserId = Annotated[str, PathParam(min_length=1, max_length=128)]
TURN_WAIT_S = 30.0


def _users(context: ConsoleContext) -> list[str]:
    """Every user with a partition in the local table (a scan: the local table is small)."""
    users: set[str] = set()
    for page in context.client.get_paginator("scan").paginate(
        TableName=context.settings.table_name, ProjectionExpression="pk"
    ):
        users.update(
            item["pk"]["S"].removeprefix(USER_PREFIX)
            for item in page["Items"]
            if item["pk"]["S"].startswith(USER_PREFIX)
        )
    return sorted(users)


def create_console_app(context: ConsoleContext) -> FastAPI:
    app = FastAPI(
        title="Memory console API (local stack)",
        version="1.0.0",
        description=(
            "What feeds the memory console: a user's memory now, what the model got (or would get) for a "
            "message, and the turns the console recorded, with their figures. Served by `python -m infra.console` "
            "only, never deployed. Texts the user said are shown on the local stack; against AWS (`--aws`) they "
            "are redacted to their lengths unless the console was started with `--personal-data`, and nothing is "
            "written.\n\nThe page chats over the app's own routes: `POST /chat` (SSE), `POST /phone-links`, "
            "`DELETE /me`, `GET /history` (see the API's `/openapi.json`). Every `POST /chat` through the local "
            "stack is recorded; a client that sends `X-Console-Turn: <id>` with it names the turn, and reads its "
            "record at `/console/api/turns/{id}` once the response has ended."
        ),
        openapi_url="/console/openapi.json",
        docs_url=None,  # Swagger UI would load from a CDN; the page must work offline
        redoc_url=None,
    )

    @app.get("/console", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/console/")

    @app.get("/console/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/console/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/console/api/session", summary="How this console runs")
    async def session() -> SessionInfo:
        limits = context.settings.prompt
        return SessionInfo(
            mode="aws" if context.read_only else "local",
            read_only=context.read_only,
            personal_data=context.personal_data,
            table_name=context.settings.table_name,
            token_budget=limits.token_budget,
            system_allowance=limits.system_allowance,
            window_max_messages=limits.window_messages,
            default_user=DEFAULT_USER,
        )

    @app.get("/console/api/users", summary="Users in the local table")
    async def users() -> UserList:
        return UserList(users=[] if context.read_only else _users(context))

    @app.get("/console/api/users/{user_id}/memory", summary="What is remembered about the user now")
    async def memory(user_id: UserId) -> MemoryView:
        return await context.memory(user_id)

    @app.get(
        "/console/api/users/{user_id}/prompt",
        summary="What the model would get for a message now (as `infra.inspect_prompt` shows it)",
        responses={422: {"description": "The message alone is over the prompt's budget."}},
    )
    async def prompt(
        user_id: UserId,
        message: Annotated[
            str, Query(max_length=32768, description="The message to plan for.")
        ] = "(your next message)",
    ) -> PlanView:
        plan = await context.plan(user_id, message)
        if plan is None:
            raise HTTPException(HTTPStatus.UNPROCESSABLE_ENTITY, "the message alone is over the prompt's budget")
        return plan

    @app.get("/console/api/users/{user_id}/turns", summary="The turns this console recorded for the user")
    async def turns(user_id: UserId) -> TurnList:
        return TurnList(turns=context.book.of_user(user_id))

    @app.get(
        "/console/api/turns/{turn_id}",
        summary="One recorded turn, once it finished",
        responses={404: {"description": "No such turn was recorded."}},
    )
    async def turn(turn_id: Annotated[str, PathParam(max_length=128)]) -> TurnRecord:
        record = await context.book.finished(turn_id, TURN_WAIT_S)
        if record is None:
            raise HTTPException(HTTPStatus.NOT_FOUND, "no such turn")
        return record

    @app.post(
        "/console/api/sms",
        summary="Text the coach as a phone, through the SMS webhook and the queue worker",
        responses={409: {"description": "Read only: the console runs against AWS."}},
    )
    async def sms(request: SmsRequest) -> SmsResult:
        if context.read_only:
            raise HTTPException(HTTPStatus.CONFLICT, "the console is read only against AWS")
        return await send_text(context, request)

    return app
