"""The list prices the cost ledger (infra.cost) and the console's per-turn model cost multiply by: one
dated table, each price with its source.

US East (N. Virginia), on demand, without free tiers, Savings Plans or volume tiers beyond the
first (each price below is its service's first tier, where a month of this app's traffic stays).
`source` is the price page to check a price against; `seen` says where the figure was read on
`CHECKED` (the official page itself, or, where the stored copy of it had no figures, the dated
secondary pages that quote it, which agree with each other). Prices change: re-check them and
change this table, its date and docs/cost.md together.
"""

from dataclasses import dataclass

CHECKED = "2026-11-25"
REGION = "us-east-1"


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


LAMBDA_PAGE = "https://aws.amazon.com/lambda/pricing/"
APIGW_PAGE = "https://aws.amazon.com/api-gateway/pricing/"
DYNAMODB_PAGE = "https://aws.amazon.com/dynamodb/pricing/on-demand/"
SQS_PAGE = "https://aws.amazon.com/sqs/pricing/"
BEDROCK_PAGE = "https://aws.amazon.com/bedrock/pricing/"
AGENTCORE_PAGE = "https://aws.amazon.com/bedrock/agentcore/pricing/"

PRICES: tuple[Price, ...] = (
    Price(
        "lambda_gb_second_arm64",
        "Lambda duration, Arm (arm64), first 7.5 billion GB-s a month",
        0.0000133334,
        1,
        "GB-second",
        LAMBDA_PAGE,
        "the page's stored copy lists duration by memory; the Arm rate as quoted by cloudchipr.com "
        "(2024) and the lambda_local_runner cost notes (2025)",
    ),
    Price(
        "lambda_request",
        "Lambda requests (invocations), either architecture",
        0.20,
        1_000_000,
        "requests",
        LAMBDA_PAGE,
        "the same secondary pages",
    ),
    Price(
        "apigw_rest_request",
        "API Gateway REST API requests, first 333 million a month; a streamed response is one request "
        "per 10 MB (response streaming did not change the price)",
        3.50,
        1_000_000,
        "requests",
        APIGW_PAGE,
        "the AWS whitepaper 'Best practices for designing Amazon API Gateway private APIs' (table 4); the "
        "streaming rule from AWS's Compute Blog post of 2025-11-19, 'Building responsive APIs with Amazon "
        "API Gateway response streaming', as aws-news.com summarises it",
    ),
    Price(
        "dynamodb_read_request_unit",
        "DynamoDB on-demand read request units (Standard table class)",
        0.125,
        1_000_000,
        "read request units",
        DYNAMODB_PAGE,
        "airbyte.com's DynamoDB pricing guide (2025-07-21), after the on-demand price cut of 2024-11",
    ),
    Price(
        "dynamodb_write_request_unit",
        "DynamoDB on-demand write request units (Standard table class)",
        0.625,
        1_000_000,
        "write request units",
        DYNAMODB_PAGE,
        "the same",
    ),
    Price(
        "dynamodb_storage_gb_month",
        "DynamoDB storage (Standard table class), beyond the first 25 GB; every item counts 100 bytes more",
        0.25,
        1,
        "GB-month",
        DYNAMODB_PAGE,
        "the pricing overview page ('Pricing at a glance'); the 100 bytes from the Developer Guide's "
        "'DynamoDB item sizes and formats'",
    ),
    Price(
        "sqs_fifo_request",
        "SQS FIFO requests (each 64 KB of a payload is one request), first 100 billion a month",
        0.50,
        1_000_000,
        "requests",
        SQS_PAGE,
        "factualminds.com (2026-06-13) and cloudburn.io (2026-03-14), both US East",
    ),
    Price(
        "bedrock_haiku_4_5_input_geo",
        "Claude Haiku 4.5 on-demand input tokens, a geographic cross-Region profile (us., eu., ...) or "
        "in-Region: 10 % above the global profile",
        0.0011,
        1_000,
        "input tokens",
        BEDROCK_PAGE,
        "clauder-navi.com's Bedrock Claude pricing ($1 / $5 per million, regional 10 % higher); the "
        "Bedrock User Guide's 'Global cross-Region inference' (global about 10 % below geographic)",
    ),
    Price(
        "bedrock_haiku_4_5_output_geo",
        "Claude Haiku 4.5 on-demand output tokens, geographic or in-Region",
        0.0055,
        1_000,
        "output tokens",
        BEDROCK_PAGE,
        "the same",
    ),
    Price(
        "bedrock_haiku_4_5_input_global",
        "Claude Haiku 4.5 on-demand input tokens, the global cross-Region profile (global.)",
        0.001,
        1_000,
        "input tokens",
        BEDROCK_PAGE,
        "the same",
    ),
    Price(
        "bedrock_haiku_4_5_output_global",
        "Claude Haiku 4.5 on-demand output tokens, the global cross-Region profile",
        0.005,
        1_000,
        "output tokens",
        BEDROCK_PAGE,
        "the same",
    ),
    Price(
        "agentcore_memory_event",
        "Amazon Bedrock AgentCore Memory, short-term memory: new events stored",
        0.25,
        1_000,
        "events",
        AGENTCORE_PAGE,
        "factualminds.com's AgentCore pricing (2026-06-13) and the AgentCore cost notes citing the page",
    ),
    Price(
        "agentcore_memory_retrieval",
        "AgentCore Memory, long-term memory: retrievals of memory records",
        0.50,
        1_000,
        "retrievals",
        AGENTCORE_PAGE,
        "the same",
    ),
    Price(
        "agentcore_memory_record_month",
        "AgentCore Memory, long-term memory: records stored a month (built-in strategies; their "
        "extraction model included)",
        0.75,
        1_000,
        "record-months",
        AGENTCORE_PAGE,
        "the same",
    ),
)


class UnknownModelError(ValueError):
    """The configured model has no price in this table."""


def price(key: str) -> Price:
    for entry in PRICES:
        if entry.key == key:
            return entry
    raise KeyError(f"no price {key!r} in infra/local/prices.py")


def model_prices(model_id: str) -> tuple[Price, Price]:
    """(input, output) token prices of a Bedrock model id or inference profile id."""
    if "anthropic.claude-haiku-4-5" not in model_id:
        raise UnknownModelError(
            f"infra/local/prices.py has no token prices for the model {model_id!r} (BEDROCK_MODEL_ID); "
            "add them, with their source, to PRICES and model_prices"
        )
    scope = "global" if model_id.startswith("global.") else "geo"
    return price(f"bedrock_haiku_4_5_input_{scope}"), price(f"bedrock_haiku_4_5_output_{scope}")
