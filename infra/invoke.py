"""Invoke a function of template.yaml with an event file, the way `sam local invoke -e` does,
but in this process and against the embedded local stack: no Docker, no AWS account.

    python -m infra.invoke ApiFunction -e events/api_chat.json
    python -m infra.invoke SmsWebhookFunction -e events/sms_webhook.json
    python -m infra.invoke SmsWorkerFunction -e events/sms_worker.json

A function whose handler is a start-up script (the mobile API, behind Lambda Web Adapter) gets the
event the way the adapter delivers it: as an HTTP request to its ASGI app (see infra/local/lambda_runner.py).

While `python -m infra.local_stack` (or another local tool) runs on the same --data-file, the
function runs against that stack, so what it writes is seen there and saved by it; otherwise a
stack of its own is started on the file for the one call. The sample events are signed for a
sample webhook URL, which the webhook is told locally (as events/env.local.json does for
`sam local invoke`).

With `--aws`, no local stack is started and the function talks to whatever AWS the
environment's credentials and region point at (TABLE_NAME must be set).
"""

import argparse
import json
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from infra.local.errors import LocalToolError, run_tool
from infra.local.lambda_runner import invoke
from infra.local.shared_stack import stack_for
from infra.local.stack import DEFAULT_DATA_FILE, SAMPLE_WEBHOOK_URL, add_iam_option
from infra.local.template import function_ids
from infra.local.terminal import add_verbose_option, log_file_of, logs_line, quiet_terminal


def checked_function(logical_id: str) -> str:
    """`logical_id` if template.yaml declares a function of that name; else a one-line error naming them."""
    functions = function_ids()
    if logical_id not in functions:
        raise LocalToolError(f"template.yaml has no function {logical_id!r}; choose one of: {', '.join(functions)}")
    return logical_id


def read_event(path: Path) -> dict[str, Any]:
    """The event file as a JSON object; a missing or unreadable one is a one-line error."""
    try:
        event = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LocalToolError(
            f"no event file {path}; the sample events are in events/ (e.g. events/api_chat.json)"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise LocalToolError(f"cannot read the event file {path} ({error})") from None
    except ValueError as error:
        raise LocalToolError(f"the event file {path} is not JSON ({error}); fix it or use one from events/") from None
    if not isinstance(event, dict):
        raise LocalToolError(f"the event file {path} holds {type(event).__name__}, not a JSON object (an event)")
    return event


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("function", help="logical id in template.yaml, e.g. ApiFunction")
    parser.add_argument("-e", "--event", type=Path, required=True, help="event JSON file")
    parser.add_argument("--data-file", type=Path, default=DEFAULT_DATA_FILE, help="local table snapshot")
    parser.add_argument("--aws", action="store_true", help="use real AWS instead of the local stack")
    add_iam_option(parser)
    add_verbose_option(parser)
    arguments = parser.parse_args()
    function = checked_function(arguments.function)
    event = read_event(arguments.event)
    # The sample events are signed for the sample URL, which the webhook is told instead of its parameter.
    signed_for = {"TWILIO_WEBHOOK_URL": SAMPLE_WEBHOOK_URL, "TWILIO_WEBHOOK_URL_PARAMETER": None}
    local = stack_for(arguments.data_file, "infra.invoke", overrides=signed_for, enforce_iam=not arguments.no_iam)
    log_file = log_file_of(arguments.data_file, "invoke")
    with quiet_terminal(log_file, arguments.verbose) as terminal, nullcontext() if arguments.aws else local:
        print(json.dumps(invoke(function, event), indent=2, ensure_ascii=False), file=terminal)
    print(logs_line(log_file, arguments.verbose), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
