"""`python -m infra.local_stack`: the README's command for the embedded local stack, and the names the
tools, benchmarks and tests import (`from infra.local_stack import LocalStack`).

The stack itself lives in infra/local/ with its stand-ins (stack.py and its stack_* parts); this
module stays at the top of infra/ so every documented command and import keeps working unchanged.
"""

import sys

from infra.local.dynamodb_process import FIRST_ANSWER_TIMEOUT_S, LocalDynamoDB, end_child, wait_until_listening
from infra.local.errors import run_tool
from infra.local.ports import free_port
from infra.local.stack import DEFAULT_DATA_FILE, SAMPLE_WEBHOOK_URL, LocalStack
from infra.local.stack_command import main
from infra.local.stack_environment import LOCAL_TIMEOUTS
from infra.local.stack_iam import add_iam_option
from infra.local.stack_resources import LOCAL_AWS_ENVIRONMENT
from infra.local.stack_template import RECALL_BUCKET_NAME, RECALL_INDEX_NAME

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
