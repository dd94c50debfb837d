"""Ctrl-C in `infra.chat` (at the prompt and during a reply) is a clean
one-line exit with the data saved and every child process ended; `--reset` forgets one user,
`--reset-all` everyone, after saying so, each with their check-in schedules."""

import json
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from onboarding.checkins.timetable import FIRE_TIME, schedule_name
from tests.support.processes import REPO, read_until, run, stack_state, wait_gone

FIRST_QUESTION = "How would you describe your current fitness level"
CHECK_IN_TARGET = "arn:aws:lambda:us-east-1:123456789012:function:onboarding-check-in"
CHECK_IN_ROLE = "arn:aws:iam::123456789012:role/onboarding-check-in-scheduler"


def _interactive_chat(data_file: Path, *extra: str) -> "subprocess.Popen[bytes]":
    return subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "infra.chat", "--data-file", str(data_file), *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )


def _interrupt(chat: "subprocess.Popen[bytes]") -> tuple[int, str]:
    chat.send_signal(signal.SIGINT)
    _, stderr = chat.communicate(timeout=30)
    return chat.returncode, stderr.decode()


def _roles(data_file: Path, user: str) -> list[str]:
    items = [json.loads(line) for line in data_file.read_text(encoding="utf-8").splitlines()]
    return sorted(item["role"]["S"] for item in items if "role" in item and item["pk"]["S"].endswith(f"#{user}"))


@pytest.fixture(scope="module")
def two_users(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data file where al and bo have each answered the first question."""
    data_file = tmp_path_factory.mktemp("seed") / "m.jsonl"
    for user in ("al", "bo"):
        said = run("infra.chat", "--data-file", str(data_file), "--chunk-delay", "0", "--user", user,
                   "--script", "-", stdin="Hi\nAdvanced\n")  # fmt: skip
        assert said.returncode == 0, said.stderr[-2000:]
    return data_file


def test_ctrl_c_at_the_prompt_exits_in_one_line_saved_with_no_server_left(tmp_path: Path) -> None:
    data_file = tmp_path / "m.jsonl"
    chat = _interactive_chat(data_file, "--chunk-delay", "0")
    assert chat.stdin is not None
    read_until(chat, b"you> ")
    chat.stdin.write(b"\n")  # an empty Enter sends nothing: the prompt comes back at once
    chat.stdin.flush()
    read_until(chat, b"you> ")
    chat.stdin.write(b"Hi\n")
    chat.stdin.flush()
    read_until(chat, b"advanced?\nyou> ")
    children = stack_state(data_file)["children"]
    code, stderr = _interrupt(chat)
    assert code == 130
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == f"Stopped; the conversation is saved in {data_file}."
    assert wait_gone(children) == []
    assert _roles(data_file, "local-user") == ["assistant", "user"]  # the empty Enter was never sent


def test_ctrl_c_during_a_reply_exits_in_one_line_with_the_message_kept(tmp_path: Path) -> None:
    data_file = tmp_path / "m.jsonl"
    chat = _interactive_chat(data_file, "--chunk-delay", "0.5")
    assert chat.stdin is not None
    read_until(chat, b"you> ")
    children = stack_state(data_file)["children"]
    chat.stdin.write(b"Hi\n")
    chat.stdin.flush()
    read_until(chat, b"coach> Hi, I'm")  # a slow reply is streaming
    code, stderr = _interrupt(chat)
    assert code == 130
    assert "Traceback" not in stderr
    assert "CancelledError" not in stderr
    assert stderr.strip().splitlines()[-1] == f"Stopped; the conversation is saved in {data_file}."
    assert wait_gone(children) == []
    assert "user" in _roles(data_file, "local-user")  # what the person said is kept


def _schedule(user: str) -> dict[str, Any]:
    """A check-in schedule as the timetable makes it, in the local deployment's names."""
    given = {"user_id": user, "channel": "app", "fire_time": FIRE_TIME}
    return {
        "Name": schedule_name(user),
        "ScheduleExpression": "cron(0 9 ? * MON *)",
        "ScheduleExpressionTimezone": "Europe/Berlin",
        "FlexibleTimeWindow": {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 5},
        "State": "ENABLED",
        "Target": {"Arn": CHECK_IN_TARGET, "RoleArn": CHECK_IN_ROLE, "Input": json.dumps(given)},
    }


def _with_schedules(data_file: Path, *users: str) -> Path:
    """The check-in schedules of `users` kept beside the data file, as a stopped stack leaves them."""
    kept = data_file.with_suffix(".schedules.json")
    kept.write_text(json.dumps([_schedule(user) for user in users]), encoding="utf-8")
    return kept


def _scheduled(kept: Path) -> list[str]:
    return sorted(schedule["Name"] for schedule in json.loads(kept.read_text(encoding="utf-8")))


def test_reset_forgets_only_that_user(two_users: Path, tmp_path: Path) -> None:
    data_file = Path(shutil.copy(two_users, tmp_path / "m.jsonl"))
    kept = _with_schedules(data_file, "al", "bo")
    reset = run("infra.chat", "--data-file", str(data_file), "--user", "al", "--reset", "--script", "-", stdin="")
    assert reset.returncode == 0, reset.stderr[-2000:]
    assert re.search(r"^Forgot 'al': \d+ items deleted; other users kept\.$", reset.stderr, re.MULTILINE)
    assert _roles(data_file, "al") == []
    assert _roles(data_file, "bo").count("user") == 2
    assert _scheduled(kept) == [schedule_name("bo")]  # al's check-ins went with al, as DELETE /me takes them
    # bo is remembered: the coach goes on with the next question, not the first.
    bo = run("infra.chat", "--data-file", str(data_file), "--chunk-delay", "0", "--user", "bo", "--script", "-",
             stdin="I row\n")  # fmt: skip
    assert "Noted your current activity: “I row”" in bo.stdout  # the first question is not asked again


def test_reset_all_says_so_and_forgets_everyone(two_users: Path, tmp_path: Path) -> None:
    data_file = Path(shutil.copy(two_users, tmp_path / "m.jsonl"))
    items = len(data_file.read_text(encoding="utf-8").splitlines())
    kept = _with_schedules(data_file, "al", "bo")
    reset = run("infra.chat", "--data-file", str(data_file), "--reset-all", "--script", "-", stdin="")
    assert reset.returncode == 0, reset.stderr[-2000:]
    assert f"Forgetting every user in {data_file} (--reset-all)" in reset.stderr
    assert f"Forgot everyone: {items} items and 2 check-in schedules deleted." in reset.stderr
    assert data_file.read_text(encoding="utf-8") == ""
    assert _scheduled(kept) == []
