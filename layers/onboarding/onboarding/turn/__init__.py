"""One conversation turn, in the order it runs.

- `service`: `TurnService`, the entry point handlers call: validate, store the message, load (and
  recall), prepare, hand back the turn; delivery marks and the rate limit's notice;
- `orchestrator`: picks the user's current agent and gives it its immutable context (pure);
- `run`: `Turn`, the turn in progress and all of its state: stream the reply, commit what it
  produced, then the fold;
- `fold`: the summary fold after a turn (what it takes is onboarding/summary.py's rules);
- `store`: `TurnStore`, the one door of the service and its turns to the table.

Nothing is re-exported here: importing the package costs nothing, and each name has one home.
"""
