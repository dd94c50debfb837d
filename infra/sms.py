"""Text the coach locally: posts a signed Twilio webhook to a running local stack and prints the reply.

    uv run python -m infra.local_stack          # in one terminal
    uv run python -m infra.sms "Hi coach"       # in another
    uv run python -m infra.sms "LINK K7QM2XHP9A" --from +15551230001

The request is what Twilio would send (form fields, `X-Twilio-Signature` computed with the local
auth token over the local webhook URL); replies are read back from the local Twilio stand-in.
"""

import argparse
import sys
import time

import httpx

from infra.twilio_emulator import LOCAL_ACCOUNT_SID, LOCAL_AUTH_TOKEN, post_signed_text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("text", help="what the person texts")
    parser.add_argument("--from", dest="from_phone", default="+15551230001", help="the sender's E.164 number")
    parser.add_argument("--api", default="http://127.0.0.1:3000", help="the local stack's API URL")
    parser.add_argument("--twilio", default="http://127.0.0.1:8002", help="the local Twilio stand-in's URL")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the reply")
    arguments = parser.parse_args()

    listing = f"{arguments.twilio}/2010-04-01/Accounts/{LOCAL_ACCOUNT_SID}/Messages.json"
    auth = (LOCAL_ACCOUNT_SID, LOCAL_AUTH_TOKEN)
    try:
        before = len(httpx.get(listing, params={"To": arguments.from_phone}, auth=auth).json()["messages"])
        response = post_signed_text(f"{arguments.api}/sms", arguments.from_phone, arguments.text)
    except httpx.HTTPError as error:
        print(
            f"Cannot reach the local stack ({error}); start it with: uv run python -m infra.local_stack",
            file=sys.stderr,
        )
        return 2
    print(f"webhook> {response.status_code} {response.text}")
    if response.status_code != 200 or "<Message>" in response.text:
        return 0 if response.status_code == 200 else 1  # answered at once (or refused): no SMS follows
    deadline = time.monotonic() + arguments.wait
    while time.monotonic() < deadline:
        messages = httpx.get(listing, params={"To": arguments.from_phone}, auth=auth).json()["messages"]
        if len(messages) > before:
            for message in reversed(messages[: len(messages) - before]):
                print(f"coach (SMS)> {message['body']}")
            return 0
        time.sleep(0.2)
    print("(no SMS reply; an immediate answer, if any, is in the webhook's TwiML above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
