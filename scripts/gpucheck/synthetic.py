"""A task any random-init model can learn in a few dozen steps: say one word, again and again.

The vocabulary is 16 words (a word-level tokenizer made here, with a chat template), so a
random policy already says the target about one token in 13 and every group has a reward
spread from the first step; the reward is the share of the completion's words that are the
target. With the embedded model's 49,152 tokens a random policy would almost never say it, and
GRPO learns nothing from groups whose rewards are all 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from envs.base import TaskEnv
from envs.verify.verdict import Verdict
from tasks import Task

SPECIALS = ("<pad>", "<eos>", "<unk>")
WORDS = ("say", "the", "word", "red", "green", "blue", "cat", "dog", "sun", "moon", "one",
         "two", "yes")
TARGET = "green"
PROMPT = "say the word green"
# A user turn, then the assistant's turn opened: as a chat model's template does.
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['content'] }} {% endfor %}"
                 "{% if add_generation_prompt %}yes {% endif %}")


def save_tokenizer(folder: Path) -> Path:
    """The 16-word tokenizer, saved as a folder ``from_pretrained`` loads."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(SPECIALS + WORDS)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##")  # joins words with one space
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>",
                                        eos_token="<eos>", unk_token="<unk>")
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)
    return folder


def model_config(layers: int = 2, hidden: int = 64) -> Any:
    """A tiny Llama over the 16 words (tied head, EOS and pad as the tokenizer's)."""
    from transformers import LlamaConfig

    heads = max(1, hidden // 32)
    return LlamaConfig(vocab_size=len(SPECIALS) + len(WORDS), hidden_size=hidden,
                       intermediate_size=2 * hidden, num_hidden_layers=layers,
                       num_attention_heads=heads, num_key_value_heads=heads,
                       max_position_embeddings=256, tie_word_embeddings=True,
                       pad_token_id=0, eos_token_id=1, bos_token_id=None)


def save_model(folder: Path, *, layers: int = 2, hidden: int = 64, seed: int = 0) -> Path:
    """A random-init model and the tokenizer in ``folder``, loadable as ``--model folder``."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(model_config(layers, hidden)).save_pretrained(folder)
    return save_tokenizer(folder)


def share(completion: str) -> float:
    """The share of the completion's words that are the target (0 for an empty one)."""
    words = completion.split()
    return words.count(TARGET) / len(words) if words else 0.0


class SayWordEnv(TaskEnv):
    """Over the arith pack's task stream (for its ids and splits only): every prompt asks for
    the target word, and the reward is the share of the completion that is that word."""

    env_id: ClassVar[str] = ""
    default_pack: ClassVar[str] = "arith"
    default_weights: ClassVar[dict[str, float]] = {"target": 1.0}

    def __init__(self, **kwargs: Any):
        kwargs.setdefault("level", 1)
        super().__init__(**kwargs)

    def prompt(self, task: Task) -> str:
        return PROMPT

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        got = share(completion)
        return {"target": got}, Verdict.ok() if got >= 0.9 else Verdict.fail("not_target")


#: The CLI phase's env id (registered by ``scripts.gpucheck.cli_env``).
BRIEF_ENV_ID = "gpucheck/Brief-v0"
#: Characters at which the brevity reward reaches 0.
BRIEF_CHARS = 2000


def brevity(completion: str) -> float:
    """1 for an empty completion, falling linearly to 0 at ``BRIEF_CHARS`` characters."""
    return max(0.0, 1.0 - len(completion) / BRIEF_CHARS)


class BriefEnv(TaskEnv):
    """The CLI phase's env: the arith pack's prompts, rewarded for brevity in characters. A
    random-init model writes completions of equal token counts but unequal character counts,
    so every group has a reward spread and every step updates (on MathExact it earns nothing:
    each update was skipped and the phase had no train time to report)."""

    env_id: ClassVar[str] = ""
    default_pack: ClassVar[str] = "arith"
    default_weights: ClassVar[dict[str, float]] = {"brevity": 1.0}

    def __init__(self, **kwargs: Any):
        kwargs.setdefault("level", 1)
        super().__init__(**kwargs)

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        got = brevity(completion)
        return {"brevity": got}, Verdict.ok() if got >= 0.9 else Verdict.fail("too_long")
