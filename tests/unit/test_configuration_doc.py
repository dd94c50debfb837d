"""docs/configuration.md names every environment variable the settings read, with its default,
and every parameter of the template: the reference cannot drift from the code."""

import re
from pathlib import Path

import pytest

from infra.local.template import load_template
from onboarding.config import Limits, Settings, WebhookSettings, WorkerSettings

DOC = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text(encoding="utf-8")


def _row(variable: str) -> str:
    """The table row whose first column names `variable`."""
    return next(line for line in DOC.splitlines() if line.startswith("|") and f"`{variable}`" in line.split("|")[1])


@pytest.mark.parametrize(
    "variable",
    sorted({variable for cls in (Settings, WebhookSettings, WorkerSettings) for variable in cls.env_names().values()}),
)
def test_every_environment_variable_is_documented(variable: str) -> None:
    assert f"`{variable}`" in DOC, variable


@pytest.mark.parametrize("field", sorted(name for name in Limits.env_names() if name != "reset_keywords"))
def test_each_limits_documented_default_is_the_codes(field: str) -> None:
    """In a row naming two variables `A` / `B`, the defaults are `x / y` in the same order."""
    variable = Limits.env_names()[field]
    row = _row(variable)
    names = re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split("|")[1])
    defaults = [d.strip() for d in row.split("|")[2].split("/")]
    default = defaults[names.index(variable)]
    value = Limits.model_fields[field].default
    if isinstance(value, str):  # a word (`hybrid`), in backticks as the doc writes a value
        assert default == f"`{value}`", (variable, default, value)
    else:
        assert float(default) == float(value), (variable, default, value)


@pytest.mark.parametrize("parameter", sorted(load_template()["Parameters"]))
def test_every_template_parameter_is_documented(parameter: str) -> None:
    assert f"`{parameter}`" in DOC, parameter
