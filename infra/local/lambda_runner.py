"""Runs template.yaml's functions in this process, as Lambda would: the handler module imported once
per function (warm afterwards), a context object, and for Lambda Web Adapter functions the event
turned into an HTTP request to their ASGI app (see infra.local.web_adapter)."""

import asyncio
import contextvars
import importlib.util
import os
import sys
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from infra.local.iam.identity import acting_as
from infra.local.template import function_handler, web_adapter_app
from infra.local.web_adapter import invoke_asgi


@dataclass
class LocalLambdaContext:
    """The attributes of Lambda's context object that handlers and Powertools read."""

    function_name: str
    memory_limit_in_mb: int = 1024
    function_version: str = "$LATEST"
    aws_request_id: str = ""

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


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
    return _warm_modules[key]


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


def log_as(logical_id: str) -> LocalLambdaContext:
    """Start an invocation of `logical_id`: its Lambda context, whose keys Powertools' log lines then
    carry in this thread or task (a context variable; its own copy for each invocation).

    In Lambda each function has a process of its own; here they share one, and Powertools keeps the
    keys its `inject_lambda_context` sets on a formatter that every logger of the service shares,
    so without this the API's lines would name whichever function ran last (the SMS worker).
    """
    from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

    context = LocalLambdaContext(function_name=logical_id, aws_request_id=str(uuid.uuid4()))
    LambdaPowertoolsFormatter().thread_safe_append_keys(
        function_name=context.function_name,
        function_memory_size=context.memory_limit_in_mb,
        function_arn=context.invoked_function_arn,
        function_request_id=context.aws_request_id,
    )
    return context


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
