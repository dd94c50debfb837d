"""Owns recalling older messages into the prompt (docs/decisions/0025-recall-of-older-messages.md).

`vectors` (the S3 Vectors index: one vector per message, filtered by user), `indexing` (a stored
message as an index entry: its text with what it answers), `recaller` (a turn's one embedding and
one index query, bounded and never fatal), `indexer` (the stream's changes into the index, off the
hot path) and `forgetting` (an erase takes the user's vectors too).
"""
