"""Text that can only appear where a checkpoint site is, read by the relevance cut and by the index
(which records, per module, whether it holds any: `ModuleSummary.checkpoint_text`)."""

import re

# A checkpoint API imported under another name is found through the names a statement reads
# instead; a callee in parentheses, `(checkpoint)(fn, x)`, is a call too.
# (`gradient_checkpointing = False`, in every transformers model's __init__, switches nothing on.)
SITE_TEXT = re.compile(r"checkpoint\w*[\s)]*\(|checkpointing\w*\s*=(?!=)(?!\s*(?:False|None)\b)|use_reentrant|GradientCheckpointingLayer")
