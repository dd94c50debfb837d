"""`python -m infra.local_stack`: the local stack in the foreground, for other processes to use.

It prints where it serves, the file that holds the environment for other shells, where its log
lines go, then one line per request; Ctrl-C (or SIGTERM) stops it and saves the table. The stack is
infra/local/stack.py.
"""

import argparse
import shlex
import signal
import sys
import time
from functools import partial
from pathlib import Path

from infra.local.errors import run_tool
from infra.local.flags import checked_flags_file
from infra.local.ports import FixedPort
from infra.local.stack import DEFAULT_DATA_FILE, LocalStack, add_iam_option, describe_iam
from infra.local.terminal import add_verbose_option, log_file_of, logs_line, quiet_terminal


def _interrupt(signum: int, frame: object) -> None:
    """Ctrl-C or SIGTERM ends the stack, saved and stopped; the second one a terminal's Ctrl-C
    brings (`uv run` forwards it too) must not cut the save short."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


ANY_PORT = "(default: %(default)s; 0: any free port, which the banner prints)"


def ports_line(ports: dict[str, FixedPort]) -> str:
    """The ports the stack's servers got (the system chose those given as 0)."""
    names = {"dynamodb": "DynamoDB", "bedrock": "Bedrock", "api": "API", "twilio": "Twilio", "s3vectors": "S3 Vectors"}
    return "Ports: " + ", ".join(f"{names[name]} {ports[name].port}" for name in names if name in ports) + "."


def environment_file(data_file: Path) -> Path:
    """Where the stack writes what another shell sets to use it (`source` it), beside its data file."""
    return data_file.with_suffix(".env")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dynamodb-port", type=int, default=8000, help=f"DynamoDB, SQS and SSM {ANY_PORT}")
    parser.add_argument("--bedrock-port", type=int, default=8001, help=f"the Bedrock emulator {ANY_PORT}")
    parser.add_argument(
        "--api-port", type=int, default=3000, help=f"the API routes, like `sam local start-api` {ANY_PORT}"
    )
    parser.add_argument("--twilio-port", type=int, default=8002, help=f"the Twilio stand-in {ANY_PORT}")
    parser.add_argument(
        "--s3vectors-port", type=int, default=8003, help=f"the recall index, S3 Vectors' stand-in {ANY_PORT}"
    )
    parser.add_argument("--data-file", type=Path, default=DEFAULT_DATA_FILE)
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
    signal.signal(signal.SIGINT, _interrupt)  # also when started in the background of a script, which ignores it
    log_file, env_file = log_file_of(arguments.data_file, "local_stack"), environment_file(arguments.data_file)
    with (
        quiet_terminal(log_file, arguments.verbose) as terminal,
        LocalStack(
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
        env_file.write_text(
            "".join(
                f"unset {name}\n" if value is None else f"export {name}={shlex.quote(value)}\n"
                for name, value in running.environment.items()
            ),
            encoding="utf-8",
        )
        say = partial(print, file=terminal)
        say(f"Local stack running. API: {running.api_url} (OpenAPI at {running.api_url}/openapi.json;")
        say("  send `Authorization: Bearer <any user id>`), SMS webhook: POST /sms.")
        say(ports_line(running.ports))
        say(f"Data: {arguments.data_file} (each change saved within 5 s; written whole on exit). infra.chat,")
        say("  infra.invoke, infra.sms and infra.inspect_prompt use this stack while it runs.")
        say(f"Environment for another process: source {env_file}")
        if flags_file is not None:
            say(f"Flags: {flags_file}, served by the local AppConfig (edits apply within FEATURE_FLAGS_MAX_AGE_S).")
        say(describe_iam(running.enforce_iam))
        say(logs_line(log_file, arguments.verbose))
        say("Ctrl-C stops it and saves the table.", flush=True)
        try:
            while True:
                time.sleep(5)
                running.save()
        except KeyboardInterrupt:
            pass  # how it is meant to stop; the `with` saves the table and stops the servers
        finally:
            env_file.unlink(missing_ok=True)
    print("Stopped; the table is saved.", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main, stopped="Stopped while starting; the data file is as it was."))
