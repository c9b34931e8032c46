"""Text that can only appear where a checkpoint site is, read by the relevance cut and by the index
(which records, per module, whether it holds any: `ModuleSummary.checkpoint_text`)."""

import re
from typing import Optional

# A checkpoint API imported under another name is found through the names a statement reads
# instead; a callee in parentheses, `(checkpoint)(fn, x)`, is a call too.
# (`gradient_checkpointing = False`, in every transformers model's __init__, switches nothing on.)
SITE_TEXT = re.compile(r"checkpoint\w*[\s)]*\(|checkpointing\w*\s*=(?!=)(?!\s*(?:False|None)\b)|use_reentrant|GradientCheckpointingLayer")


def at_word_start(pattern: re.Pattern[str], text: str, not_after: str = "_") -> Optional[re.Match[str]]:
    """The first match of `pattern` that starts a word (as a leading `\\b` would ask), and follows
    none of the characters `not_after`. A pattern that starts with `\\b` or a lookbehind is tried at
    every offset of a file (1.2 s per pattern over transformers); one that starts with a literal is
    searched for that literal first."""
    for match in pattern.finditer(text):
        start = match.start()
        if start == 0 or not (text[start - 1].isalnum() or text[start - 1] in not_after):
            return match
    return None
