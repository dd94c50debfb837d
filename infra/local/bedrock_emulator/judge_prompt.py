"""The judge's prompt, apart from the judge (no imports): the emulator's test-double judge
recognises it without loading what the real one needs."""

NO_ANSWER = "(none: the client never said this)"

JUDGE_SYSTEM_PROMPT = (
    "You are grading a fitness coach's memory. Label the coach's answer to a client's question as "
    "CORRECT or WRONG. You get the question, the gold answer (the ground truth from earlier "
    "conversations) and the coach's answer. Be generous about wording and extra detail: if the "
    "answer gives the same fact as the gold answer (the same value, date or thing), it is CORRECT; "
    "if it gives another value, an old value the client has since corrected, or does not answer, "
    "it is WRONG. When the gold answer is " + NO_ANSWER + ", the client never gave that "
    "information: the answer is CORRECT only if it says it does not know or was not told (asking "
    "the client is fine), and WRONG if it states any value. "
    'Reply with JSON only: {"label": "CORRECT"} or {"label": "WRONG"}.'
)
