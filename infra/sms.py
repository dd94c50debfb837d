"""Text the coach locally: posts a signed Twilio webhook to the local stack and prints the reply.

    uv run python -m infra.sms "Hi coach"       # on the running local stack, or a stack of its own
    uv run python -m infra.sms "LINK K7QM2XHP9A" --from +15551230001
    uv run python -m infra.sms "YES" --from +15551230001        # the phone agrees to the link

With `python -m infra.local_stack` running on --data-file, the text goes to that stack; without
one, a stack of its own is started on the file for this text (and saved). --api and --twilio
name another stack's URLs instead. The request is what Twilio would send (form fields,
`X-Twilio-Signature` computed with the local auth token over the local webhook URL); replies are
read back from the local Twilio stand-in.
"""

import argparse
import re
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TextIO

import httpx

from infra.local.errors import LocalToolError, run_tool
from infra.local.shared_stack import ToolStack, stack_for
from infra.local.stack import DEFAULT_DATA_FILE
from infra.local.terminal import add_verbose_option, log_file_of, logs_line, quiet_terminal
from infra.local.twilio_emulator import LOCAL_ACCOUNT_SID, LOCAL_AUTH_TOKEN, post_signed_text

E164 = re.compile(r"\+[1-9]\d{6,14}")  # what Twilio sends as `From`


def checked_phone(phone: str) -> str:
    """`phone` if it is a number as Twilio writes it (E.164); else a one-line error."""
    if E164.fullmatch(phone) is None:
        raise LocalToolError(f"--from {phone}: not a phone number as Twilio writes it (E.164, e.g. +15551230001)")
    return phone


def text_the_coach(api: str, twilio: str, from_phone: str, text: str, wait_s: float, out: TextIO) -> int:
    listing = f"{twilio}/2010-04-01/Accounts/{LOCAL_ACCOUNT_SID}/Messages.json"
    auth = (LOCAL_ACCOUNT_SID, LOCAL_AUTH_TOKEN)
    try:
        before = len(httpx.get(listing, params={"To": from_phone}, auth=auth).json()["messages"])
        response = post_signed_text(f"{api}/sms", from_phone, text)
    except httpx.HTTPError as error:
        raise LocalToolError(
            f"cannot reach the local stack at {api} ({error}); start it with: uv run python -m infra.local_stack"
        ) from None
    print(f"webhook> {response.status_code} {response.text}", file=out)
    if response.status_code != 200 or "<Message>" in response.text:
        return 0 if response.status_code == 200 else 1  # answered at once (or refused): no SMS follows
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        messages = httpx.get(listing, params={"To": from_phone}, auth=auth).json()["messages"]
        if len(messages) > before:
            for message in reversed(messages[: len(messages) - before]):
                print(f"coach (SMS)> {message['body']}", file=out)
            return 0
        time.sleep(0.2)
    print("(no SMS reply; an immediate answer, if any, is in the webhook's TwiML above)", file=out)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("text", help="what the person texts")
    parser.add_argument("--from", dest="from_phone", default="+15551230001", help="the sender's E.164 number")
    parser.add_argument("--data-file", type=Path, default=DEFAULT_DATA_FILE, help="the local stack's data file")
    parser.add_argument("--api", help="another local stack's API URL (default: the stack of --data-file)")
    parser.add_argument("--twilio", help="that stack's Twilio stand-in URL")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the reply")
    add_verbose_option(parser)
    arguments = parser.parse_args()
    if (arguments.api is None) != (arguments.twilio is None):
        parser.error("--api and --twilio go together")
    checked_phone(arguments.from_phone)  # before any stack starts
    given = arguments.api is not None
    local: AbstractContextManager[ToolStack | None] = (
        nullcontext() if given else stack_for(arguments.data_file, "infra.sms", serve_api=True)
    )
    log_file = log_file_of(arguments.data_file, "sms")
    with quiet_terminal(log_file, arguments.verbose) as terminal, local as stack:
        api, twilio = (
            (arguments.api, arguments.twilio) if stack is None else (stack.state.api_url, stack.state.twilio_url)
        )
        if api is None:
            owner = stack.state.describe() if stack is not None else "this data file"
            raise LocalToolError(
                f"the local stack of {owner} serves no API, so it cannot take a text; stop it "
                "and start `uv run python -m infra.local_stack`, or run infra.sms with --data-file another file"
            )
        code = text_the_coach(api, twilio, arguments.from_phone, arguments.text, arguments.wait, terminal)
    if stack is not None and not stack.attached:  # its own stack ran the functions here: their logs
        print(logs_line(log_file, arguments.verbose), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(run_tool(main))
