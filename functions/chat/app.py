"""Chat function: API Gateway REST proxy event in, the coach's whole reply as JSON out.

Thin by design: it reads the verified user id and the message from the event, runs one turn
through `onboarding.turns.TurnService`, and maps the outcome to an HTTP response.
"""

import asyncio
import base64
import json
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from onboarding.settings import Settings
from onboarding.store import StoreError
from onboarding.turns import InvalidMessageError, MessageTooLargeError, ModelUnavailableError, TurnResult, TurnService
from onboarding.wiring import build_turn_service

logger = Logger()

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    message: str = Field(description="What the user said.")


def _response(status: HTTPStatus, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "statusCode": int(status),
        "headers": {"Content-Type": "application/json", **(headers or {})},
        "body": json.dumps(body, ensure_ascii=False),
    }


def _error(status: HTTPStatus, code: str, message: str, **extra: Any) -> dict[str, Any]:
    headers = {"Retry-After": "2"} if status == HTTPStatus.SERVICE_UNAVAILABLE else None
    return _response(status, {"error": code, "message": message, **extra}, headers)


def _user_id(event: dict[str, Any]) -> str | None:
    """The Cognito user pool authorizer's verified `sub`; never taken from the body or path."""
    claims = ((event.get("requestContext") or {}).get("authorizer") or {}).get("claims") or {}
    sub = claims.get("sub")
    return sub if isinstance(sub, str) and sub else None


def _body_bytes(event: dict[str, Any]) -> bytes:
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        return base64.b64decode(body, validate=True)
    return body.encode("utf-8", errors="surrogatepass")


async def _run_turn(service: TurnService, user_id: str, message: str) -> TurnResult:
    turn = await service.start_turn(user_id, message)
    return await turn.collect()


def make_handler(service: TurnService) -> Handler:
    """The Lambda handler for `service` (tests pass their own service)."""

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        user_id = _user_id(event)
        if user_id is None:
            return _error(HTTPStatus.UNAUTHORIZED, "unauthorized", "no verified user identity on the request")
        try:
            request = ChatRequest.model_validate_json(_body_bytes(event))
        except (ValidationError, ValueError) as error:
            logger.info("Rejected chat request", extra={"reason": type(error).__name__})
            return _error(
                HTTPStatus.BAD_REQUEST,
                "invalid_request",
                'the body must be JSON like {"message": "..."}',
                details=_validation_details(error),
            )
        try:
            result = asyncio.run(_run_turn(service, user_id, request.message))
        except MessageTooLargeError as error:
            return _error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "message_too_large", str(error))
        except InvalidMessageError as error:
            return _error(HTTPStatus.BAD_REQUEST, "invalid_message", str(error))
        except StoreError:
            logger.exception("Could not store the user's message")
            return _error(
                HTTPStatus.SERVICE_UNAVAILABLE, "store_unavailable", "your message could not be saved; please try again"
            )
        except ModelUnavailableError as error:
            return _error(HTTPStatus.BAD_GATEWAY, "model_unavailable", str(error))
        logger.info("Turn completed", extra={"reply_chars": len(result.reply)})
        return _response(
            HTTPStatus.OK,
            {
                "reply": result.reply,
                "userMessageId": result.user_message.message_id,
                "assistantMessageId": result.assistant_message.message_id if result.assistant_message else None,
            },
        )

    return handler


def _validation_details(error: Exception) -> list[dict[str, Any]]:
    if not isinstance(error, ValidationError):
        return [{"msg": "the body is not valid base64"}]
    return [
        {"loc": list(item["loc"]), "msg": item["msg"], "type": item["type"]}
        for item in error.errors(include_input=False)
    ]


lambda_handler = make_handler(build_turn_service(Settings.from_env()))
