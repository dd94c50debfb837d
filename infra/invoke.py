"""Invoke a function of template.yaml with an event file, the way `sam local invoke -e` does,
but in this process and against the embedded local stack: no Docker, no AWS account.

    python -m infra.invoke ChatFunction -e events/chat_message.json

With `--aws`, no local stack is started and the function talks to whatever AWS the
environment's credentials and region point at (TABLE_NAME must be set).
"""

import argparse
import importlib
import json
import sys
import uuid
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
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


def invoke(logical_id: str, event: dict[str, Any]) -> Any:
    """Import the function's handler as Lambda would (its CodeUri on sys.path) and call it once."""
    code_dir, module_name, function_name = function_handler(logical_id)
    sys.path.insert(0, str(code_dir))
    try:
        module = importlib.import_module(module_name)
    finally:
        sys.path.remove(str(code_dir))
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
