"""The chat template between two policy turns of an episode: the tokens that close the assistant
turn, carry the tool's output in a role the template renders, and open the next assistant turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from transformers import PreTrainedTokenizerBase

#: Roles tried, in order, for observations: the first one the chat template renders is used.
TOOL_ROLES = ("tool", "ipython", "user")
_MARK = "\u2063grpo-gym-turn\u2063"  # an assistant turn no template rewrites
_OBS = "\u2063grpo-gym-observation\u2063"


class TemplateError(RuntimeError):
    """The model's chat template cannot carry a multi-turn conversation."""


def _render(tokenizer: PreTrainedTokenizerBase, role: str, observation: str) -> str:
    return tokenizer.apply_chat_template(  # type: ignore[return-value]  # tokenize=False: a str
        [{"role": "user", "content": "."}, {"role": "assistant", "content": _MARK},
         {"role": role, "content": observation}], tokenize=False, add_generation_prompt=True)


def detect_tool_role(tokenizer: PreTrainedTokenizerBase) -> str:
    """The first of ``TOOL_ROLES`` the template renders after an assistant turn (some templates
    raise on roles they do not know, others drop the message silently)."""
    for role in TOOL_ROLES:
        try:
            text = _render(tokenizer, role, _OBS)
        except Exception:  # noqa: BLE001 - a template refusing the role is the answer
            continue
        if _MARK in text and _OBS in text.split(_MARK, 1)[1]:
            return role
    raise TemplateError("the chat template renders no tool, ipython or user message after an "
                        "assistant turn; it cannot carry a multi-turn episode")


class ChatBridge:
    """The tokens between two policy turns: the end of the assistant turn, the observation in
    the template's tool role (``role``: one of ``TOOL_ROLES`` or ``auto``) and the opening of
    the next assistant turn."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, role: str = "auto"):
        self.tokenizer = tokenizer
        self.role = detect_tool_role(tokenizer) if role == "auto" else role
        try:
            _render(tokenizer, self.role, _OBS)
        except Exception as exc:  # noqa: BLE001
            raise TemplateError(f"the chat template cannot render role '{self.role}': {exc}") \
                from exc

    def text(self, observation: str) -> str:
        rendered = _render(self.tokenizer, self.role, observation)
        return rendered.split(_MARK, 1)[1]

    def tokens(self, observation: str, last_token: int | None = None,
               eos_ids: Sequence[int] = ()) -> list[int]:
        """``last_token``: the policy's last token; when it is an EOS the policy already closed
        its turn, and the template's own closing text is not added a second time."""
        text = self.text(observation)
        if last_token is not None and last_token in eos_ids:
            closing = str(self.tokenizer.decode([last_token]))  # one sequence: one str
            if closing and text.startswith(closing):
                text = text[len(closing):]
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]
