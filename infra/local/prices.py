"""The list prices the cost ledger (infra.cost) and the console's per-turn model cost multiply by: one
dated table, each price with its source, kept as data in infra/local/prices.toml (whose header says
where each figure was read and how to change them)."""

import tomllib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Price:
    key: str
    what: str
    usd: float  # dollars for `per` units
    per: float
    unit: str
    source: str
    seen: str

    @property
    def each(self) -> float:
        """Dollars for one unit."""
        return self.usd / self.per


_TABLE = tomllib.loads((Path(__file__).parent / "prices.toml").read_text(encoding="utf-8"))
CHECKED: str = _TABLE["checked"]
REGION: str = _TABLE["region"]
PRICES: tuple[Price, ...] = tuple(Price(**entry) for entry in _TABLE["price"])


class UnknownModelError(ValueError):
    """The configured model has no price in this table."""


def price(key: str) -> Price:
    for entry in PRICES:
        if entry.key == key:
            return entry
    raise KeyError(f"no price {key!r} in infra/local/prices.toml")


def model_prices(model_id: str) -> tuple[Price, Price]:
    """(input, output) token prices of a Bedrock model id or inference profile id."""
    if "anthropic.claude-haiku-4-5" not in model_id:
        raise UnknownModelError(
            f"infra/local/prices.toml has no token prices for the model {model_id!r} (BEDROCK_MODEL_ID); "
            "add them, with their source, and to model_prices in infra/local/prices.py"
        )
    scope = "global" if model_id.startswith("global.") else "geo"
    return price(f"bedrock_haiku_4_5_input_{scope}"), price(f"bedrock_haiku_4_5_output_{scope}")
