"""The memory console: chat as any user and see, turn by turn, what the model got and why.

    uv run python -m infra.console                 # the local stack with the console: open the printed URL
    uv run python -m infra.console --aws           # read only, on the table of your AWS environment
    uv run python -m infra.console --aws --personal-data   # ... showing the texts themselves

Locally it runs the whole local stack (as `infra.local_stack` does, on the same ports and data
file), with the console's page at /console/. Against AWS it only reads, and every text the user
said or told shows as its length unless --personal-data is given (as `infra.inspect_prompt` does).
"""

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import uvicorn

from infra.console import meter
from infra.console.app import create_console_app
from infra.console.context import ConsoleContext
from infra.console.recorder import ChatRecorder
from infra.local.errors import run_tool
from infra.local.ports import FixedPort, bound, listen_on, port_of
from infra.local.stack import DEFAULT_DATA_FILE, LocalStack, add_iam_option
from infra.local.terminal import add_verbose_option, audit_lines_to, log_file_of, logs_line, quiet_terminal
from onboarding.config import Settings


class LocalConsole:
    """Wraps the local stack's gateway with the console (its routes, and the recording of turns)."""

    def __init__(self) -> None:
        self.stack: LocalStack | None = None
        self.context: ConsoleContext | None = None

    def wrap(self, gateway: Any) -> ChatRecorder:
        # The stack has set the environment by now; the functions' clients do not exist yet.
        meter.install()
        self.context = ConsoleContext(Settings.from_env(), personal_data=True, stack=self.stack)
        return ChatRecorder(gateway, create_console_app(self.context), self.context)


def local_stack_with_console(
    data_file: Path | None,
    chunk_delay_s: float,
    port: int,
    host: str = "127.0.0.1",
    dynamodb_port: int | None = None,
    bedrock_port: int = 0,
    twilio_port: int = 0,
    enforce_iam: bool = True,
) -> tuple[LocalStack, LocalConsole]:
    console = LocalConsole()
    stack = LocalStack(
        data_file,
        chunk_delay_s,
        dynamodb_port=dynamodb_port or None,
        bedrock_port=bedrock_port,
        host=host,
        api_port=port,
        twilio_port=twilio_port,
        gateway_wrap=console.wrap,
        enforce_iam=enforce_iam,
        api_option="--port",
        command="infra.console",
    )
    console.stack = stack
    return stack, console


def openapi_document() -> dict[str, Any]:
    """The console's OpenAPI document (docs/console-openapi.json is this, kept current by a test)."""
    context = ConsoleContext(Settings(table_name="onboarding-memory-local"), personal_data=False)
    return create_console_app(context).openapi()


def _interrupt(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _run_local(arguments: argparse.Namespace) -> None:
    stack, _ = local_stack_with_console(
        arguments.data_file,
        arguments.chunk_delay,
        arguments.port,
        arguments.host,
        dynamodb_port=arguments.dynamodb_port,
        bedrock_port=arguments.bedrock_port,
        twilio_port=arguments.twilio_port,
        enforce_iam=not arguments.no_iam,
    )
    log_file = log_file_of(arguments.data_file, "console")
    with quiet_terminal(log_file, arguments.verbose) as terminal, stack:
        try:
            # Before the banner that promises it: a Ctrl-C right after "Logs:" stops and saves too.
            signal.signal(signal.SIGTERM, _interrupt)
            signal.signal(signal.SIGINT, _interrupt)
            print(f"Memory console: {stack.api_url}/console/", file=terminal, flush=True)
            print(f"(the local stack's API is at {stack.api_url}; Ctrl-C stops it and saves the table)", file=terminal)
            print(logs_line(log_file, arguments.verbose), file=terminal, flush=True)
            while True:
                time.sleep(5)
                stack.save()
        except KeyboardInterrupt:
            pass  # how it is meant to stop; the `with` saves the table and stops the servers
    print(f"Stopped; the table is saved in {arguments.data_file}.", file=sys.stderr)


def _run_aws(arguments: argparse.Namespace) -> None:
    audit_lines_to(sys.stderr)  # each read of a real user's memory, on the operator's terminal
    context = ConsoleContext(Settings.from_env(), personal_data=arguments.personal_data)
    asked = FixedPort("the console", arguments.port, "--port")
    listener = bound(asked, arguments.host, lambda: listen_on(arguments.host, asked.port))
    port = port_of(listener)
    url = f"http://{arguments.host}:{port}/console/"
    print(f"Memory console (read only, table {context.settings.table_name}): {url}", flush=True)
    config = uvicorn.Config(
        create_console_app(context), host=arguments.host, port=port, log_level="warning", access_log=False
    )
    uvicorn.Server(config).run(sockets=[listener])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=3000, help="the page and the API routes (0: any free port)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--data-file", type=Path, default=DEFAULT_DATA_FILE)
    parser.add_argument("--chunk-delay", type=float, default=0.02, help="seconds between the local model's tokens")
    parser.add_argument("--dynamodb-port", type=int, default=8000)
    parser.add_argument("--bedrock-port", type=int, default=8001)
    parser.add_argument("--twilio-port", type=int, default=8002)
    parser.add_argument("--aws", action="store_true", help="read the table of your AWS environment (read only)")
    parser.add_argument("--personal-data", action="store_true", help="with --aws: show texts instead of their lengths")
    parser.add_argument("--openapi", action="store_true", help="print the console's OpenAPI document and exit")
    add_iam_option(parser)
    add_verbose_option(parser)
    arguments = parser.parse_args(argv)
    if arguments.openapi:
        print(json.dumps(openapi_document(), indent=2, ensure_ascii=False))
        return 0
    if arguments.personal_data and not arguments.aws:
        parser.error("--personal-data is for --aws: the local stack always shows its own texts")
    (_run_aws if arguments.aws else _run_local)(arguments)
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main, stopped="Stopped while starting; the data file is as it was."))
