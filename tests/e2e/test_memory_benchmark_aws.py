"""The memory benchmark's --aws path, end to end without AWS: a new process runs
`python -m infra.memory_benchmark --aws` with the standard `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`
pointed at a Bedrock emulator this test owns (the real client, no test-only branch). The coach's
turns and the judge's calls both reach it; the prompts are captured where they leave the process;
each answer is judged (the emulator's judge is a deterministic test double) and the verdicts,
an unparseable one included, are aggregated by category in the JSON and the report."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.bench.memory_benchmark import __main__ as benchmark
from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.bedrock_emulator.judge_prompt import JUDGE_SYSTEM_PROMPT

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
# Real ids (langchain-aws reads the provider from them), neither the project's default.
COACH, JUDGE = "anthropic.claude-3-5-haiku-20241022-v1:0", "anthropic.claude-3-haiku-20240307-v1:0"
TINY = [
    {
        "sample_id": "tiny",
        "conversation": {
            "speaker_a": "Client",
            "speaker_b": "Coach",
            "session_1_date_time": "10:00 am on 6 January, 2025",
            "session_1": [
                {"speaker": "Client", "dia_id": "D1:1", "text": "Hi! Call me Sam"},
                {"speaker": "Client", "dia_id": "D1:2", "text": "I'm a beginner"},
                {"speaker": "Client", "dia_id": "D1:3", "text": "I walk my dog every day"},
            ],
        },
        "qa": [
            # The local coach greets by name: the double judges it CORRECT.
            {"question": "What do you call me?", "answer": "Sam", "evidence": ["D1:1"], "category": 4},
            # Asked after the last session (a new conversation), the local coach recaps what it knows: CORRECT.
            {"question": "What is my fitness level?", "answer": "beginner", "evidence": ["D1:2"], "category": 4},
            # Abstention: the coach does not say it was never told: WRONG.
            {
                "question": "What is the name of my cat?",
                "adversarial_answer": "Whiskers",
                "evidence": [],
                "category": 5,
            },
            # A gold answer with nothing to compare: the double names no label (unparseable).
            {"question": "What do I do every day?", "answer": "-", "evidence": ["D1:3"], "category": 3},
        ],
    }
]


def test_the_aws_path_judges_each_answer_and_counts_an_unparseable_verdict_as_wrong(tmp_path: Path) -> None:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY), encoding="utf-8")
    out = tmp_path / "out"
    with BedrockEmulator() as bedrock:
        env = {
            **os.environ,
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": bedrock.url,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",  # any: the emulator and the local servers accept them
            "AWS_REGION": "eu-west-1",  # not the local default: the local tables follow it
            "BEDROCK_MODEL_ID": COACH,
        }
        env.pop("AWS_SESSION_TOKEN", None)
        completed = subprocess.run(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "infra.memory_benchmark", "--aws", "--data", str(data), "--out", str(out),
             "--judge-model", JUDGE],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        requests = bedrock.requests
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    saved = json.loads((out / "memory-benchmark.json").read_text(encoding="utf-8"))
    verdicts = [q["verdict"] for q in saved["questions"]["LoCoMo"]]
    assert verdicts == ["CORRECT", "CORRECT", "WRONG", "unparseable"]
    found = saved["figures"]
    assert found["answer_accuracy"]["LoCoMo"] == {
        "judged": 4,
        "correct": 2,
        "unparseable": 1,
        "failed": 0,
        "by_category": {
            "adversarial": {"questions": 1, "correct": 0, "unparseable": 0, "failed": 0},
            "open-domain": {"questions": 1, "correct": 0, "unparseable": 1, "failed": 0},
            "single-hop": {"questions": 2, "correct": 2, "unparseable": 0, "failed": 0},
        },
    }
    assert (found["mode"], found["coach_model"], found["judge_model"]) == ("aws", COACH, JUDGE)
    # The real turn path's requests went to the endpoint the environment names, and were captured
    # there for scoring as offline: every answerable question's evidence was in a recorded prompt.
    judge_calls = [r for r in requests if r.system_text == JUDGE_SYSTEM_PROMPT]
    coach_calls = [r for r in requests if r.body.get("toolConfig")]
    assert len(judge_calls) == 4
    assert {r.model_id for r in judge_calls} == {JUDGE}
    assert all(r.body["inferenceConfig"]["temperature"] == 0 for r in judge_calls)
    assert coach_calls
    assert {r.model_id for r in coach_calls} == {COACH}
    tiny = found["datasets"]["LoCoMo"]
    assert tiny["ours"]["strict"] == tiny["answerable"] == 3
    assert tiny["ours"]["abstention_clean"] == 1
    report = (out / "memory-benchmark.md").read_text(encoding="utf-8")
    assert (
        f"Answer accuracy, LLM judge ({JUDGE}; an unparseable verdict or a failed call counts as wrong): 50.0 % (2/4)"
        in report
    )
    assert "| open-domain | 1 | 0 | 1 | 0 | 0.0 % |" in report


def test_aws_without_credentials_says_what_it_needs_and_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    assert benchmark.main(["--aws", "--quick", "--out", str(tmp_path / "out")]) == 2
    assert "--aws needs AWS credentials" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
