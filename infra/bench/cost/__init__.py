"""The cost ledger: what a turn costs in dollars, measured on the local stack and priced at list
prices (infra/local/prices.py, which the console shares), beside LangChain's
DynamoDBChatMessageHistory and AgentCore Memory.

- meter.py: DynamoDB's documented capacity rules, and the botocore hooks that count each request
  of a turn and compute its request units;
- ledger.py: the arithmetic from measured turns to dollars per 1,000 turns;
- __main__.py: `uv run python -m infra.cost [--quick] [--out DIR]`: the measured turns through the
  functions of template.yaml (app, SMS, and LangChain's store), and cost.md (from cost.md.in),
  cost.json and cost.png.
"""
