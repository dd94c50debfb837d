"""The cost ledger: what a turn costs in dollars, measured on the local stack and priced at list
prices (infra/local/prices.py, which the console shares), beside LangChain's
DynamoDBChatMessageHistory and AgentCore Memory.

- capacity.py: DynamoDB's documented capacity rules (item sizes, request units);
- meter.py: botocore hooks that count each request of a turn and compute its request units;
- turns.py: measured turns through the functions of template.yaml (app, SMS, and the peer);
- ledger.py: the arithmetic from measured turns to dollars per 1,000 turns;
- report.py: cost.md, cost.json and cost.png;
- __main__.py: `uv run python -m infra.cost [--quick] [--out DIR]`.
"""
