"""One conversation turn, in the order it runs.

- `service`: `TurnService`, the entry point handlers call: validate, store the message, load (and
  recall), prepare, hand back the turn;
- `orchestrator`: picks the user's current agent and gives it its immutable context (pure);
- `run`: `Turn`, the turn in progress: stream the reply, commit what it produced, then the fold;
- `parts`: the named parts a turn is built from, and its result;
- `summary_fold`: the fold after a turn (reads the oldest unsummarized messages, asks the
  summarizer, saves the summary); which messages it takes is `memory.fold_rules`, the model call
  `llm.summarizer`.

Nothing is re-exported here: importing the package costs nothing, and each name has one home.
"""
