"""Owns recalling older messages into the prompt (docs/decisions/0025-recall-of-older-messages.md,
docs/decisions/0033-hybrid-recall.md).

`vectors` (the index: an S3 Vectors index, one vector and the words of one message, filtered by
user, searched by embedding and by BM25, and what a message becomes in it), `indexer` (the
table's stream into the index, off the hot path), `recaller` (a turn's query: one index query,
hybrid by default, bounded and never fatal) and `embeddings` (the embedding model). An erase
takes the user's vectors too (onboarding/account.py); the recalled lines' place in the prompt is
llm/sections.py's.
"""
