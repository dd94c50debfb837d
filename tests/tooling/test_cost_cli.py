"""`python -m infra.cost` refuses bad input by name, before it starts a stack or measures anything."""

from pathlib import Path

import pytest

import infra.bench.cost.__main__ as cost


@pytest.fixture(autouse=True)
def no_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the stack started on bad input")

    monkeypatch.setattr(cost, "LocalStack", refuse)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--sms-share", "1.5"], "error: the SMS share is a fraction between 0 and 1"),
        (["--model-seconds", "-1"], "error: the model's seconds per request cannot be negative"),
    ],
)
def test_a_bad_assumption_is_refused_by_name(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cost.main([*argv, "--out", str(tmp_path)]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "cost.json").exists()


def test_a_model_without_a_price_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BEDROCK_MODEL_ID", "amazon.nova-lite-v1:0")
    assert cost.main(["--out", str(tmp_path)]) == 2
    assert "no token prices for the model 'amazon.nova-lite-v1:0' (BEDROCK_MODEL_ID)" in capsys.readouterr().err
