"""Owns what of the stored conversation goes into a prompt, and what is folded into the summary.

Pure functions over `onboarding.model` messages, so the rules can be checked for all inputs
(tests/property): `conversations` (where a conversation starts), `window` (the newest whole
messages within the budget), `fold` (what leaves the window for the summary), `tokens` (the
estimate every budget uses).
"""
