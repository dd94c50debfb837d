"""`python -m infra.local_stack`: the README's command for the embedded local stack, and the names the
tools, benchmarks and tests import (`from infra.local_stack import LocalStack`).

The stack itself lives in infra/local/ with its stand-ins (stack.py and the modules it names); this
module stays at the top of infra/ so every documented command and import keeps working unchanged.
"""

import sys

from infra.local.errors import run_tool
from infra.local.stack import (
    DEFAULT_DATA_FILE,
    FIRST_ANSWER_TIMEOUT_S,
    LOCAL_AWS_ENVIRONMENT,
    LOCAL_TIMEOUTS,
    RECALL_BUCKET_NAME,
    RECALL_INDEX_NAME,
    SAMPLE_WEBHOOK_URL,
    LocalDynamoDB,
    LocalStack,
    add_iam_option,
    end_child,
    free_port,
    main,
    wait_until_listening,
)

__all__ = [
    "DEFAULT_DATA_FILE",
    "FIRST_ANSWER_TIMEOUT_S",
    "LOCAL_AWS_ENVIRONMENT",
    "LOCAL_TIMEOUTS",
    "RECALL_BUCKET_NAME",
    "RECALL_INDEX_NAME",
    "SAMPLE_WEBHOOK_URL",
    "LocalDynamoDB",
    "LocalStack",
    "add_iam_option",
    "end_child",
    "free_port",
    "main",
    "wait_until_listening",
]

if __name__ == "__main__":
    sys.exit(run_tool(main, stopped="Stopped while starting; the data file is as it was."))
