"""The README's run command and the Docker-less invoke, run as a person would: new processes."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from infra.local_stack import free_port
from onboarding.llm.prompts import STEP_PROMPTS
from onboarding.model.state import OnboardingAgentType

REPO = Path(__file__).resolve().parents[2]
QUESTIONS = [field.question for field in STEP_PROMPTS[OnboardingAgentType.FITNESS_ASSESSMENT].fields]


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
    # A new process, the same data file: the coach quotes what it was told and asks the next thing.
    second = _chat(data_file, "I row 3 times a week\n", "--script", "-")
    assert "“Advanced”" in second
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
    assert body["reply"].endswith(QUESTIONS[0])
    assert body["userMessageId"]
    assert body["assistantMessageId"]


def test_the_standalone_stack_serves_another_process_and_saves_on_sigterm(tmp_path: Path) -> None:
    """What `sam local invoke --env-vars events/env.local.json` relies on, minus the container."""
    data_file = tmp_path / "standalone.jsonl"
    dynamodb_port, bedrock_port, api_port, twilio_port = free_port(), free_port(), free_port(), free_port()
    stack = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "infra.local_stack", "--data-file", str(data_file),
         "--dynamodb-port", str(dynamodb_port), "--bedrock-port", str(bedrock_port),
         "--api-port", str(api_port), "--twilio-port", str(twilio_port)],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        assert stack.stdout is not None
        assert "Local stack running" in stack.stdout.readline()
        environment = {
            **os.environ,
            "AWS_ENDPOINT_URL_DYNAMODB": f"http://127.0.0.1:{dynamodb_port}",
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": f"http://127.0.0.1:{bedrock_port}",
            "TABLE_NAME": "onboarding-memory-local",
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
    roles = sorted(item["role"]["S"] for item in saved if "role" in item)
    assert roles == ["assistant"] * 3 + ["user"] * 3


def test_aws_mode_without_a_table_says_what_to_set() -> None:
    environment = {name: value for name, value in os.environ.items() if name != "TABLE_NAME"}
    completed = subprocess.run(
        [sys.executable, "-m", "infra.chat", "--aws"],
        input="", capture_output=True, text=True, cwd=REPO, env=environment, timeout=60, check=False,
    )  # fmt: skip
    assert completed.returncode == 2
    assert "configuration is incomplete or invalid (table_name)" in completed.stderr


def test_texting_without_a_running_stack_says_how_to_start_it() -> None:
    completed = _run(
        "infra.sms", "hi", "--api", f"http://127.0.0.1:{free_port()}", "--twilio", f"http://127.0.0.1:{free_port()}"
    )
    assert completed.returncode == 2
    assert "uv run python -m infra.local_stack" in completed.stderr
