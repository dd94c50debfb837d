"""Runs template.yaml's functions in this process, as Lambda would: the handler module imported once
per function (warm afterwards), a context object, and for Lambda Web Adapter functions what the
adapter does in Lambda: an API Gateway REST proxy event becomes an HTTP request to the function's
ASGI app, with the request context in `x-amzn-request-context`, and the app's response becomes the
proxy response (`invoke_asgi`, for `infra.invoke`; the local gateway hands requests over as they are)."""

import asyncio
import base64
import contextvars
import importlib.util
import json
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlencode

import httpx

from infra.local.iam.identity import acting_as
from infra.local.template import function_handler, function_timeout_s, web_adapter_app

REQUEST_CONTEXT_HEADER = "x-amzn-request-context"


def _is_text(content_type: str) -> bool:
    return content_type.startswith(("text/", "application/json", "application/xml")) or "+json" in content_type


async def invoke_asgi(app: Any, event: dict[str, Any]) -> dict[str, Any]:
    """The proxy response `app` gives for `event`, as the adapter would produce it (buffered)."""
    body = event.get("body") or ""
    content = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode("utf-8", "surrogatepass")
    headers = {k: v for k, v in (event.get("headers") or {}).items() if k.lower() != REQUEST_CONTEXT_HEADER}
    # The adapter replaces any client-sent copy of this header with the real request context.
    headers[REQUEST_CONTEXT_HEADER] = json.dumps(event.get("requestContext") or {})
    query = urlencode(event.get("multiValueQueryStringParameters") or event.get("queryStringParameters") or {}, True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as client:
        response = await client.request(
            event.get("httpMethod", "GET"),
            event.get("path", "/") + (f"?{query}" if query else ""),
            content=content,
            headers=headers,
        )
    content_type = response.headers.get("content-type", "")
    text = _is_text(content_type)
    return {
        "statusCode": response.status_code,
        "headers": dict(response.headers),
        "body": response.text if text else base64.b64encode(response.content).decode(),
        "isBase64Encoded": not text,
    }


@dataclass
class LocalLambdaContext:
    """The attributes of Lambda's context object that handlers and Powertools read. The remaining
    time counts down from the function's timeout (`timeout_s`, the template's for a function the
    stack runs), as Lambda's does from the invocation's start: Powertools Idempotency holds an
    in-progress record for that long, so a local run shows what AWS would."""

    function_name: str
    memory_limit_in_mb: int = 1024
    function_version: str = "$LATEST"
    aws_request_id: str = ""
    timeout_s: float = 60.0
    started: float = field(default_factory=time.monotonic)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.started + self.timeout_s - time.monotonic()) * 1000))


_warm_modules: dict[tuple[str, frozenset[tuple[str, str]]], ModuleType] = {}
_loading = threading.Lock()  # the local gateway invokes from several threads


def _load_module(logical_id: str, code_dir: Path, module_name: str) -> ModuleType:
    """Import the function's module as Lambda would, once per function and environment (a warm
    start afterwards; a changed environment, like a changed configuration in Lambda, starts cold).
    Every function's file may be called app.py, so each gets its own module name."""
    with _loading:
        return _load_module_once((logical_id, frozenset(os.environ.items())), code_dir, module_name)


def _load_module_once(key: tuple[str, frozenset[tuple[str, str]]], code_dir: Path, module_name: str) -> ModuleType:
    logical_id = key[0]
    if key not in _warm_modules:
        # A cold start is a new execution environment: no parameter providers (and their clients,
        # bound to the endpoints of the environment they were made in) carried over.
        # Imported here, not at the top: the cold-start benchmark imports this module before its
        # clock starts, and importing Powertools' parameters (and boto3 with it) would hide their cost.
        from aws_lambda_powertools.utilities.parameters import clear_caches

        clear_caches()  # type: ignore[no-untyped-call]
        sys.path.insert(0, str(code_dir))
        try:
            module = _exec_fresh(f"_lambda_{logical_id}", code_dir, module_name)
        finally:
            sys.path.remove(str(code_dir))
        _warm_modules[key] = module
        _keys_per_invocation()  # the module's loggers may have set up the service's formatter
    return _warm_modules[key]


def end_environments(variable: str, value: str) -> None:
    """End the execution environments made where `variable` was `value` (a stopped stack's
    endpoint): their modules are dropped, and with them the clients they made and those clients'
    connections, as a stopped deployment's environments end in Lambda."""
    with _loading:
        for key in [key for key in _warm_modules if (variable, value) in key[1]]:
            del _warm_modules[key]


def _exec_fresh(prefix: str, code_dir: Path, module_name: str) -> ModuleType:
    """Execute `module_name` from `code_dir` anew, under a name of its own (`prefix`_...). A module
    in a package of the function's own (the API's `mobile_api.app`) is imported through that
    package, under the same prefix, so its relative imports resolve; the copy an earlier
    environment loaded is dropped first."""
    top, _, rest = module_name.partition(".")
    name = f"{prefix}_{top}"
    path = code_dir / top / "__init__.py" if rest else code_dir / f"{top}.py"
    for loaded in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[loaded]
    spec = importlib.util.spec_from_file_location(
        name, path, submodule_search_locations=[str(path.parent)] if rest else None
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {module_name} from {code_dir}")
    module = importlib.util.module_from_spec(spec)
    if rest:
        sys.modules[name] = module  # a package's modules find it here
    spec.loader.exec_module(module)
    return importlib.import_module(f"{name}.{rest}") if rest else module


def handler_module(logical_id: str) -> ModuleType:
    """The module of a function's handler, imported as Lambda would (warm after the first call)."""
    code_dir, module_name, _ = function_handler(logical_id)
    return _load_module(logical_id, code_dir, module_name)


def asgi_app(logical_id: str) -> Any:
    """The ASGI app a Lambda Web Adapter function serves."""
    located = web_adapter_app(logical_id)
    if located is None:
        raise ValueError(f"{logical_id} is not served through Lambda Web Adapter")
    code_dir, module_name, attribute = located
    return getattr(_load_module(logical_id, code_dir, module_name), attribute)


# What one invocation's log lines carry of their own, besides its Lambda context's keys (Powertools'
# `LambdaContextModel`): its cold start, and the correlation id its handler sets
# (`set_correlation_id`, or `inject_lambda_context(correlation_id_path=...)`).
INVOCATION_KEYS = frozenset({"cold_start", "correlation_id", "xray_trace_id"})
_PER_INVOCATION = "local_keys_per_invocation"  # marks a formatter already made so


def log_as(logical_id: str) -> LocalLambdaContext:
    """Start an invocation of `logical_id`: its Lambda context, whose keys Powertools' log lines then
    carry in this thread or task (a context variable; its own copy for each invocation).

    In Lambda each function has a process of its own; here they share one, and Powertools keeps the
    keys that `inject_lambda_context` and `set_correlation_id` set on the one formatter every
    logger of the service shares: without this a line carried whichever function's Lambda context
    was set last (an API line the recall indexer's cold start: it runs after every stored message),
    and the correlation id one request or text set was read, or cleared, by all the others.
    """
    from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
    from aws_lambda_powertools.logging.lambda_context import build_lambda_context_model

    _keys_per_invocation()
    context = LocalLambdaContext(
        function_name=logical_id, aws_request_id=str(uuid.uuid4()), timeout_s=function_timeout_s(logical_id)
    )
    LambdaPowertoolsFormatter().thread_safe_append_keys(**vars(build_lambda_context_model(context)))
    return context


def _keys_per_invocation() -> None:
    """Make every Powertools formatter in this process keep INVOCATION_KEYS in the running
    invocation's context (Powertools' thread-safe keys) rather than in its shared state: each
    invocation runs in a context of its own (`invoke`, or the local gateway's request task), as
    each Lambda invocation has a process of its own. Other keys stay shared, as in Lambda."""
    from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
    from aws_lambda_powertools.logging.lambda_context import LambdaContextModel

    own = INVOCATION_KEYS.union(vars(LambdaContextModel()))
    for registered in list(logging.Logger.manager.loggerDict.values()):
        formatter = getattr(getattr(registered, "powertools_handler", None), "formatter", None)
        if isinstance(formatter, LambdaPowertoolsFormatter) and not getattr(formatter, _PER_INVOCATION, False):
            formatter.append_keys = partial(_append_keys, formatter, formatter.append_keys, own)  # type: ignore[method-assign]
            setattr(formatter, _PER_INVOCATION, True)


def _append_keys(formatter: Any, shared: Callable[..., None], own: frozenset[str], **keys: Any) -> None:
    formatter.thread_safe_append_keys(**{k: v for k, v in keys.items() if k in own})
    shared(**{k: v for k, v in keys.items() if k not in own})


def invoke(logical_id: str, event: dict[str, Any]) -> Any:
    """Call the function once with `event`, as `sam local invoke` would: as that function, so
    every request it makes carries its credentials (infra/local/iam/identity.py)."""
    return contextvars.copy_context().run(_invoke, logical_id, event)


def _invoke(logical_id: str, event: dict[str, Any]) -> Any:
    context = log_as(logical_id)
    with acting_as(logical_id):
        if web_adapter_app(logical_id) is not None:
            return asyncio.run(invoke_asgi(asgi_app(logical_id), event))
        return getattr(handler_module(logical_id), function_handler(logical_id)[2])(event, context)
