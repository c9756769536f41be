"""The one BPF assembler (``sandbox.inside.seccomp``) and the jobs' filter built with it
(``sandbox.inside.job_filter``), checked against hand-assembled programs (no Docker)."""

from __future__ import annotations

import pytest

from sandbox.inside import job_filter
from sandbox.inside.seccomp import ALLOW, ARCH, ARG, EPERM, JEQ, LD_W_ABS, NR, RET, assemble


def test_labels_become_forward_offsets():
    code = [(LD_W_ABS, None, None, NR), (JEQ, "deny", None, 5), (JEQ, None, "deny", 6),
            (RET, None, None, ALLOW), "deny", (RET, None, None, EPERM)]
    assert assemble(code) == [(LD_W_ABS, 0, 0, NR), (JEQ, 2, 0, 5), (JEQ, 0, 1, 6),
                              (RET, 0, 0, ALLOW), (RET, 0, 0, EPERM)]


def test_a_jump_out_of_reach_is_refused():
    # A BPF jump is one byte, forward: a longer one would be cut silently by the kernel's struct.
    ret = (RET, None, None, ALLOW)
    assert assemble([(JEQ, "end", None, 1), *[ret] * 255, "end", ret])[0] == (JEQ, 255, 0, 1)
    with pytest.raises(ValueError, match="out of reach"):
        assemble([(JEQ, "end", None, 1), *[ret] * 256, "end", ret])
    with pytest.raises(ValueError, match="out of reach"):
        assemble(["top", ret, (JEQ, "top", None, 1)])


def test_the_jobs_filter_by_hand():
    # One arch, io_setup always refused, prlimit64 refused for any pid but 0 (the caller).
    numbers = {0xC000003E: [(206, None, 302) + (None,) * 8]}
    got = job_filter.program({"io_setup": None, "prlimit64": (0,)}, numbers)
    assert got == [
        (LD_W_ABS, 0, 0, ARCH), (JEQ, 0, 9, 0xC000003E),  # another arch: to the last ALLOW
        (LD_W_ABS, 0, 0, NR), (JEQ, 0, 1, 206), (RET, 0, 0, EPERM),
        (LD_W_ABS, 0, 0, NR), (JEQ, 0, 3, 302), (LD_W_ABS, 0, 0, ARG[0]), (JEQ, 1, 0, 0),
        (RET, 0, 0, EPERM),
        (RET, 0, 0, ALLOW),
        (RET, 0, 0, ALLOW),
    ]


def test_the_jobs_filter_by_hand_with_values():
    # fcntl refused for one command value, whatever the other arguments.
    numbers = {0xC00000B7: [(None,) * 8 + (25, None, None)]}
    got = job_filter.program({"fcntl": {1: (8,)}}, numbers)
    assert got == [
        (LD_W_ABS, 0, 0, ARCH), (JEQ, 0, 6, 0xC00000B7),
        (LD_W_ABS, 0, 0, NR), (JEQ, 0, 3, 25), (LD_W_ABS, 0, 0, ARG[1]), (JEQ, 0, 1, 8),
        (RET, 0, 0, EPERM),
        (RET, 0, 0, ALLOW),
        (RET, 0, 0, ALLOW),
    ]

