"""`python -m infra.console --aws`, run as a person would, against a table reached through the
standard endpoint variable (here the local stack's): it reads, redacts texts, and writes nothing."""

import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

from infra.local.stack import LocalStack

REPO = Path(__file__).resolve().parents[2]


def test_the_aws_console_reads_only_and_redacts_unless_asked(tmp_path: Path) -> None:
    user = f"e2e-{uuid.uuid4()}"
    with LocalStack(api_port=0) as stack:
        headers = {"Authorization": f"Bearer {user}"}
        assert (
            httpx.post(
                f"{stack.api_url}/chat", json={"message": "Hi! My name is Alexandra"}, headers=headers, timeout=60
            ).status_code
            == 200
        )
        for extra, shown in (((), False), (("--personal-data",), True)):
            printed = tmp_path / f"out{len(extra)}.txt"
            with printed.open("w") as out:
                process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                    [sys.executable, "-m", "infra.console", "--aws", "--port", "0", *extra],
                    cwd=REPO,
                    # The stack's endpoint variables are in this process's environment now.
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            try:
                deadline = time.monotonic() + 60
                while not (match := re.search(r"(http://\S+/console/)", printed.read_text())):
                    assert process.poll() is None, printed.read_text()[-2000:]
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
                base = match.group(1)
                for _ in range(100):  # the URL is printed just before the server listens
                    try:
                        session = httpx.get(f"{base}api/session").json()
                        break
                    except httpx.TransportError:
                        time.sleep(0.1)
                assert session["readOnly"] is True
                assert session["personalData"] is shown
                seen = (
                    httpx.get(f"{base}api/users/{user}/memory").text + httpx.get(f"{base}api/users/{user}/prompt").text
                )
                assert ("Alexandra" in seen) is shown
                assert httpx.post(f"{base}api/sms", json={"from": "+15551230001", "text": "hi"}).status_code == 409
            finally:
                process.terminate()
                process.wait(timeout=30)
            # each read of the real table is in the audit trail the console prints.
            audit = [line for line in printed.read_text().splitlines() if '"Context access"' in line]
            # (The prompt's read, then its read of the recall index: each access is audited.)
            reads = [json.loads(line) for line in audit]
            assert [read["why"] for read in reads] == ["console:memory", "console:prompt", "console:prompt"]
            assert "what_recalled" in reads[2]
            assert all(json.loads(line)["whose"] == user for line in audit)
            assert "Alexandra" not in "".join(audit)
