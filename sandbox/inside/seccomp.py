"""The seccomp-BPF pieces both filters share: the opcodes and return values they use, the
assembler that turns labelled jumps into offsets, and the call that installs a program.

Standard library only: it is shipped into the container (see ``sandbox.bundle``) for the judge's
filter (``no_signals``) and the jobs' own (``job_filter``, installed by the zygote), and
``sandbox.host_confine`` uses it on the host.
"""

from __future__ import annotations

import ctypes

LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW, EPERM, ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
#: Offsets in struct seccomp_data: the syscall number, the architecture, then arguments 0 to 2
#: (their low 32 bits, little-endian).
NR, ARCH, ARG = 0, 4, (16, 24, 32)
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_BIT = 0x40000000  # x86_64's second ABI: its calls are refused, not filtered twice


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def assemble(code: list[tuple | str]) -> list[tuple[int, int, int, int]]:
    """Instructions ``(op, jt, jf, k)`` whose jump targets are label names (or None), with the
    labels as strings between them, into BPF's relative offsets."""
    labels: dict[str, int] = {}
    body: list[tuple] = []
    for item in code:
        if isinstance(item, str):
            labels[item] = len(body)
        else:
            body.append(item)

    def offset(i: int, target: str | None) -> int:
        jump = 0 if target is None else labels[target] - i - 1
        if not 0 <= jump <= 255:  # a jump is one byte, forward only
            raise ValueError(f"seccomp program: jump to {target!r} out of reach ({jump})")
        return jump

    return [(op, offset(i, jt), offset(i, jf), k) for i, (op, jt, jf, k) in enumerate(body)]


def install(insns: list[tuple[int, int, int, int]]) -> None:
    """Install the program in this process, for good (it survives ``fork`` and ``exec``);
    raises ``OSError`` if the kernel refuses it."""
    array = (_Filter * len(insns))(*(_Filter(*i) for i in insns))
    prog = _Program(len(insns), array)
    libc = ctypes.CDLL(None, use_errno=True)
    # PR_SET_NO_NEW_PRIVS (required to install a filter), then PR_SET_SECCOMP, MODE_FILTER.
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp filter refused")
