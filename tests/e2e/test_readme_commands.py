"""The README's commands, run as a person would: new processes, the lines exactly as written
(tests/support/readme.py), and every line of the README either run by a test named in RUN_BY or
marked as needing AWS."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from infra.local.ports import listen_on
from onboarding.config import Settings
from onboarding.llm.wording import STEP_PROMPTS
from onboarding.model.state import OnboardingAgentType
from tests.support.ports import unanswered_port
from tests.support.processes import STACK_PORT_OPTIONS, ports_in_banner, read_until
from tests.support.readme import commands_run_by_tests, readme_line, run_line, sandbox, start_line

REPO = Path(__file__).resolve().parents[2]
QUESTIONS = [field.question for field in STEP_PROMPTS[OnboardingAgentType.FITNESS_ASSESSMENT].fields]


# Each README command the tests run, and the test that runs it (the rest are marked "# needs AWS").
LOCAL, SETUP = "test_the_local_development_commands_as_written", "test_the_setup_lines_install_uv_where_pip_is_refused"
RUN_BY = {
    'python3 -m venv ~/.uv && ~/.uv/bin/pip install uv': SETUP,
    'export PATH="$HOME/.uv/bin:$PATH"    # add this line to ~/.bashrc or ~/.zshrc to keep it': SETUP,
    "uv run python -m infra.chat": "test_the_quick_start_chat_prints_what_the_readme_shows",
    "uv run pytest": "(the suite itself)",
    "uv run pytest -m slow --no-cov": "(the suite itself)",
    "uv run python -m infra.chat --user sam --reset": LOCAL,
    "uv run python -m infra.chat --flags events/feature_flags.json": "test_the_flags_chat_command_as_written",
    'echo "I\'m a beginner" | uv run python -m infra.chat --script -': LOCAL,
    "uv run python -m infra.local_stack": LOCAL,
    "curl -N -H 'Authorization: Bearer me' -H 'Accept: text/event-stream' -H 'Content-Type: application/json' "
    "-d '{\"message\":\"Hi\"}' http://127.0.0.1:3000/chat": LOCAL,
    "curl -H 'Authorization: Bearer me' 'http://127.0.0.1:3000/history?limit=5'": LOCAL,
    "curl -X POST -H 'Authorization: Bearer me' http://127.0.0.1:3000/phone-links": LOCAL,
    'uv run python -m infra.sms "LINK <code>" --from +15551230001': LOCAL,
    'uv run python -m infra.sms "YES" --from +15551230001': LOCAL,
    'uv run python -m infra.sms "Hi coach" --from +15551230001': LOCAL,
    "curl -H 'Authorization: Bearer me' http://127.0.0.1:3000/phones": LOCAL,
    "curl -X DELETE -H 'Authorization: Bearer me' http://127.0.0.1:3000/me": LOCAL,
    "uv run python -m infra.invoke ApiFunction -e events/api_chat.json": LOCAL,
    "uv run python -m infra.invoke ApiFunction -e events/api_history.json": LOCAL,
    "uv run python -m infra.invoke SmsWebhookFunction -e events/sms_webhook.json": LOCAL,
    "uv run python -m infra.invoke SmsWorkerFunction -e events/sms_worker.json": LOCAL,
    "uv run python -m infra.inspect_prompt local-user": LOCAL,
    "uv run python -m infra.console     # the local stack, with a page at http://127.0.0.1:3000/console/": (
        "test_the_console_command_as_written"
    ),
    "uv run python -m infra.fidelity --quick": "test_fidelity_smoke.py",
    "uv run python -m infra.benchmark --quick": "test_benchmark_smoke.py",
    "uv run python -m infra.cost --quick": "test_cost_smoke.py",
    "uv run python -m infra.memory_benchmark --quick": "test_memory_benchmark_smoke.py",
}  # fmt: skip
DEFAULT_PORTS = (8000, 8001, 3000, 8002, 8003)  # the recall index's 8003 too


def _port_is_free(port: int) -> bool:
    """Whether a server could listen on `port` now (SO_REUSEADDR as the stack's servers set it)."""
    try:
        listen_on("127.0.0.1", port).close()
    except OSError:
        return False
    return True


@pytest.fixture
def default_ports() -> None:
    """Checked when the test starts, not when the suite is collected minutes before: another
    program on this machine may have taken one since. (The README's commands name these ports;
    this module's tests that use them run one after another on one worker: `--dist loadscope`.)"""
    if not all(_port_is_free(port) for port in DEFAULT_PORTS):
        pytest.skip("the README's commands use the default ports 8000-8003 and 3000, and one is taken here")


def test_every_readme_command_is_run_by_a_test_or_marked_as_needing_aws() -> None:
    assert sorted(commands_run_by_tests()) == sorted(RUN_BY)


def _section(title: str) -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return readme.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_is_laid_out_for_a_newcomer_and_shorter_than_before() -> None:
    """Shaped like the ecosystem's READMEs, in this order, at most 1,200 words; the
    reference material in docs/."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    titles = [line[3:] for line in readme.splitlines() if line.startswith("## ")]
    assert titles == [
        "Prerequisites",
        "Quick start",
        "What you can try",
        "Local development",
        "Deploy",
        "Clean up",
        "Tests",
        "Troubleshooting",
        "Where the docs are",
    ]
    assert "docs/architecture.md" in readme.split("## Prerequisites")[0]  # the picture, before anything to do
    assert "| to | you need |" in _section("Prerequisites")
    assert len([line for line in _section("What you can try").splitlines() if line.startswith("- ")]) == 5
    assert "sam delete" in _section("Clean up")
    assert len(readme.split()) <= 1_200  # it once held 2,464 words
    assert (REPO / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    for link in re.findall(r"\]\(((?:docs/)?[\w./-]+)\)", readme):  # every link of the README leads somewhere
        assert (REPO / link).exists(), link


def test_the_test_suites_duration_is_stated_with_its_command() -> None:
    for section in (_section("Quick start"), _section("Tests")):
        assert re.search(r"about \d+ minutes", section)
        assert "uv run pytest" in section


def test_the_deploy_section_says_python_3_13_before_sam_build() -> None:
    deploy = _section("Deploy")
    assert deploy.index("Python 3.13 on PATH as `python3.13`") < deploy.index("sam build\n")
    assert "python3.13: command not found" in _section("Troubleshooting")


def test_the_setup_lines_install_uv_where_pip_is_refused(tmp_path: Path) -> None:
    """In a fresh HOME, with pip refusing to install outside a virtual environment (as PEP 668 makes
    a system Python do), the two lines give a working `uv` on PATH."""
    lines = [line for line, test in RUN_BY.items() if test == SETUP]
    script = "\n".join(["set -e", *lines, "command -v uv", "uv --version"])
    completed = subprocess.run(  # noqa: S603 - the README's own lines
        ["bash", "-c", script],  # noqa: S607 - the system's bash
        capture_output=True, text=True, timeout=600, check=False,
        env={"HOME": str(tmp_path), "PATH": os.environ["PATH"], "PIP_REQUIRE_VIRTUALENV": "true",
             **{k: v for k, v in os.environ.items() if k.startswith(("PIP_INDEX", "PIP_EXTRA", "PYENV"))}},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert completed.stdout.splitlines()[-2] == str(tmp_path / ".uv" / "bin" / "uv")
    assert completed.stdout.splitlines()[-1].startswith("uv ")


BREAK = re.compile(r"after a break \((\d+) minutes,\s+`CONVERSATION_GAP_S`\)")
SOONER = re.compile(r"`(CONVERSATION_GAP_S=(\d+) uv run python -m infra\.chat)`")


def test_the_readmes_break_is_the_gap_the_settings_use() -> None:
    minutes = BREAK.search((REPO / "README.md").read_text(encoding="utf-8"))
    assert minutes is not None, "the README says how long a break is"
    assert int(minutes[1]) * 60 == Settings.model_fields["conversation_gap_s"].default


@pytest.mark.slow
def test_the_readmes_one_minute_break_brings_the_welcome_back(tmp_path: Path) -> None:
    """The README's one-liner, run as written: straight after the first chat the coach goes on;
    after the break it names, it says "Welcome back"."""
    sooner = SOONER.search((REPO / "README.md").read_text(encoding="utf-8"))
    assert sooner is not None
    here = sandbox(tmp_path)
    first = run_line(f"{sooner[1]} --script -", here, stdin="Hi\nbeginner\n")
    assert first.returncode == 0, first.stderr[-2000:]
    at_once = run_line(f"{sooner[1]} --script -", here, stdin="what now?\n")
    assert "Welcome back" not in at_once.stdout, at_once.stdout
    time.sleep(int(sooner[2]) + 1)
    later = run_line(f"{sooner[1]} --script -", here, stdin="Hi\n")
    assert later.returncode == 0, later.stderr[-2000:]
    assert "Welcome back" in later.stdout, later.stdout


def test_the_quick_start_chat_prints_what_the_readme_shows(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    shown = readme.split("uv run python -m infra.chat\n```\n\n```\n", 1)[1].split("```", 1)[0].splitlines()
    completed = run_line(readme_line("uv run python -m infra.chat"), sandbox(tmp_path), stdin="Hi\nbeginner\n")
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.splitlines()[0] == shown[0]
    for line in shown[1:]:
        if line.startswith("coach> "):
            assert line in completed.stdout
    assert (tmp_path / ".local" / "dynamodb.jsonl").exists()


def test_the_flags_chat_command_as_written(tmp_path: Path) -> None:
    """The rollout line: the chat with the 10 % file. local-user's bucket (49) is outside the 10 %,
    so the second turn is single-prompt: the coach does not know the first answer."""
    completed = run_line(
        readme_line("uv run python -m infra.chat --flags"), sandbox(tmp_path), stdin="Hi\nI'm a beginner\nhello\n"
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    replies = [line.split("coach> ", 1)[1] for line in completed.stdout.splitlines() if "coach> " in line]
    assert len(replies) == 3
    assert replies[1] == replies[0]  # the answer "beginner" unknown in the next turn: the first question again
    assert "can't reach my notes" not in completed.stdout  # an arm, not a fault


@pytest.mark.usefixtures("default_ports")
def test_the_local_development_commands_as_written(tmp_path: Path) -> None:
    here = sandbox(tmp_path)
    lines = [line for line, test in RUN_BY.items() if test == LOCAL]
    stack = start_line(readme_line("uv run python -m infra.local_stack"), here)
    try:
        banner = read_until(stack, b"Ctrl-C stops it and saves the table.").decode()
        assert banner.startswith("Local stack running. API: http://127.0.0.1:3000 (OpenAPI at")
        outputs: dict[str, str] = {}
        errors: dict[str, str] = {}
        code = ""
        for line in lines:
            if "infra.local_stack" in line:
                continue
            completed = run_line(line.replace("<code>", code), here, stdin="")
            assert completed.returncode == 0, f"{line}: {completed.stderr[-2000:]}"
            outputs[line], errors[line] = completed.stdout, completed.stderr
            if "/phone-links" in line:
                code = json.loads(completed.stdout)["code"]
        chat = outputs[readme_line("curl -N")]
        assert chat.count("event: chunk") > 1
        assert "event: done" in chat
        assert len(json.loads(outputs[readme_line("curl -H 'Authorization: Bearer me' 'http")])["messages"]) == 2
        assert "coach (SMS)>" in outputs[readme_line('uv run python -m infra.sms "Hi coach"')]
        assert json.loads(outputs[readme_line("curl -H 'Authorization: Bearer me' http://127.0.0.1:3000/phones")]) == {
            "phones": ["+15551230001"]
        }
        assert json.loads(outputs[readme_line("curl -X DELETE")])["total"] > 0
        for line in lines:
            if "infra.invoke" in line:  # the API and the webhook answer 200; the worker fails no record
                assert '"statusCode": 200' in outputs[line] or '"batchItemFailures": []' in outputs[line], line
        assert outputs[readme_line("uv run python -m infra.inspect_prompt")].startswith("Step: fitness_assessment")
        # the operator's read is in the audit trail, on stderr (and no other log line is).
        inspect_errors = errors[readme_line("uv run python -m infra.inspect_prompt")].splitlines()
        audit = [json.loads(line) for line in inspect_errors if line.startswith("{")]
        # (Two reads: the memory, then the recall index.)
        assert [(entry["message"], entry["who"], entry["whose"]) for entry in audit] == [
            ("Context access", "command:infra.inspect_prompt", "local-user")
        ] * 2
        assert "what_recalled" in audit[1]
        # A new user's first message that answers the first question is kept, not asked again.
        first = outputs[readme_line('echo "I')]
        assert "fitness level: “I'm a beginner”" in first
        assert "beginner, intermediate or advanced" not in first
    finally:
        stack.send_signal(signal.SIGINT)
        _, stderr = stack.communicate(timeout=60)
    assert stack.returncode == 0, stderr.decode()[-2000:]
    assert (here / ".local" / "dynamodb.jsonl").stat().st_size > 0
    assert not (here / ".local" / "dynamodb.stack.json").exists()


@pytest.mark.usefixtures("default_ports")
def test_the_console_command_as_written(tmp_path: Path) -> None:
    """The console's line as the README writes it: its page answers where the comment says, and
    Ctrl-C stops it cleanly and saves the table (what it shares with `infra.local_stack`)."""
    here = sandbox(tmp_path)
    console = start_line(readme_line("uv run python -m infra.console"), here)
    try:
        banner = read_until(console, b"Ctrl-C stops it and saves the table").decode()
        # The banner is the first thing printed: the servers' start-up logs go to the log file.
        assert banner.startswith("Memory console: http://127.0.0.1:3000/console/\n"), banner[:500]
        inspect = run_line("uv run python -m infra.inspect_prompt local-user", here)
        assert inspect.returncode == 0, inspect.stderr[-2000:]
        assert f"Using the local stack (pid {console.pid}) that infra.console started" in inspect.stderr
        page = httpx.get("http://127.0.0.1:3000/console/", timeout=30)
        assert page.status_code == 200
        assert "text/html" in page.headers["content-type"]
        chat = httpx.post(
            "http://127.0.0.1:3000/chat",
            json={"message": "Hi"},
            headers={"Authorization": "Bearer me", "Accept": "text/event-stream"},
            timeout=60,
        )
        assert "event: done" in chat.text
    finally:
        console.send_signal(signal.SIGINT)
        _, stderr = console.communicate(timeout=60)
    assert console.returncode == 0, stderr.decode()[-2000:]
    assert (here / ".local" / "dynamodb.jsonl").stat().st_size > 0


def _run(*arguments: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own interpreter and modules
        [sys.executable, "-m", *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=180,
        check=False,
    )


def _chat(data_file: Path, stdin: str, *extra: str) -> str:
    completed = _run("infra.chat", "--data-file", str(data_file), "--chunk-delay", "0", *extra, stdin=stdin)
    assert completed.returncode == 0, completed.stderr[-2000:]
    return completed.stdout


def test_the_coach_remembers_across_restarts(tmp_path: Path) -> None:
    data_file = tmp_path / "memory.jsonl"
    first = _chat(data_file, "Hi\nAdvanced\n", "--script", "-")
    assert first.count("coach> ") == 2
    assert first.rstrip().endswith(QUESTIONS[1])
    # A new process, the same data file: the coach asks the next thing and recaps what it was told.
    second = _chat(data_file, "I row 3 times a week\nwhat do you know about me?\n", "--script", "-")
    assert QUESTIONS[0] not in second
    assert "fitness level: Advanced; current activity: I row 3 times a week" in second
    assert second.rstrip().endswith(QUESTIONS[2])


def test_reset_forgets(tmp_path: Path) -> None:
    data_file = tmp_path / "memory.jsonl"
    _chat(data_file, "Hi\nAdvanced\n", "--script", "-")
    after_reset = _chat(data_file, "Hello again\n", "--script", "-", "--reset")
    assert after_reset.rstrip().endswith(QUESTIONS[0])


def test_user_ids_keep_separate_memories(tmp_path: Path) -> None:
    data_file = tmp_path / "memory.jsonl"
    _chat(data_file, "Hi\nAdvanced\n", "--script", "-", "--user", "ana")
    other = _chat(data_file, "Hi\n", "--script", "-", "--user", "ben")
    assert other.rstrip().endswith(QUESTIONS[0])


def test_script_from_a_file_and_interactive_stdin(tmp_path: Path) -> None:
    script = tmp_path / "messages.txt"
    script.write_text("Hi\n\nBeginner 🧘\n", encoding="utf-8")
    from_file = _chat(tmp_path / "a.jsonl", "", "--script", str(script))
    assert "you> Beginner 🧘" in from_file
    assert from_file.count("coach> ") == 2
    interactive = _chat(tmp_path / "b.jsonl", "Hi\n/quit\nnever sent\n")
    assert interactive.count("coach> ") == 1
    assert "never sent" not in interactive


def test_a_rejected_message_is_reported_and_the_exit_code_says_so(tmp_path: Path) -> None:
    completed = _run(
        "infra.chat",
        "--data-file",
        str(tmp_path / "m.jsonl"),
        "--chunk-delay",
        "0",
        "--script",
        "-",
        stdin="x" * 40_000 + "\n",
    )
    assert completed.returncode == 1
    assert "[not sent: message is 40000 bytes of UTF-8; the limit is 32768]" in completed.stdout


def test_the_reply_streams_token_by_token(tmp_path: Path) -> None:
    """The reply reaches the terminal in many separate writes, not at once at the end."""
    process = subprocess.Popen(  # noqa: S603
        [
            sys.executable,
            "-m",
            "infra.chat",
            "--data-file",
            str(tmp_path / "m.jsonl"),
            "--chunk-delay",
            "0.05",
            "--script",
            "-",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(b"Hi\n")
    process.stdin.close()
    reads: list[bytes] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (chunk := os.read(process.stdout.fileno(), 65536)):
        reads.append(chunk)
    assert process.wait(timeout=60) == 0
    output = b"".join(reads).decode()
    assert output.rstrip().endswith(QUESTIONS[0])
    reads_after_prompt = len(reads) - next(i for i, r in enumerate(reads) if b"coach> " in b"".join(reads[: i + 1]))
    assert reads_after_prompt >= 5


def test_invoke_the_api_function_with_an_event_file(tmp_path: Path) -> None:
    completed = _run(
        "infra.invoke", "ApiFunction", "-e", "events/api_chat.json", "--data-file", str(tmp_path / "m.jsonl")
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    response = json.loads(completed.stdout[completed.stdout.index("{\n") :])
    assert response["statusCode"] == 200
    body = json.loads(response["body"])
    # The event's message answers the first two questions ("Hi! I'm a beginner and I walk about 5 km
    # most days."): each kept under its own item, without the greeting, and the third asked.
    assert body["reply"].startswith("Noted your fitness level: “I'm a beginner”; current activity: “I walk about 5 km")
    assert body["reply"].endswith(QUESTIONS[2])
    assert body["userMessageId"]
    assert body["assistantMessageId"]


def test_the_standalone_stack_serves_another_process_and_saves_on_sigterm(tmp_path: Path) -> None:
    """What `sam local invoke --env-vars events/env.local.json` relies on, minus the container.
    Every port is left to the stack (0): the banner says which it got."""
    data_file = tmp_path / "standalone.jsonl"
    stack = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "infra.local_stack", "--data-file", str(data_file),
         *(argument for option in STACK_PORT_OPTIONS for argument in (option, "0"))],
        stdout=subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    try:
        banner = read_until(stack, b"Ctrl-C stops it and saves the table.").decode()
        assert banner.startswith("Local stack running")
        ports = ports_in_banner(banner)
        dynamodb_port, bedrock_port, api_port, twilio_port = (
            ports[n] for n in ("dynamodb", "bedrock", "api", "twilio")
        )
        environment = {
            **os.environ,
            "AWS_ENDPOINT_URL_DYNAMODB": f"http://127.0.0.1:{dynamodb_port}",
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": f"http://127.0.0.1:{bedrock_port}",
            "TABLE_NAME": "onboarding-memory-local",
            # Signed as the function, as events/env.local.json tells a container: the stack checks its policy.
            "AWS_ACCESS_KEY_ID": json.loads((REPO / "events" / "env.local.json").read_text())["ApiFunction"][
                "AWS_ACCESS_KEY_ID"
            ],
        }
        completed = subprocess.run(
            [sys.executable, "-m", "infra.invoke", "ApiFunction", "-e", "events/api_chat.json", "--aws"],
            capture_output=True, text=True, cwd=REPO, env=environment, timeout=120, check=False,
        )  # fmt: skip
        assert completed.returncode == 0, completed.stderr[-2000:]
        assert '"statusCode": 200' in completed.stdout
        # The same stack serves the API routes over HTTP, as `sam local start-api` would.
        streamed = httpx.post(
            f"http://127.0.0.1:{api_port}/chat",
            json={"message": "Hi"},
            headers={"Authorization": "Bearer standalone-user", "Accept": "text/event-stream"},
            timeout=60,
        )
        assert streamed.status_code == 200
        assert streamed.text.count("event: chunk") > 1
        assert "event: done" in streamed.text
        # And the SMS path: a signed webhook, the queue, the worker, the Twilio stand-in.
        texted = subprocess.run(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "infra.sms", "Hi coach", "--from", "+15551239999",
             "--api", f"http://127.0.0.1:{api_port}", "--twilio", f"http://127.0.0.1:{twilio_port}"],
            capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
        )  # fmt: skip
        assert texted.returncode == 0, texted.stderr[-2000:]
        assert "coach (SMS)> Hi, I'm your coach!" in texted.stdout
    finally:
        stack.send_signal(signal.SIGTERM)
        assert stack.wait(timeout=60) == 0
    saved = [json.loads(line) for line in data_file.read_text(encoding="utf-8").splitlines()]
    roles = [item["role"]["S"] for item in saved if "role" in item]
    # Three turns saved (the event's message is an answer: its tool call and result are saved too).
    assert roles.count("user") == 3
    assert len([item for item in saved if item.get("role", {}).get("S") == "assistant" and item.get("content")]) >= 3


def test_aws_mode_without_a_table_says_what_to_set() -> None:
    environment = {name: value for name, value in os.environ.items() if name != "TABLE_NAME"}
    completed = subprocess.run(
        [sys.executable, "-m", "infra.chat", "--aws"],
        input="", capture_output=True, text=True, cwd=REPO, env=environment, timeout=60, check=False,
    )  # fmt: skip
    assert completed.returncode == 2
    assert "configuration is incomplete or invalid (TABLE_NAME)" in completed.stderr  # the variable to set


def test_texting_without_a_running_stack_says_how_to_start_it() -> None:
    with unanswered_port() as api, unanswered_port() as twilio:
        completed = _run(
            "infra.sms", "hi", "--api", f"http://127.0.0.1:{api}", "--twilio", f"http://127.0.0.1:{twilio}"
        )
    assert completed.returncode == 2
    assert "uv run python -m infra.local_stack" in completed.stderr
