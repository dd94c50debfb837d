"""Issue 19, item 8: the local stack's log lines name the function that wrote them. Every function
shares one process locally, and a line of the API used to carry the SMS worker's name once a text
had been answered."""

import json
from pathlib import Path

import httpx

from tests.support.processes import run, running_stack


def test_after_a_text_the_apis_lines_still_name_the_api(tmp_path: Path) -> None:
    data_file = tmp_path / "d.jsonl"
    with running_stack(data_file) as stack:
        texted = run("infra.sms", "Hi coach", "--data-file", str(data_file))
        assert "coach (SMS)>" in texted.stdout, texted.stderr[-2000:]
        answered = httpx.post(
            f"{stack.api_url}/chat", json={"message": "Hi"}, headers={"Authorization": "Bearer me"}, timeout=60
        )
        assert answered.status_code == 200
        stack.stop()
    lines = [json.loads(line) for line in stack.stdout.splitlines() if line.startswith('{"level"')]
    names = {line["message"]: line.get("function_name") for line in lines}
    assert names["Reply sent"] == "SmsWorkerFunction"
    assert names["Turn completed"] == "ApiFunction"
