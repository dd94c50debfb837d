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


def test_the_dollar_table_names_every_line_whole_within_100_columns() -> None:
    """The headers were cut to 14 characters ("Lambda duratio") in a 150-column row."""
    from infra.bench.cost.ledger import LINES, Comparison

    comparisons = [
        Comparison(history, {line: 0.12345 * (i + 1) for i, line in enumerate(LINES)}, 0.01, None, 0.5, None)
        for history in (20, 1_000, 10_000, 100_000, 200_000, 500_000)
    ]
    rows = cost.dollar_table(comparisons)
    assert max(len(row) for row in rows) <= 100
    for line in (*LINES, "total"):
        assert any(row.startswith(line + " ") for row in rows), line  # the whole name
    assert rows[0].split()[-6:] == ["20", "1,000", "10,000", "100,000", "200,000", "500,000"]
    assert len({len(row) for row in rows}) == 1  # the columns line up under their history
    total = next(row for row in rows if row.startswith("total"))
    assert float(total.split()[1]) == pytest.approx(comparisons[0].total, abs=1e-4)
