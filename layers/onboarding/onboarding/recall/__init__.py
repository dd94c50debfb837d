"""Owns recalling older messages into the prompt (docs/decisions/0025-recall-of-older-messages.md).

`vectors` (the index: an S3 Vectors index, one vector per message, filtered by user, and what a
message becomes in it), `indexer` (the table's stream into the index, off the hot path),
`recaller` (a turn's query: one embedding and one index query, bounded and never fatal) and
`embeddings` (the embedding model). An erase takes the user's vectors too (onboarding/account.py);
the recalled lines' place in the prompt is llm/sections.py's.
"""
