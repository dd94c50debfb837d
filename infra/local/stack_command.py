"""`python -m infra.local_stack`: the local stack in the foreground, for other processes to use
(the command's options, what it prints, and how Ctrl-C and SIGTERM stop it, saved)."""

import argparse
import signal
import sys
import time
from functools import partial
from pathlib import Path

from infra.local import stack
from infra.local.flags import checked_flags_file
from infra.local.stack_iam import add_iam_option, describe_iam
from infra.local.terminal import add_verbose_option, log_file_of, logs_line, quiet_terminal


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM ends the stack as Ctrl-C does: saved and stopped."""
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=stack.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dynamodb-port", type=int, default=8000)
    parser.add_argument("--bedrock-port", type=int, default=8001)
    parser.add_argument("--api-port", type=int, default=3000, help="the API routes (like `sam local start-api`)")
    parser.add_argument("--twilio-port", type=int, default=8002)
    parser.add_argument("--s3vectors-port", type=int, default=8003, help="the recall index (S3 Vectors stand-in)")
    parser.add_argument("--data-file", type=Path, default=stack.DEFAULT_DATA_FILE)
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on; 0.0.0.0 lets `sam local invoke` containers reach it"
    )
    parser.add_argument(
        "--flags",
        type=Path,
        help="feature flags JSON file (docs/rollout.md); edits apply within FEATURE_FLAGS_MAX_AGE_S",
    )
    add_iam_option(parser)
    add_verbose_option(parser)
    arguments = parser.parse_args()
    flags_file = None if arguments.flags is None else checked_flags_file(arguments.flags)
    signal.signal(signal.SIGTERM, _interrupt)
    # Also when started in the background of a script, which would have Ctrl-C ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with (
        quiet_terminal(log_file_of(arguments.data_file, "local_stack"), arguments.verbose) as terminal,
        stack.LocalStack(
            arguments.data_file,
            0.02,
            dynamodb_port=arguments.dynamodb_port,
            bedrock_port=arguments.bedrock_port,
            host=arguments.host,
            api_port=arguments.api_port,
            twilio_port=arguments.twilio_port,
            s3vectors_port=arguments.s3vectors_port,
            command="infra.local_stack",
            flags_file=flags_file,
            enforce_iam=not arguments.no_iam,
        ) as running,
    ):
        say = partial(print, file=terminal)
        say(f"Local stack running. API: {running.api_url} (OpenAPI at {running.api_url}/openapi.json;")
        say("  send `Authorization: Bearer <any user id>`), SMS webhook: POST /sms.")
        say(f"Data: {arguments.data_file} (saved every 5 s and on exit). infra.chat, infra.invoke, infra.sms and")
        say("  infra.inspect_prompt use this stack while it runs. Point another process at it with:")
        for name, value in running.environment.items():
            say(f"  export {name}={value}" if value is not None else f"  unset {name}")
        if flags_file is not None:
            say(f"Flags: {flags_file}, served by the local AppConfig (edits apply within FEATURE_FLAGS_MAX_AGE_S).")
        say(describe_iam(running.enforce_iam))
        say(logs_line(log_file_of(arguments.data_file, "local_stack"), arguments.verbose))
        say("Ctrl-C stops it and saves the table.", flush=True)
        try:
            while True:
                time.sleep(5)
                running.save()
        except KeyboardInterrupt:
            pass  # how it is meant to stop; the `with` saves the table and stops the servers
    print("Stopped; the table is saved.", file=sys.stderr)
    return 0
