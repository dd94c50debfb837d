"""The memory console: a page on the local stack that shows, turn by turn, what the coach's model got
(system prompt by section, the window, what was left out and why, the token budget), the user's
memory, and each turn's figures. `python -m infra.console`; see its module docstring."""
