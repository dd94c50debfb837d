"""The emulator's answer to the memory benchmark's judge (`--aws` pointed at the emulator): a test
double for the plumbing, not a grader. It is deterministic, from the request alone:

- gold answer given: CORRECT when every key word of it (words of 3+ characters, or digits) is in
  the coach's answer, WRONG otherwise;
- no gold answer (abstention): CORRECT when the answer says it was not told or does not know;
- a gold answer without a key word: a reply that names no label, as a model that will not grade
  might give (the benchmark must count it as unparseable).
"""

import json
import re
from collections.abc import Sequence
from typing import Any

from infra.local.bedrock_emulator.coach import CoachReply
from infra.local.bedrock_emulator.judge_prompt import JUDGE_SYSTEM_PROMPT, NO_ANSWER
from infra.local.bedrock_emulator.rules import message_text

_GOLD = re.compile(r"^Gold answer: (?P<gold>.*)$", re.MULTILINE)
_ANSWER = re.compile(r"^Coach's answer: (?P<answer>.*)", re.MULTILINE | re.DOTALL)
_WORD = re.compile(r"[a-z]{3,}|\d+")
_NOT_TOLD = re.compile(
    r"\b(?:don['’]?t know|do not know|not sure"
    r"|(?:never|not|haven['’]?t|didn['’]?t|did not) (?:been )?(?:told|mentioned|said))",
    re.IGNORECASE,
)
_STOP = frozenset({"the", "and", "for", "with", "you", "your", "are", "was", "not", "now", "all", "any"})


def is_judge_request(system_text: str) -> bool:
    return system_text.startswith(JUDGE_SYSTEM_PROMPT[:40])


def judge_reply(messages: Sequence[dict[str, Any]]) -> CoachReply:
    text = message_text(messages[-1]) if messages else ""
    gold_match, answer_match = _GOLD.search(text), _ANSWER.search(text)
    gold = gold_match["gold"].strip() if gold_match else ""
    answer = (answer_match["answer"] if answer_match else "").casefold()
    if gold == NO_ANSWER:
        label = "CORRECT" if _NOT_TOLD.search(answer) else "WRONG"
    else:
        keys = [w for w in _WORD.findall(gold.casefold()) if w not in _STOP]
        if not keys:
            return CoachReply("I cannot grade this: the gold answer gives nothing to compare.")
        said = set(_WORD.findall(answer))
        label = "CORRECT" if all(k in said for k in keys) else "WRONG"
    return CoachReply(json.dumps({"label": label}))
