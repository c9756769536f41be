"""The seccomp filter every job runs under, on top of the engine's profile: the zygote installs
it in itself, so every job forked from it inherits it and the agent keeps its own rights.

``io_setup`` draws on a quota that is one for the whole host (fs.aio-max-nr); the other calls
would change another process of the same uid, such as the agent (making the job's own run read
as an infrastructure failure) or the zygote (and so every later job): its rlimits, priorities,
scheduling, or name it as the owner of a file's I/O signals (fcntl ``F_SETOWN``,
``F_SETOWN_EX``, ``F_SETSIG``; ioctl ``FIOSETOWN``, ``SIOCSPGRP`` on a socket), with which
``O_ASYNC`` sends it any signal the job likes.

Every ABI a job can reach is filtered (on x86-64 also x32 and i386); an architecture not in
``SYSCALL_NUMBERS`` is not filtered at all.
"""

from __future__ import annotations

from sandbox.inside.seccomp import (
    ALLOW,
    ARCH,
    ARG,
    EPERM,
    JEQ,
    LD_W_ABS,
    NR,
    RET,
    X32_BIT,
    assemble,
)

F_SETOWN, F_SETSIG, F_SETOWN_EX = 8, 10, 15
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902
_SET_OWNER = {1: (F_SETOWN, F_SETSIG, F_SETOWN_EX)}
#: Call name -> None (always EPERM), a tuple of argument indexes of which any non-zero one makes
#: it EPERM (a pid, or "who", of 0 is the caller itself), or {argument index: values} of which
#: any one makes it EPERM.
DENIED = {"io_setup": None, "ioprio_set": None, "prlimit64": (0,), "setpriority": (0, 1),
          "sched_setparam": (0,), "sched_setscheduler": (0,), "sched_setaffinity": (0,),
          "sched_setattr": (0,), "fcntl": _SET_OWNER, "fcntl64": _SET_OWNER,
          "ioctl": {1: (FIOSETOWN, SIOCSPGRP)}}
_NAMES = ("io_setup", "ioprio_set", "prlimit64", "setpriority", "sched_setparam",
          "sched_setscheduler", "sched_setaffinity", "sched_setattr", "fcntl", "fcntl64", "ioctl")
#: Per audit arch, the numbers of ``_NAMES`` in each ABI a job can reach (None: not in it): on
#: x86-64 that includes x32 (same arch, numbers with bit 30 set) and i386 (int 0x80 from 64-bit
#: code).
SYSCALL_NUMBERS: dict[int, list[tuple[int | None, ...]]] = {
    0xC000003E: [(206, 251, 302, 141, 142, 144, 203, 314, 72, None, 16),
                 tuple(X32_BIT | n for n in (543, 251, 302, 141, 142, 144, 203, 314, 72))
                 + (None, X32_BIT | 514)],
    0x40000003: [(245, 289, 340, 97, 154, 156, 241, 351, 55, 221, 54)],
    0xC00000B7: [(0, 30, 261, 140, 118, 119, 122, 274, 25, None, 29)],
}


def program(denied: dict | None = None, numbers: dict | None = None
            ) -> list[tuple[int, int, int, int]]:
    """The BPF instructions (code, jt, jf, k) that fail ``denied`` calls with EPERM and allow
    everything else; unknown architectures are not filtered."""
    denied = DENIED if denied is None else denied
    labels = iter(range(1 << 30))
    code: list[tuple | str] = []
    for arch, abis in (SYSCALL_NUMBERS if numbers is None else numbers).items():
        other_arch = f"arch{next(labels)}"
        code += [(LD_W_ABS, None, None, ARCH), (JEQ, None, other_arch, arch)]
        for abi in abis:
            for name, nr in zip(_NAMES, abi, strict=True):
                if nr is None or name not in denied:
                    continue
                rule = denied[name]
                # Each test reloads the call's number, so that it stands alone; the arguments'
                # low 32 bits are read: the kernel reads an int for each of them.
                if rule is None:
                    skip = f"r{next(labels)}"
                    code += [(LD_W_ABS, None, None, NR), (JEQ, None, skip, nr),
                             (RET, None, None, EPERM), skip]
                elif isinstance(rule, dict):  # any of the values
                    for arg, values in rule.items():
                        for value in values:
                            skip = f"r{next(labels)}"
                            code += [(LD_W_ABS, None, None, NR), (JEQ, None, skip, nr),
                                     (LD_W_ABS, None, None, ARG[arg]), (JEQ, None, skip, value),
                                     (RET, None, None, EPERM), skip]
                else:  # any non-zero argument (pids and "who")
                    for arg in rule:
                        skip = f"r{next(labels)}"
                        code += [(LD_W_ABS, None, None, NR), (JEQ, None, skip, nr),
                                 (LD_W_ABS, None, None, ARG[arg]), (JEQ, skip, None, 0),
                                 (RET, None, None, EPERM), skip]
        code += [(RET, None, None, ALLOW), other_arch]
    code.append((RET, None, None, ALLOW))
    return assemble(code)
