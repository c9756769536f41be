"""A text space that accepts any Python string, and which strings are text that can be graded.

``gymnasium.spaces.Text`` checks every character against a fixed charset (alphanumerics by
default), which rejects ordinary prose, LaTeX and code. Subclassing it keeps the vector-env
helpers (batching, concatenation) that gymnasium registers for ``Text``.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium.spaces import Text

_SAMPLE_CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n"


class AnyText(Text):
    """Any ``str`` up to ``max_length`` characters; samples are short printable strings."""

    def __init__(self, max_length: int = 10_000_000, *, seed: int | None = None):
        super().__init__(max_length=max_length, min_length=0, charset=_SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            return super().sample(mask=mask, probability=probability)
        length = int(self.np_random.integers(0, 64))
        chars = self.np_random.choice(np.array(list(_SAMPLE_CHARSET)), size=length)
        return "".join(chars.tolist())

    def __repr__(self) -> str:
        return f"AnyText(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, AnyText) and other.max_length == self.max_length


def text_problem(text: str) -> str | None:
    """Why ``text`` is not text that can be graded (``None`` when it is): a lone surrogate such as
    ``"\\ud800"`` is a Python ``str`` but no Unicode text, and UTF-8 (a sandbox program, a
    worker process) cannot encode it. The env grades such a turn ``invalid_text``."""
    if text.isascii():  # the common case, at C speed
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"character {exc.start} is a lone surrogate ({text[exc.start]!r}), which is "
                "not Unicode text")
    return None
