"""Every documented command answers a problem the person can fix with one `error:` line
that says what to do, and exit code 2; never a traceback. One test per case the issue lists."""

import os
import pty
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.ports import unanswered_port
from tests.support.processes import REPO, read_until, run, running_stack

pytestmark = pytest.mark.e2e


def one_error_line(completed: subprocess.CompletedProcess[str]) -> str:
    """The single `error: ...` line the command printed (asserting that it is all it printed on
    stderr, that no traceback appeared anywhere, and that it exited with 2)."""
    printed = completed.stdout + completed.stderr
    assert "Traceback" not in printed, printed[-3000:]
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1, completed.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert completed.returncode == 2, (completed.returncode, printed[-2000:])
    return lines[0]


def console_ports() -> list[str]:
    return [argument for name in ("dynamodb", "bedrock", "twilio") for argument in (f"--{name}-port", "0")]


def test_the_console_on_a_data_file_a_stack_holds(tmp_path: Path) -> None:
    data_file = tmp_path / "held.jsonl"
    with running_stack(data_file) as stack:
        completed = run("infra.console", "--data-file", str(data_file), "--port", "0", *console_ports(), timeout_s=60)
    line = one_error_line(completed)
    assert f"{data_file} is in use by infra.local_stack (pid {stack.process.pid})" in line
    assert "--data-file" in line


def test_the_console_on_a_taken_port_names_its_own_option(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        completed = run(
            "infra.console", "--data-file", str(tmp_path / "d.jsonl"), "--port", str(port), *console_ports()
        )
        line = one_error_line(completed)
        assert f"port {port} on 127.0.0.1 (for the API) is taken" in line
    assert "--port PORT" in line
    assert "--api-port" not in line  # an option the console does not have


def test_sms_from_something_that_is_not_a_phone_number(tmp_path: Path) -> None:
    started = time.monotonic()
    completed = run("infra.sms", "Hi coach", "--from", "notaphone", "--data-file", str(tmp_path / "d.jsonl"))
    line = one_error_line(completed)
    assert "--from notaphone: not a phone number" in line
    assert "+15551230001" in line  # what one looks like
    assert time.monotonic() - started < 10  # refused before any stack starts
    assert list(tmp_path.iterdir()) == []


def test_a_command_run_outside_the_repository_works_as_the_readme_says(tmp_path: Path) -> None:
    """`uv run` outside the repository finds no project (Python then says "No module named 'infra'",
    before any of our code runs); the README's Troubleshooting line names the form that works from
    anywhere, and this runs it from a folder outside the repository."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "`uv run --project <the repository> python -m ...`" in readme
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    completed = subprocess.run(  # noqa: S603 - uv running our own module
        [uv, "run", "--project", str(REPO), "--frozen", "python", "-m", "infra.sms", "Hi", "--from", "notaphone"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert "--from notaphone: not a phone number" in one_error_line(completed)


def test_sms_to_a_stack_that_is_gone(tmp_path: Path) -> None:
    with unanswered_port() as port:
        url = f"http://127.0.0.1:{port}"
        completed = run("infra.sms", "Hi coach", "--api", url, "--twilio", url)
    line = one_error_line(completed)
    assert f"cannot reach the local stack at {url}" in line
    assert "uv run python -m infra.local_stack" in line


def test_invoke_with_an_unknown_function_names_the_functions(tmp_path: Path) -> None:
    completed = run("infra.invoke", "ApiFunctionn", "-e", "events/api_chat.json", "--data-file", str(tmp_path / "d"))
    line = one_error_line(completed)
    assert "no function 'ApiFunctionn'" in line
    assert "ApiFunction, SmsWebhookFunction, SmsWorkerFunction" in line
    assert "ConversationTable" not in line  # functions only, not every resource of the template


def test_invoke_with_a_missing_event_file_points_at_the_samples(tmp_path: Path) -> None:
    completed = run("infra.invoke", "ApiFunction", "-e", "events/nope.json", "--data-file", str(tmp_path / "d"))
    line = one_error_line(completed)
    assert "no event file events/nope.json" in line
    assert "events/" in line


def test_a_damaged_data_file_is_named_moved_aside_and_recoverable(tmp_path: Path) -> None:
    data_file = tmp_path / "table.jsonl"
    damaged = '{"pk": {"S": "USER#a"}, "sk": {"S": "~STATE"}}\n{"pk": {"S": "USER#b", \n'
    data_file.write_text(damaged, encoding="utf-8")
    completed = run("infra.chat", "--data-file", str(data_file), "--script", "-", stdin="Hi\n", timeout_s=120)
    line = one_error_line(completed)
    (aside,) = tmp_path.glob("table.jsonl.damaged-*")
    assert f"{data_file} is damaged (line 2 is not JSON" in line
    assert f"moved to {aside}" in line
    assert f"mv {aside} {data_file}" in line  # how to recover it
    assert aside.read_text(encoding="utf-8") == damaged  # nothing lost
    assert not data_file.exists()
    again = run("infra.chat", "--data-file", str(data_file), "--script", "-", stdin="Hi\n", timeout_s=120)
    assert again.returncode == 0, again.stderr[-2000:]  # as the line says: the next run starts empty


@pytest.mark.parametrize("after_s", [0.3, 1.0, 2.5])
def test_ctrl_c_while_the_chat_starts_is_one_line(after_s: float, tmp_path: Path) -> None:
    """Ctrl-C at a terminal (SIGINT to the whole foreground group) while imports, the servers'
    start or the table's load run: one `Stopped` line and the shell's code for an interrupt."""
    pid, terminal = pty.fork()
    if pid == 0:  # the child: the chat, as typed at a terminal
        os.chdir(REPO)
        os.execv(sys.executable, [sys.executable, "-m", "infra.chat", "--data-file", str(tmp_path / "t.jsonl")])  # noqa: S606
    time.sleep(after_s)
    os.write(terminal, b"\x03")
    printed = b""
    deadline = time.monotonic() + 60
    # Each read waits at most until the deadline: a chat that lost the Ctrl-C and sits at its
    # prompt prints nothing more, and a plain read would wait for it for ever.
    with selectors.DefaultSelector() as selector:
        selector.register(terminal, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not selector.select(left):
                continue
            try:
                chunk = os.read(terminal, 65536)
            except OSError:  # the child ended and closed the terminal
                break
            if not chunk:
                break
            printed += chunk
    ended, status = os.waitpid(pid, os.WNOHANG)
    exit_by = time.monotonic() + 30
    while not ended and time.monotonic() < exit_by:
        time.sleep(0.05)
        ended, status = os.waitpid(pid, os.WNOHANG)
    if not ended:  # still running: the Ctrl-C was lost; fail, never hang the suite
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail(f"the chat was still running after Ctrl-C: {printed.decode(errors='replace')[-2000:]}")
    text = printed.decode(errors="replace")
    assert "Traceback" not in text, text[-3000:]
    assert "KeyboardInterrupt" not in text, text[-3000:]
    assert "Stopped" in text, text[-3000:]
    assert os.waitstatus_to_exitcode(status) in (130, -signal.SIGINT), text[-3000:]


def test_the_commands_run_from_a_subfolder_of_the_repository(tmp_path: Path) -> None:
    """`python -m infra.<tool>` from docs/ finds the tools (no "No module named 'infra'") and the
    same default data file as from the root."""
    where = subprocess.run(
        [sys.executable, "-c", "from infra.local.stack import DEFAULT_DATA_FILE; print(DEFAULT_DATA_FILE)"],
        cwd=REPO / "docs",
        capture_output=True,
        text=True,
        check=False,
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()) == REPO / ".local" / "dynamodb.jsonl"
    completed = subprocess.run(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "infra.chat", "--data-file", str(tmp_path / "d.jsonl"), "--script", "-"],
        cwd=REPO / "docs",
        input="Hi\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "coach> " in completed.stdout


def test_the_benchmark_needs_the_sam_cli_and_says_so_before_it_starts(tmp_path: Path) -> None:
    started = time.monotonic()
    completed = run("infra.benchmark", "--out", str(tmp_path), PATH=str(tmp_path))  # no sam on PATH
    line = one_error_line(completed)
    assert "needs the SAM CLI" in line
    assert "--section" in line
    assert time.monotonic() - started < 30  # before any measurement, not after half an hour
    assert not list(tmp_path.iterdir())  # nothing written


def test_ctrl_c_stops_the_console_and_says_what_it_saved(tmp_path: Path) -> None:
    """The console printed nothing on Ctrl-C, where `infra.local_stack` says what it saved."""
    data_file = tmp_path / "console.jsonl"
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "infra.console", "--data-file", str(data_file), "--port", "0", *console_ports()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        banner = read_until(process, b"Logs: ").decode()
        assert "Memory console: http://127.0.0.1:" in banner
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr.decode()[-2000:]
    assert stderr.decode().strip().splitlines()[-1] == f"Stopped; the table is saved in {data_file}."
    assert data_file.exists()
