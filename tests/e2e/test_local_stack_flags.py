"""`python -m infra.local_stack --flags FILE` as a developer runs it: the stack serves the
file as its AppConfig flags profile, as the deployed stack's functions read theirs (the banner says
so, and exports the profile's ids), and a turn over its API is answered in the file's arm; a bad file
stops it at start with a clear error and exit code 2, before any port is taken."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.support.processes import STACK_PORT_OPTIONS, read_until

REPO = Path(__file__).resolve().parents[2]


def _start(tmp_path: Path, flags: Path) -> "subprocess.Popen[bytes]":
    return subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "infra.local_stack", "--flags", str(flags), "--data-file", str(tmp_path / "d.jsonl"),
         *(argument for option in STACK_PORT_OPTIONS for argument in (option, "0"))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
    )  # fmt: skip


def test_the_stack_serves_turns_in_the_arm_of_its_flags_file(tmp_path: Path) -> None:
    flags = tmp_path / "flags.json"
    flags.write_text(json.dumps({"memory": {"default": False}}), encoding="utf-8")
    stack = _start(tmp_path, flags)
    try:
        banner = read_until(stack, b"Ctrl-C stops it and saves the table.").decode()
        assert f"Flags: {flags}, served by the local AppConfig" in banner
        environment = (tmp_path / "d.env").read_text(encoding="utf-8")  # what another shell sources
        assert "export FEATURE_FLAGS_APPLICATION=" in environment
        assert "unset FEATURE_FLAGS_FILE" in environment
        api = banner.split("API: ", 1)[1].split(" ", 1)[0]
        replies = []
        for message in ("Hi", "I'm a beginner"):
            said = httpx.post(
                f"{api}/chat", json={"message": message}, headers={"Authorization": "Bearer me"}, timeout=60
            )
            assert said.status_code == 200, said.text
            replies.append(said.json()["reply"])
        assert replies[1] == replies[0]  # single-prompt: the answer is not known in the next turn
    finally:
        stack.send_signal(signal.SIGINT)
        stack.communicate(timeout=60)
    assert stack.returncode == 0


def test_a_bad_flags_file_stops_the_stack_at_start_with_a_clear_error(tmp_path: Path) -> None:
    flags = tmp_path / "flags.json"
    flags.write_text("{ not json", encoding="utf-8")
    stack = _start(tmp_path, flags)
    _, stderr = stack.communicate(timeout=60)
    assert stack.returncode == 2
    assert f"--flags {flags}: not JSON" in stderr.decode()
