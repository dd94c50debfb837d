"""One conversation turn, in the order it runs.

- `service`: `TurnService`, the entry point handlers call: validate, store the message, load (and
  recall), prepare, hand back the turn; and the turn's other doors to the store (delivery marks,
  the rate limit's notice);
- `orchestrator`: picks the user's current agent and gives it its immutable context (pure);
- `run`: `Turn`, the turn in progress and all of its state: stream the reply, commit what it
  produced, then the fold (what it takes is onboarding/summary.py's).

Nothing is re-exported here: importing the package costs nothing, and each name has one home.
"""
