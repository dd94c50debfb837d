"""Owns what of the stored conversation goes into a prompt, as pure functions over
`onboarding.model` messages, so the rules can be checked for all inputs (tests/property): `window`
(where a conversation starts, and the newest whole messages within the budget), `tokens` (the
estimate every budget uses), `transcript` (the `Client:` / `Coach:` lines a summary and a merge
write). What a fold takes for the summary is onboarding/summary.py's.
"""
