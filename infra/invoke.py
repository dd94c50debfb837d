"""Invoke a function of template.yaml with an event file, the way `sam local invoke -e` does,
but in this process and against the embedded local stack: no Docker, no AWS account.

    python -m infra.invoke ChatFunction -e events/chat_message.json

With `--aws`, no local stack is started and the function talks to whatever AWS the
environment's credentials and region point at (TABLE_NAME must be set).
"""

import argparse
import importlib.util
import json
import sys
import uuid
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from infra.local_stack import LocalStack
from infra.template import function_handler

DEFAULT_DATA_FILE = Path(".local/dynamodb.jsonl")


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


_warm_modules: dict[str, ModuleType] = {}


def _load_handler_module(logical_id: str) -> tuple[ModuleType, str]:
    """Import the function's handler module as Lambda would, once per function (a warm start
    afterwards). Every function's file may be called app.py, so each gets its own module name."""
    code_dir, module_name, function_name = function_handler(logical_id)
    if logical_id not in _warm_modules:
        spec = importlib.util.spec_from_file_location(
            f"_lambda_{logical_id}_{module_name}", code_dir / f"{module_name}.py"
        )
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load the handler of {logical_id} from {code_dir}")
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(code_dir))
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(code_dir))
        _warm_modules[logical_id] = module
    return _warm_modules[logical_id], function_name


def invoke(logical_id: str, event: dict[str, Any]) -> Any:
    """Call the function's handler once with `event`, as `sam local invoke` would."""
    module, function_name = _load_handler_module(logical_id)
    context = LocalLambdaContext(function_name=logical_id, aws_request_id=str(uuid.uuid4()))
    return getattr(module, function_name)(event, context)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("function", help="logical id in template.yaml, e.g. ChatFunction")
    parser.add_argument("-e", "--event", type=Path, required=True, help="event JSON file")
    parser.add_argument("--data-file", type=Path, default=DEFAULT_DATA_FILE, help="local table snapshot")
    parser.add_argument("--aws", action="store_true", help="use real AWS instead of the local stack")
    arguments = parser.parse_args()
    event = json.loads(arguments.event.read_text(encoding="utf-8"))
    with nullcontext() if arguments.aws else LocalStack(arguments.data_file):
        print(json.dumps(invoke(arguments.function, event), indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
