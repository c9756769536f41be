"""Lines a completion copied from its prompt, taken out before a math answer is looked for:
an instruction's example box is the prompt's, not the model's answer."""

from __future__ import annotations


def without_copied_instructions(prompt: str, completion: str) -> str:
    """``completion`` less every copy of a prompt line that shows a box. An instruction's example
    (arith's "for example: The answer is \\boxed{42}") is not an answer: the prompt echoed back
    would otherwise be paid on every task whose answer is the example's. Only a whole line,
    copied as written (give or take its closing punctuation), is taken out, so an honest
    "The answer is \\boxed{42}." still counts."""
    for line in prompt.splitlines():
        line = line.strip().rstrip(".!:; ")
        if "\\boxed" in line and line in completion:
            completion = completion.replace(line, "")
    return completion
